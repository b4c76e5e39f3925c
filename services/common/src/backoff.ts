export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  multiplier: number;
  /** Fraction of the delay randomised either way (0.2 → ±20 %). */
  jitter: number;
  random?: () => number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 250, maxMs: 30_000, multiplier: 1.6, jitter: 0.2 };

/**
 * The delay before retry number `attempt` (0 for the first): exponential, capped, with jitter. A
 * pure function of its inputs (with `random` injected), for state machines that keep the attempt
 * count in their own state.
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions): number {
  const { initialMs, maxMs, multiplier, jitter, random = Math.random } = options;
  const base = Math.min(maxMs, initialMs * multiplier ** attempt);
  return Math.max(0, Math.round(base * (1 + jitter * (2 * random() - 1))));
}

/** Exponential back-off with jitter for reconnect loops; `reset()` after a success. */
export class Backoff {
  private attempt = 0;
  private readonly options: BackoffOptions;

  constructor(options: Partial<BackoffOptions> = {}) {
    this.options = { ...DEFAULT_BACKOFF, ...options };
  }

  nextDelayMs(): number {
    const delay = backoffDelayMs(this.attempt, this.options);
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
