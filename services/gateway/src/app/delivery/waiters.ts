import type { Receipt } from "../../core/delivery/receipt.js";

interface Entry {
  resolve: ((receipt: Receipt) => void)[];
  reject: ((err: unknown) => void)[];
  progress: ((receipt: Receipt) => void)[];
}

/**
 * Callers waiting for deliveries to end (a local sender, a peer's Deliver call, `message --wait`),
 * keyed by delivery id. In memory only: after a restart nobody is waiting any more, and the durable
 * rows say where each delivery stands.
 */
export class OutcomeWaiters {
  private readonly entries = new Map<string, Entry>();

  wait(deliveryId: string, onProgress?: (receipt: Receipt) => void, signal?: AbortSignal): Promise<Receipt> {
    let entry = this.entries.get(deliveryId);
    if (!entry) {
      entry = { resolve: [], reject: [], progress: [] };
      this.entries.set(deliveryId, entry);
    }
    const e = entry;
    if (onProgress) e.progress.push(onProgress);
    return new Promise<Receipt>((resolve, reject) => {
      e.resolve.push(resolve);
      e.reject.push(reject);
      signal?.addEventListener(
        "abort",
        () => {
          const i = e.resolve.indexOf(resolve);
          if (i >= 0) {
            e.resolve.splice(i, 1);
            e.reject.splice(i, 1);
          }
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  has(deliveryId: string): boolean {
    return this.entries.has(deliveryId);
  }

  progress(receipt: Receipt): void {
    for (const fn of this.entries.get(receipt.delivery_id)?.progress ?? []) fn(receipt);
  }

  /**
   * The delivery ended: progress listeners hear it first, synchronously (so a local sender records
   * it in the same transaction), then every waiter gets the receipt.
   */
  ended(receipt: Receipt): void {
    const entry = this.entries.get(receipt.delivery_id);
    if (!entry) return;
    this.entries.delete(receipt.delivery_id);
    for (const fn of entry.progress) fn(receipt);
    for (const fn of entry.resolve) fn(receipt);
  }

  /** Nobody will get an answer from this process (stopping): waiters are told why. */
  abandon(deliveryId: string, err: unknown): void {
    const entry = this.entries.get(deliveryId);
    if (!entry) return;
    this.entries.delete(deliveryId);
    for (const fn of entry.reject) fn(err);
  }

  abandonAll(err: unknown): void {
    for (const id of [...this.entries.keys()]) this.abandon(id, err);
  }
}
