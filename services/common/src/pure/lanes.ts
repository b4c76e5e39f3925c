/**
 * Per-target ordered lanes (Synapse's per-destination queues, upstream's `<connection>\0<profile>`
 * lanes): a lane delivers one item at a time, in seq order, and the next only after the previous
 * one finished. Different lanes run in parallel up to a cap, oldest head first. The relay's
 * deliveries and the gateway's delivery machines (turns per target bot, sends per remote target)
 * are scheduled with it.
 *
 * Pure bookkeeping: the owner asks `take()` what to start now and reports `finish()`.
 */
export interface LaneItem {
  lane: string;
  id: string;
  seq: number;
}

export class LaneScheduler {
  private readonly lanes = new Map<string, LaneItem[]>();
  private readonly busy = new Map<string, string>();
  private readonly where = new Map<string, string>();

  constructor(private readonly maxParallel: number) {
    if (!Number.isInteger(maxParallel) || maxParallel < 1)
      throw new RangeError(`maxParallel must be a positive integer, got ${maxParallel}`);
  }

  /** Adds an item in seq order (an item already present is left where it is). */
  enqueue(item: LaneItem): void {
    if (this.where.has(item.id)) return;
    const queue = this.lanes.get(item.lane) ?? [];
    let i = queue.length;
    while (i > 0 && queue[i - 1]!.seq > item.seq) i--;
    queue.splice(i, 0, item);
    this.lanes.set(item.lane, queue);
    this.where.set(item.id, item.lane);
  }

  /** Forgets an item that is queued (expired, or its connection revoked). A running item is left to `finish`. */
  remove(id: string): void {
    const lane = this.where.get(id);
    if (lane === undefined || this.busy.get(lane) === id) return;
    const queue = this.lanes.get(lane)!;
    queue.splice(
      queue.findIndex((x) => x.id === id),
      1,
    );
    if (queue.length === 0) this.lanes.delete(lane);
    this.where.delete(id);
  }

  /**
   * The items to start now: the head of every idle lane whose target can take it (`isOpen`), oldest
   * head first, while fewer than the cap are running. Each returned item is marked running.
   */
  take(isOpen: (lane: string) => boolean): LaneItem[] {
    const free = this.maxParallel - this.busy.size;
    if (free <= 0) return [];
    const heads: LaneItem[] = [];
    for (const [lane, queue] of this.lanes) {
      if (this.busy.has(lane) || queue.length === 0 || !isOpen(lane)) continue;
      heads.push(queue[0]!);
    }
    heads.sort((a, b) => a.seq - b.seq);
    const started = heads.slice(0, free);
    for (const item of started) this.busy.set(item.lane, item.id);
    return started;
  }

  /**
   * The running item of a lane is over. `keep` puts it back at the head (it was not delivered: its
   * target went away before answering, or the relay is handing it over); otherwise it leaves the lane.
   */
  finish(id: string, keep = false): void {
    const lane = this.where.get(id);
    if (lane === undefined || this.busy.get(lane) !== id) return;
    this.busy.delete(lane);
    if (keep) return;
    const queue = this.lanes.get(lane)!;
    queue.shift();
    if (queue.length === 0) this.lanes.delete(lane);
    this.where.delete(id);
  }

  /**
   * A lane's target was renamed: its items (running and queued, in order) go on under the new name,
   * so items enqueued under the new name queue behind them. Nothing happens when `newLane` exists.
   */
  rename(oldLane: string, newLane: string): void {
    const queue = this.lanes.get(oldLane);
    if (queue === undefined || this.lanes.has(newLane)) return;
    this.lanes.delete(oldLane);
    this.lanes.set(newLane, queue);
    for (const item of queue) {
      item.lane = newLane;
      this.where.set(item.id, newLane);
    }
    const running = this.busy.get(oldLane);
    if (running !== undefined) {
      this.busy.delete(oldLane);
      this.busy.set(newLane, running);
    }
  }

  isRunning(id: string): boolean {
    const lane = this.where.get(id);
    return lane !== undefined && this.busy.get(lane) === id;
  }

  has(id: string): boolean {
    return this.where.has(id);
  }

  /** Items waiting (not running) and running. */
  depth(): { queued: number; running: number } {
    let total = 0;
    for (const q of this.lanes.values()) total += q.length;
    return { queued: total - this.busy.size, running: this.busy.size };
  }

  /** The ids running in lanes for which `match` holds (e.g. every lane of one connection). */
  runningIn(match: (lane: string) => boolean): string[] {
    return [...this.busy].filter(([lane]) => match(lane)).map(([, id]) => id);
  }

  /** The ids queued (running or not) in lanes for which `match` holds. */
  idsIn(match: (lane: string) => boolean): string[] {
    return [...this.lanes].filter(([lane]) => match(lane)).flatMap(([, q]) => q.map((x) => x.id));
  }
}
