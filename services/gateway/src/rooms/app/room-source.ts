import type { ClientReadableStream } from "@grpc/grpc-js";
import { type ChannelOptions, PeerChannel } from "@hermes/common";
import { RoomServiceClient, type LogPage as WireLogPage } from "@hermes/proto/hermes/v1/rooms";
import type { PeerDirectory } from "../../peers/app/peer-directory.js";
import { type Authority, concatRuns, type LogPage, type RoomEvent } from "../core/index.js";
import { fromWireEvent, fromWirePage } from "./wire.js";

/**
 * Where a replica pulls a room from. The replicator only needs `log` and `subscribe`, so the
 * transport is pluggable: a direct gRPC connection, or the relay tunnel.
 */
export interface RoomSource {
  /** For messages and replica_state, e.g. `grpc://10.0.0.5:7440` or `peer vps`. */
  readonly describe: string;
  /** One packed page after since_seq. Rejects with a HermesError (cursor_conflict carries data.latest_seq). */
  log(request: SourceLogRequest): Promise<LogPage>;
  /** The live tail from since_seq: the first page is the handshake. Ends (or throws) when the stream does. */
  subscribe(request: SourceSubscribeRequest, signal: AbortSignal): AsyncIterable<LogPage>;
  /** Operator reposts of preserved messages, appended on the authority; optional for a transport. */
  repost?(roomId: string, messages: RepostMessage[]): Promise<{ event: RoomEvent; idempotent: boolean }[]>;
  close(): void;
}

export interface RepostMessage {
  event_id: string;
  text: string;
  thread_id?: string | undefined;
  origin: string;
}

export interface SourceLogRequest {
  room_id: string;
  since_seq: number;
  limit: number;
  /** The authority this gateway knows for the room, so the source can fence itself. */
  known?: Authority | undefined;
}

export interface SourceSubscribeRequest {
  room_id: string;
  since_seq: number;
  known?: Authority | undefined;
}

/** Pages of a live tail that arrived while the replica was busy and may wait to be joined (the rest wait in the transport). */
const MAX_WAITING_PAGES = 64;

/** `b` continues `a` under the same authority, and the two hold at most `maxEvents`. */
function continues(a: LogPage, b: LogPage, maxEvents: number): boolean {
  const last = a.events.at(-1);
  return (
    last !== undefined &&
    b.events[0]!.seq === last.seq + 1 &&
    a.events.length + b.events.length <= maxEvents &&
    b.room_id === a.room_id &&
    b.authority.gateway_id === a.authority.gateway_id &&
    b.authority.epoch === a.authority.epoch &&
    b.prev !== null &&
    b.prev.seq === last.seq &&
    b.prev.epoch === last.epoch &&
    b.prev.hash === last.hash
  );
}

/** One page of `a`'s events then `b`'s, framed as `b` (the newer latest_seq and lineage), with `a`'s prev. */
function joinPages(a: LogPage, b: LogPage): LogPage {
  return {
    ...b,
    events: [...a.events, ...b.events],
    prev: a.prev,
    tuples: a.tuples && b.tuples ? concatRuns([a.tuples, b.tuples]) : undefined,
  };
}

type QueueEnd = { failed: false } | { failed: true; error: unknown };

/**
 * The pages of a live tail as a replica applies them, pushed in by the transport as they arrive:
 * those that arrived while the previous one was being applied are joined into one (contiguous
 * events of one authority, at most `maxEvents`), so a replica that falls behind commits once for
 * all of them instead of once per authority commit. A page that arrives while the replica waits is
 * handed over at once, alone; the end or failure of the transport is passed on after the pages
 * before it. Above MAX_WAITING_PAGES waiting pages the transport is told to pause (the rest wait
 * in it), and to resume once the replica took them.
 */
export class PageQueue implements AsyncIterable<LogPage>, AsyncIterator<LogPage> {
  private readonly waiting: LogPage[] = [];
  private end: QueueEnd | null = null;
  private arrived: (() => void) | null = null;
  private paused = false;
  /** At most this many events in a joined page (set by joinWaitingPages; 0: no joining). */
  maxEvents = 0;

  /** `flow`: how the queue tells its transport to pause, resume, or stop (cancel) sending. */
  constructor(private readonly flow: { pause(): void; resume(): void; cancel(): void }) {}

  push(page: LogPage): void {
    if (this.end !== null) return;
    this.waiting.push(page);
    if (this.waiting.length >= MAX_WAITING_PAGES && !this.paused) {
      this.paused = true;
      this.flow.pause();
    }
    this.wake();
  }

  /** The transport ended (no error) or failed. */
  finish(error?: unknown): void {
    if (this.end !== null) return;
    this.end = error === undefined ? { failed: false } : { failed: true, error };
    this.wake();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<LogPage>> {
    while (this.waiting.length === 0 && this.end === null) await new Promise<void>((resolve) => (this.arrived = resolve));
    let page = this.waiting.shift();
    if (page === undefined) {
      const end = this.end as QueueEnd | null;
      if (end?.failed) throw end.error;
      return { done: true, value: undefined };
    }
    while (this.waiting.length > 0 && continues(page, this.waiting[0]!, this.maxEvents)) page = joinPages(page, this.waiting.shift()!);
    if (this.paused && this.waiting.length < MAX_WAITING_PAGES) {
      this.paused = false;
      this.flow.resume();
    }
    return { done: false, value: page };
  }

  /** The reader stops early: the transport is cancelled. */
  async return(): Promise<IteratorResult<LogPage>> {
    this.flow.cancel();
    this.finish();
    this.waiting.length = 0;
    return { done: true, value: undefined };
  }

  private wake(): void {
    this.arrived?.();
    this.arrived = null;
  }
}

/**
 * The live tail `pages` as a replica applies them: joined as PageQueue joins them. A transport that
 * pushes its pages into a PageQueue is read as is; any other iterable is read into one.
 */
export function joinWaitingPages(pages: AsyncIterable<LogPage>, maxEvents: number): AsyncIterator<LogPage> {
  if (pages instanceof PageQueue) {
    pages.maxEvents = maxEvents;
    return pages;
  }
  const source = pages[Symbol.asyncIterator]();
  let resumed: (() => void) | null = null;
  let paused = false;
  const queue = new PageQueue({
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      resumed?.();
      resumed = null;
    },
    cancel: () => void source.return?.(),
  });
  queue.maxEvents = maxEvents;
  const readAll = async () => {
    try {
      for (;;) {
        if (paused) await new Promise<void>((resolve) => (resumed = resolve));
        const next = await source.next();
        if (next.done) break;
        queue.push(next.value);
      }
      queue.finish();
    } catch (error) {
      queue.finish(error);
    }
  };
  void readAll();
  return queue;
}

/** `{url, key}` of the authority, or the name of a registered peer (config.yaml `bot_peers`). */
export type SourceSpec = { url: string; key?: string | undefined } | { peer: string };

export function describeSpec(spec: SourceSpec): string {
  return "peer" in spec ? `peer ${spec.peer}` : spec.url;
}

export interface RoomSourceFactory {
  open(spec: SourceSpec): RoomSource;
}

/** A follower holds one long stream: its pings notice a dead path (NAT idle timeout) within a minute. */
const ROOM_CHANNEL: ChannelOptions = {
  deadlineMs: 60_000,
  keepalive: { timeMs: 30_000, timeoutMs: 10_000 },
  // The follower paces its own reconnects (common/backoff); don't let the channel sit in a
  // two-minute backoff after a partition heals.
  reconnectBackoffMs: { initial: 500, max: 5_000 },
  // A whole page may arrive while the replica applies the one before it (it reads nothing in the
  // meantime): with the default 64 KiB window the next page would wait for the apply to end.
  receiveWindowBytes: 8 * 1024 * 1024,
};

/** Opens direct gRPC sources, resolving peer names through the registered peers. */
export class GrpcRoomSourceFactory implements RoomSourceFactory {
  constructor(private readonly peers: PeerDirectory) {}

  open(spec: SourceSpec): RoomSource {
    const channel =
      "peer" in spec
        ? PeerChannel.toPeer(this.peers, spec.peer, ROOM_CHANNEL)
        : PeerChannel.open({ url: spec.url, key: spec.key }, ROOM_CHANNEL);
    return new GrpcRoomSource(channel);
  }
}

/** A room authority's RoomService over gRPC (pages up to 5000 events, bounded by max_bytes ≤ 6 MiB). */
export class GrpcRoomSource implements RoomSource {
  private readonly client: RoomServiceClient;
  readonly describe: string;

  constructor(private readonly channel: PeerChannel) {
    this.client = channel.client(RoomServiceClient);
    this.describe = channel.describe;
  }

  async log(request: SourceLogRequest): Promise<LogPage> {
    const page = await this.channel.unary(this.client, this.client.log, {
      room_id: request.room_id,
      since_seq: request.since_seq,
      limit: request.limit,
      packed: true,
      known_authority: request.known,
    });
    try {
      return fromWirePage(page);
    } catch (e) {
      throw this.channel.error(e);
    }
  }

  /** Read with 'data' events straight into a PageQueue: no async iterator over the stream, no generator step per page. */
  subscribe(request: SourceSubscribeRequest, signal: AbortSignal): AsyncIterable<LogPage> {
    const stream: ClientReadableStream<WireLogPage> = this.client.subscribe(
      { room_id: request.room_id, since_seq: request.since_seq, packed: true, known_authority: request.known },
      this.channel.metadata(),
    );
    const queue = new PageQueue({ pause: () => stream.pause(), resume: () => stream.resume(), cancel: () => stream.cancel() });
    const onAbort = () => stream.cancel();
    let finished = false;
    const finish = (error?: unknown) => {
      if (finished) return;
      finished = true;
      signal.removeEventListener("abort", onAbort);
      stream.cancel();
      queue.finish(error === undefined || signal.aborted ? undefined : this.channel.error(error));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    stream.on("data", (wire: WireLogPage) => {
      let page: LogPage;
      try {
        page = fromWirePage(wire);
      } catch (err) {
        finish(err);
        return;
      }
      queue.push(page);
    });
    stream.on("error", (err: unknown) => finish(err));
    stream.on("end", () => finish());
    if (signal.aborted) finish();
    return queue;
  }

  async repost(roomId: string, messages: RepostMessage[]): Promise<{ event: RoomEvent; idempotent: boolean }[]> {
    const reply = await this.channel.unary(this.client, this.client.repost, {
      room_id: roomId,
      seqs: [],
      divergence_id: undefined,
      messages,
    });
    try {
      return reply.items.map((item) => ({ event: fromWireEvent(item.event!), idempotent: item.idempotent }));
    } catch (e) {
      throw this.channel.error(e);
    }
  }

  close(): void {
    this.channel.close();
  }
}
