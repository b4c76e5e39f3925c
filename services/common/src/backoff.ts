import { type BackoffOptions, backoffDelayMs, DEFAULT_BACKOFF } from "./pure/backoff.js";

/** Exponential back-off with jitter for reconnect loops; `reset()` after a success. */
export class Backoff {
  private attempt = 0;
  private readonly options: BackoffOptions;

  constructor(options: Partial<BackoffOptions> = {}) {
    this.options = { ...DEFAULT_BACKOFF, ...options };
  }

  nextDelayMs(): number {
    const delay = backoffDelayMs(this.attempt, { ...this.options, random: this.options.random ?? Math.random });
    this.attempt += 1;
    return delay;
  }

  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** True when `work` settles within `ms`, false when the time ran out first (the work goes on). */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    work.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]);
  clearTimeout(timer);
  return outcome;
}
