import type { Receipt } from "../core/receipt.js";

interface Entry {
  resolve: ((receipt: Receipt) => void)[];
  reject: ((err: unknown) => void)[];
}

/**
 * Callers waiting for deliveries to end (a peer's Deliver call, the relay, `message --wait`), keyed
 * by delivery id. In memory only: after a restart nobody is waiting any more, and the durable rows
 * say where each delivery stands.
 */
export class OutcomeWaiters {
  private readonly entries = new Map<string, Entry>();

  wait(deliveryId: string, signal?: AbortSignal): Promise<Receipt> {
    let entry = this.entries.get(deliveryId);
    if (!entry) {
      entry = { resolve: [], reject: [] };
      this.entries.set(deliveryId, entry);
    }
    const e = entry;
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

  /** The delivery ended: every waiter gets the receipt. */
  ended(receipt: Receipt): void {
    const entry = this.entries.get(receipt.delivery_id);
    if (!entry) return;
    this.entries.delete(receipt.delivery_id);
    for (const fn of entry.resolve) fn(receipt);
  }

  /** Nobody will get an answer from this process (stopping): waiters are told why. */
  abandonAll(err: unknown): void {
    for (const [id, entry] of [...this.entries]) {
      this.entries.delete(id);
      for (const fn of entry.reject) fn(err);
    }
  }
}
