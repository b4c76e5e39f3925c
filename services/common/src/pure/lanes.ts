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

/** A lane's head that may start, as it was when it was offered (checked again when it comes up). */
interface ReadyHead {
  lane: string;
  id: string;
  seq: number;
  /** Offer order, for equal seqs. */
  order: number;
}

const earlier = (a: ReadyHead, b: ReadyHead) => a.seq < b.seq || (a.seq === b.seq && a.order < b.order);

export class LaneScheduler {
  private readonly lanes = new Map<string, LaneItem[]>();
  private readonly busy = new Map<string, string>();
  private readonly where = new Map<string, string>();
  /**
   * The heads of idle lanes, oldest first (a binary heap by seq), so `take` looks at the lanes it
   * starts instead of at every lane. A head is offered when it becomes its idle lane's head; an
   * entry that is no longer that (started, removed, renamed, overtaken) is dropped when it comes up.
   */
  private readonly ready: ReadyHead[] = [];
  /** The head each lane has an entry for in `ready`: at most one live entry per lane. */
  private readonly offered = new Map<string, string>();
  private offers = 0;

  constructor(private readonly maxParallel: number) {
    if (!Number.isInteger(maxParallel) || maxParallel < 1)
      throw new RangeError(`maxParallel must be a positive integer, got ${maxParallel}`);
  }

  /**
   * Adds an item in seq order behind the lane's running item, if any (an item already present is
   * left where it is).
   */
  enqueue(item: LaneItem): void {
    if (this.where.has(item.id)) return;
    const queue = this.lanes.get(item.lane) ?? [];
    // The running item stays at the head: `finish` takes it off from there.
    const first = this.busy.has(item.lane) ? 1 : 0;
    let i = queue.length;
    while (i > first && queue[i - 1]!.seq > item.seq) i--;
    queue.splice(i, 0, item);
    this.lanes.set(item.lane, queue);
    this.where.set(item.id, item.lane);
    if (i === 0) this.offerHead(item.lane);
  }

  /** Forgets an item that is queued (expired, or its connection revoked). A running item is left to `finish`. */
  remove(id: string): void {
    const lane = this.where.get(id);
    if (lane === undefined || this.busy.get(lane) === id) return;
    const queue = this.lanes.get(lane)!;
    const at = queue.findIndex((x) => x.id === id);
    queue.splice(at, 1);
    if (queue.length === 0) this.lanes.delete(lane);
    this.where.delete(id);
    if (at === 0) this.offerHead(lane);
  }

  /**
   * The items to start now: the head of every idle lane whose target can take it (`isOpen`), oldest
   * head first, while fewer than the cap are running. Each returned item is marked running.
   */
  take(isOpen: (lane: string) => boolean): LaneItem[] {
    const free = this.maxParallel - this.busy.size;
    const started: LaneItem[] = [];
    const closed: ReadyHead[] = [];
    while (started.length < free && this.ready.length > 0) {
      const head = this.popReady();
      const queue = this.lanes.get(head.lane);
      if (this.busy.has(head.lane) || queue?.[0]?.id !== head.id) {
        if (this.offered.get(head.lane) === head.id) this.offered.delete(head.lane);
        continue;
      }
      if (!isOpen(head.lane)) {
        closed.push(head);
        continue;
      }
      this.offered.delete(head.lane);
      this.busy.set(head.lane, head.id);
      started.push(queue[0]!);
    }
    for (const head of closed) this.pushReady(head);
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
    if (!keep) {
      const queue = this.lanes.get(lane)!;
      queue.shift();
      if (queue.length === 0) this.lanes.delete(lane);
      this.where.delete(id);
    }
    this.offerHead(lane);
  }

  /** Offers the lane's head to `take`, when the lane is idle and has one not offered yet. */
  private offerHead(lane: string): void {
    const head = this.lanes.get(lane)?.[0];
    if (head === undefined || this.busy.has(lane) || this.offered.get(lane) === head.id) return;
    this.offered.set(lane, head.id);
    this.pushReady({ lane, id: head.id, seq: head.seq, order: this.offers++ });
  }

  private pushReady(head: ReadyHead): void {
    const heap = this.ready;
    let i = heap.push(head) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!earlier(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private popReady(): ReadyHead {
    const heap = this.ready;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        const right = left + 1;
        let least = i;
        if (left < heap.length && earlier(heap[left]!, heap[least]!)) least = left;
        if (right < heap.length && earlier(heap[right]!, heap[least]!)) least = right;
        if (least === i) break;
        [heap[i], heap[least]] = [heap[least]!, heap[i]!];
        i = least;
      }
    }
    return top;
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
    this.offered.delete(oldLane);
    this.offerHead(newLane);
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
