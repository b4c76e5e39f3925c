// Polling for conditions that become true on their own (replication, fencing, reconnects).
import { type EventuallyOptions, eventually as poll } from "../../support/eventually.js";

/** Containers start, restart and replicate in seconds: a longer wait and a slower poll by default. */
const CONTAINER_WAIT = { timeoutMs: 30_000, intervalMs: 250 };

/** The tests' one `eventually` (test/support/eventually.ts), with the container defaults. */
export function eventually<T>(check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Exclude<T, false>> {
  return poll(check, { ...CONTAINER_WAIT, ...options });
}
