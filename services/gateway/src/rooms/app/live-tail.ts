import { type HermesError, toHermesError } from "@hermes/common";
import {
  decodeRun,
  type LogPage,
  type PackedLogPage,
  type PrevPointer,
  type RoomEvent,
  type RoomState,
  type TupleRun,
} from "../core/index.js";

/** A page of either encoding. */
export type AnyPage = LogPage | PackedLogPage;

function eventCount(page: AnyPage): number {
  return "packed" in page ? page.packed.reduce((n, run) => n + run.ends.length, 0) : page.events.length;
}

/**
 * The last event of a page (what the next page's `prev` is), or null for an empty page. A packed
 * page that ends with the very run a commit being notified stored has that commit's last event;
 * any other is decoded from its last tuple.
 */
function lastEvent(page: AnyPage, changes: RoomChanges): PrevPointer | null {
  let last: RoomEvent | undefined;
  if (!("packed" in page)) last = page.events.at(-1);
  else {
    const run = page.packed.at(-1);
    if (run === undefined || run.ends.length === 0) return null;
    last = changes.appendedEventsOf(run)?.at(-1) ?? decodeRun(page.room_id, run, run.ends.length - 1, run.ends.length)[0];
  }
  return last === undefined ? null : { seq: last.seq, epoch: last.epoch, hash: last.hash };
}

/** Events a commit has just stored after the room's earlier ones, and the room state it stored with them. */
export interface AppendedEvents {
  state: RoomState;
  events: readonly RoomEvent[];
  /** The same events in their stored encoding (the bytes the commit wrote), when the committer has them. */
  run?: TupleRun | undefined;
}

/** Who wants to hear that a room's log or authority changed on this gateway. */
export class RoomChanges {
  private readonly listeners = new Map<string, Set<() => void>>();
  /** Per room, how often stored events were replaced (a replica's divergence): events seen before may be gone. */
  private readonly rewrites = new Map<string, number>();
  /** What the commit being notified stored, while its listeners run (and only then: nothing is kept). */
  private appending: (AppendedEvents & { roomId: string }) | null = null;

  on(roomId: string, listener: () => void): () => void {
    let set = this.listeners.get(roomId);
    if (!set) {
      set = new Set();
      this.listeners.set(roomId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(roomId);
    };
  }

  /**
   * `rewritten`: events already stored were replaced (not only appended to), so what a reader kept
   * of them is stale. `appended`: the events the commit stored, which listeners that read the log
   * right away get from `appendedAfter` instead of the store.
   */
  notify(roomId: string, rewritten = false, appended?: AppendedEvents): void {
    if (rewritten) this.rewrites.set(roomId, (this.rewrites.get(roomId) ?? 0) + 1);
    const set = this.listeners.get(roomId);
    if (!set) return;
    this.appending = appended && !rewritten ? { roomId, ...appended } : null;
    try {
      for (const listener of [...set]) listener();
    } finally {
      this.appending = null;
    }
  }

  /**
   * While a commit is notified: its events after seq `since`, when they are exactly what the store
   * holds there (every one through the room's last_seq, under the same stored state), else null.
   */
  appendedAfter(roomId: string, state: RoomState, since: number): readonly RoomEvent[] | null {
    const events = this.covering(roomId, state, since)?.events;
    if (events === undefined) return null;
    const first = events[0]!.seq;
    return since < first ? events : events.slice(since - first + 1);
  }

  /**
   * The same for a page of packed tuples: the commit's run, holding every event after `since`
   * through the room's last_seq (it may start before since + 1, like a stored segment), else null.
   */
  appendedRunAfter(roomId: string, state: RoomState, since: number): TupleRun | null {
    const appended = this.covering(roomId, state, since);
    const run = appended?.run;
    if (run === undefined) return null;
    // The run is the events' encoding: the same first seq and count (the store checked as much when it wrote them).
    return run.first_seq === appended!.events[0]!.seq && run.ends.length === appended!.events.length ? run : null;
  }

  /** While a commit is notified: its events, when `run` is the very run object it stored (their encoding). */
  appendedEventsOf(run: TupleRun): readonly RoomEvent[] | null {
    const appending = this.appending;
    return appending !== null && appending.run === run && run.ends.length === appending.events.length ? appending.events : null;
  }

  /** The commit being notified, when it is the room's stored state and holds every event after `since` through its last_seq. */
  private covering(roomId: string, state: RoomState, since: number): AppendedEvents | null {
    const appending = this.appending;
    if (appending === null || appending.roomId !== roomId || appending.state !== state) return null;
    const { events } = appending;
    const first = events[0];
    if (first === undefined || first.seq > since + 1 || events.at(-1)!.seq !== state.last_seq) return null;
    return appending;
  }

  /** Changes whenever stored events of the room are replaced: a reader's copy of them is valid while this stays. */
  rewriteCount(roomId: string): number {
    return this.rewrites.get(roomId) ?? 0;
  }

  get subscribers(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }
}

/** Where a subscription's pages go: a gRPC server stream or a WebSocket. */
export interface PageSink<P extends AnyPage = AnyPage> {
  /** False when the transport is full: the subscription waits for `drained` before the next page. */
  send(page: P): boolean;
  drained(): Promise<void>;
  /** The subscription ended; with an error when the log can no longer be followed from here. */
  end(error?: HermesError): void;
}

/**
 * Reads a page of the room after `since` (throws a typed error: cursor_conflict, not_authority, …).
 * `prev` is the stored event at `since` when the caller still holds it (the last event of the page
 * it sent before), so the reader need not read it again; null: read it from the store.
 */
export type PageReader = (since: number, prev: PrevPointer | null) => AnyPage;

/**
 * One live tail (`groups.subscribe`): a handshake page from since_seq, then pages of whatever
 * commits, read back from the store after each commit, so the subscriber sees exactly the durable
 * log, in order, with no gap, whatever the batching. A slow subscriber gets bigger pages, not an
 * unbounded buffer: nothing is read while its transport is full. The last event sent is kept as the
 * next page's `prev` (one store read less per page), until stored events are rewritten.
 */
export class TailSubscription {
  private cursor: number;
  /** The event at `cursor` as last sent, and the room's rewrite count then; null: read it from the store. */
  private prev: { event: PrevPointer; rewrites: number } | null = null;
  private pumping = false;
  private dirty = false;
  private first = true;
  private closed = false;
  private readonly unlisten: () => void;

  constructor(
    private readonly changes: RoomChanges,
    private readonly roomId: string,
    since: number,
    private readonly read: PageReader,
    private readonly sink: PageSink,
  ) {
    this.cursor = since;
    this.unlisten = changes.on(roomId, () => this.kick());
    this.kick();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  close(error?: HermesError): void {
    if (this.closed) return;
    this.closed = true;
    this.unlisten();
    this.sink.end(error);
  }

  private kick(): void {
    if (this.closed) return;
    if (this.pumping) {
      this.dirty = true;
      return;
    }
    this.pumping = true;
    this.pump()
      .catch((err: unknown) => this.close(toHermesError(err)))
      .finally(() => {
        this.pumping = false;
      });
  }

  private async pump(): Promise<void> {
    do {
      this.dirty = false;
      while (!this.closed) {
        const rewrites = this.changes.rewriteCount(this.roomId);
        const prev = this.prev !== null && this.prev.rewrites === rewrites && this.prev.event.seq === this.cursor ? this.prev.event : null;
        const page = this.read(this.cursor, prev);
        if (eventCount(page) === 0 && !this.first) break;
        this.first = false;
        this.cursor = page.cursor;
        const last = lastEvent(page, this.changes);
        if (last !== null) this.prev = { event: last, rewrites };
        if (!this.sink.send(page)) await this.sink.drained();
        if (!page.has_more) break;
      }
    } while (this.dirty && !this.closed);
  }
}
