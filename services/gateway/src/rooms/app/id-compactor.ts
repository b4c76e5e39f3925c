import type { Logger } from "@hermes/common";
import type { RoomsStore } from "../store/rooms-store.js";

/** The longest wait before a failed merge step is tried again. */
const MAX_RETRY_MS = 60_000;
/** How often id indexes unused since the last look are dropped from memory (so after 5–10 idle minutes). */
export const ID_RELEASE_INTERVAL_MS = 5 * 60_000;

/**
 * Keeps the rooms' event id indexes in shape between other work. Merges (RoomsStore.compactIds):
 * one step, one short transaction, per turn of the event loop, for as long as there is merging to
 * do; a failed step (a full disk) is logged and tried again later, backing off: merging only makes
 * look-ups cheaper, nothing waits on it. Memory (RoomsStore.releaseIdleIds): every
 * ID_RELEASE_INTERVAL_MS, the indexes of rooms that had no use since are dropped, so a gateway
 * holds the ids of the rooms in use, not of every room it has opened since it started.
 */
export class IdCompactor {
  private scheduled = false;
  private failures = 0;

  constructor(
    private readonly store: RoomsStore,
    private readonly logger: Logger,
    releaseIntervalMs = ID_RELEASE_INTERVAL_MS,
  ) {
    store.idWork = () => this.kick();
    const release = setInterval(() => {
      // The database closes with its gateway: then this ends too.
      if (!store.db.open) clearInterval(release);
      else this.release();
    }, releaseIntervalMs);
    release.unref();
  }

  private release(): void {
    const released = this.store.releaseIdleIds();
    if (released === 0) return;
    this.logger.debug({ released, loaded: this.store.loadedIdIndexes() }, "idle rooms' event id indexes released from memory");
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
