import type { Logger } from "@hermes/common";
import type { RoomsStore } from "../../store/rooms-store.js";

/** The longest wait before a failed merge step is tried again. */
const MAX_RETRY_MS = 60_000;

/**
 * Runs the merges of the rooms' event id indexes (RoomsStore.compactIds) between other work: one
 * step, one short transaction, per turn of the event loop, for as long as there is merging to do.
 * A failed step (a full disk) is logged and tried again later, backing off: merging only makes
 * look-ups cheaper, nothing waits on it.
 */
export class IdCompactor {
  private scheduled = false;
  private failures = 0;

  constructor(
    private readonly store: RoomsStore,
    private readonly logger: Logger,
  ) {
    store.idWork = () => this.kick();
  }

  kick(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.step());
  }

  private step(): void {
    this.scheduled = false;
    if (!this.store.db.open) return;
    try {
      const more = this.store.compactIds();
      this.failures = 0;
      if (more) this.kick();
    } catch (err) {
      this.failures++;
      const wait = Math.min(MAX_RETRY_MS, 1000 * 2 ** (this.failures - 1));
      this.logger.warn({ err, retry_in_ms: wait }, "merging a room's event id index failed; it is tried again later");
      setTimeout(() => this.kick(), wait).unref();
    }
  }
}
