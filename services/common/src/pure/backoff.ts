export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  multiplier: number;
  /** Fraction of the delay randomised either way (0.2 → ±20 %). */
  jitter: number;
  /** The source of the jitter, in [0, 1): injected, so the delay is a pure function of its inputs. */
  random?: () => number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 250, maxMs: 30_000, multiplier: 1.6, jitter: 0.2 };

/**
 * The delay before retry number `attempt` (0 for the first): exponential, capped, with jitter. A
 * pure function of its inputs (with `random` injected), for state machines that keep the attempt
 * count in their own state.
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions & { random: () => number }): number {
  const { initialMs, maxMs, multiplier, jitter, random } = options;
  const base = Math.min(maxMs, initialMs * multiplier ** attempt);
  return Math.max(0, Math.round(base * (1 + jitter * (2 * random() - 1))));
}
