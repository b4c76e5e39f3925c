import { type HermesError, toHermesError } from "@hermes/common";
import type { LogPage, PackedLogPage } from "../../core/rooms/index.js";

/** A page of either encoding. */
export type AnyPage = LogPage | PackedLogPage;

function eventCount(page: AnyPage): number {
  return "packed" in page ? page.packed.reduce((n, run) => n + run.ends.length, 0) : page.events.length;
}

/** Who wants to hear that a room's log or authority changed on this gateway. */
export class RoomChanges {
  private readonly listeners = new Map<string, Set<() => void>>();

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

  notify(roomId: string): void {
    const set = this.listeners.get(roomId);
    if (set) for (const listener of [...set]) listener();
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

/** Reads a page of the room after `since` (throws a typed error: cursor_conflict, not_authority, …). */
export type PageReader = (since: number, first: boolean) => AnyPage;

/**
 * One live tail (`groups.subscribe`): a handshake page from since_seq, then pages of whatever
 * commits, read back from the store after each commit, so the subscriber sees exactly the durable
 * log, in order, with no gap, whatever the batching. A slow subscriber gets bigger pages, not an
 * unbounded buffer: nothing is read while its transport is full.
 */
export class TailSubscription {
  private cursor: number;
  private pumping = false;
  private dirty = false;
  private first = true;
  private closed = false;
  private readonly unlisten: () => void;

  constructor(
    changes: RoomChanges,
    roomId: string,
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
        const page = this.read(this.cursor, this.first);
        if (eventCount(page) === 0 && !this.first) break;
        this.first = false;
        this.cursor = page.cursor;
        if (!this.sink.send(page)) await this.sink.drained();
        if (!page.has_more) break;
      }
    } while (this.dirty && !this.closed);
  }
}
