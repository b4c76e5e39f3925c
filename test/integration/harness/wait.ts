// Polling for conditions that become true on their own (replication, fencing, reconnects).

/**
 * Re-runs `check` (which throws or returns false while the condition does not hold) every
 * `intervalMs` until it passes; after `timeoutMs` throws with `what` and the last failure.
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | false> | T | false,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let last: unknown = "condition was false";
  for (;;) {
    try {
      const value = await check();
      if (value !== false) return value;
      last = "condition was false";
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? last.message : String(last);
      throw new Error(`timed out waiting for ${what}: ${detail}`);
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 250));
  }
}
