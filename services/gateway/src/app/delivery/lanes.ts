import { HermesError } from "@hermes/common";
import PQueue from "p-queue";

/**
 * Per-target lanes: one p-queue of concurrency 1 per target (mail to one bot runs in order, one
 * turn at a time) behind one shared cap (how many targets run at once). A lane job waits for a cap
 * slot only when it is its lane's turn, so one busy target never holds back another's mail.
 */
export class TargetLanes {
  private readonly lanes = new Map<string, PQueue>();
  /** Delivery ids with a job queued or running, so recovery and duplicates never schedule twice. */
  private readonly scheduled = new Set<string>();
  private closed = false;
  /** Jobs running at once across lanes, and the most seen (the ordering test reads the overlap). */
  running = 0;
  maxRunning = 0;

  constructor(readonly cap: PQueue) {}

  isScheduled(deliveryId: string): boolean {
    return this.scheduled.has(deliveryId);
  }

  /** Queues `job` at the end of `target`'s lane; it runs inside a cap slot. False when closed or already queued. */
  add(target: string, deliveryId: string, job: () => Promise<void>): boolean {
    if (this.closed || this.scheduled.has(deliveryId)) return false;
    let lane = this.lanes.get(target);
    if (!lane) {
      const created = new PQueue({ concurrency: 1 });
      created.on("idle", () => {
        if (created.size > 0 || created.pending > 0) return;
        // Under the key it has now (a rename may have moved it).
        for (const [key, queue] of this.lanes) if (queue === created) this.lanes.delete(key);
      });
      this.lanes.set(target, created);
      lane = created;
    }
    this.scheduled.add(deliveryId);
    void lane
      .add(async () => {
        if (this.closed) return;
        await job();
      })
      .finally(() => this.scheduled.delete(deliveryId));
    return true;
  }

  /**
   * The target was renamed: its lane (running and queued jobs, in order) goes on under the new
   * name, so mail sent after the rename queues behind mail sent before it.
   */
  rename(oldTarget: string, newTarget: string): void {
    const lane = this.lanes.get(oldTarget);
    if (!lane || this.lanes.has(newTarget)) return;
    this.lanes.delete(oldTarget);
    this.lanes.set(newTarget, lane);
  }

  /** Runs `fn` in a cap slot (called from inside a lane job), counting the overlap. */
  inSlot<T>(fn: () => Promise<T>): Promise<T> {
    return this.cap.add(async () => {
      // Closed while waiting for the slot: the row stays queued for the next start.
      if (this.closed) throw new HermesError("runtime_offline", "the gateway is stopping");
      this.running++;
      this.maxRunning = Math.max(this.maxRunning, this.running);
      try {
        return await fn();
      } finally {
        this.running--;
      }
    }) as Promise<T>;
  }

  /** Jobs queued or running in all lanes. */
  depth(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.size + lane.pending;
    return n;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Stops taking jobs and drops the queued ones (their rows stay queued in the database). */
  close(): void {
    this.closed = true;
    for (const lane of this.lanes.values()) lane.clear();
  }

  async idle(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((l) => l.onIdle()));
  }
}
