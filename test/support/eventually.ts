/**
 * The one way tests wait for something that happens on its own (a commit reaching a follower, a
 * receipt settling, a daemon logging a line): poll a check, bounded. Tests never sleep a fixed time
 * and then look; they wait for the event or state itself.
 */

export interface EventuallyOptions {
  /** Give up after this long (default 15 s: long enough for a loaded machine, short next to a test's own timeout). */
  timeoutMs?: number;
  /** Time between two checks (default 20 ms). */
  intervalMs?: number;
  /** What is awaited, for the message when the time is up. */
  what?: string;
}

/**
 * Re-runs `check` until it neither throws nor returns `false`, and returns what it returned. A check
 * is either an assertion (`() => expect(x).toBe(1)`) or a test (`() => rows.length > 2`, or a value
 * that is `false` while not ready). When the time is up, the last failed assertion is rethrown (its
 * diff intact) with the wait's description in front. Deadlines use the monotonic clock, so a test
 * that moves the wall clock (a fake `Date`) does not end or stretch the wait.
 */
export async function eventually<T>(check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Exclude<T, false>> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const intervalMs = options.intervalMs ?? 20;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let failure: unknown;
    try {
      const value = await check();
      if (value !== false) return value as Exclude<T, false>;
    } catch (err) {
      failure = err;
    }
    if (performance.now() >= deadline) throw timedOut(timeoutMs, options.what, failure);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

function timedOut(timeoutMs: number, what: string | undefined, failure: unknown): Error {
  const waited = `timed out after ${timeoutMs} ms waiting for ${what ?? "the condition"}`;
  if (failure instanceof Error) {
    failure.message = `${waited}: ${failure.message}`;
    return failure;
  }
  return new Error(failure === undefined ? waited : `${waited}: ${String(failure)}`);
}
