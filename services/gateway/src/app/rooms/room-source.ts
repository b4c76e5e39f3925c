import type { ClientReadableStream } from "@grpc/grpc-js";
import { type ChannelOptions, PeerChannel } from "@hermes/common";
import { RoomServiceClient, type LogPage as WireLogPage } from "@hermes/proto/hermes/v1/rooms";
import { type Authority, concatRuns, type LogPage, type RoomEvent } from "../../core/rooms/index.js";
import type { PeerDirectory } from "../peers/peer-directory.js";
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

/**
 * A live tail as a replica applies it: pages are read from the transport as they arrive, and those
 * that arrived while the previous one was being applied are joined into one (contiguous events of
 * one authority, at most `maxEvents`), so a replica that falls behind commits once for all of them
 * instead of once per authority commit. A page that arrives while the replica waits is handed over
 * at once, alone; the end or failure of the transport is passed on after the pages before it.
 */
export function joinWaitingPages(pages: AsyncIterable<LogPage>, maxEvents: number): AsyncIterator<LogPage> {
  const source = pages[Symbol.asyncIterator]();
  const waiting: LogPage[] = [];
  let end: { failed: false } | { failed: true; error: unknown } | null = null;
  let arrived: (() => void) | null = null;
  let taken: (() => void) | null = null;
  const wakeConsumer = () => {
    arrived?.();
    arrived = null;
  };
  const readAll = async () => {
    try {
      for (;;) {
        if (waiting.length >= MAX_WAITING_PAGES) await new Promise<void>((resolve) => (taken = resolve));
        const next = await source.next();
        if (next.done) break;
        waiting.push(next.value);
        wakeConsumer();
      }
      end = { failed: false };
    } catch (error) {
      end = { failed: true, error };
    }
    wakeConsumer();
  };
  void readAll();
  return {
    async next(): Promise<IteratorResult<LogPage>> {
      while (waiting.length === 0 && end === null) await new Promise<void>((resolve) => (arrived = resolve));
      let page = waiting.shift();
      if (page === undefined) {
        const ended = end as { failed: false } | { failed: true; error: unknown } | null;
        if (ended?.failed) throw ended.error;
        return { done: true, value: undefined };
      }
      while (waiting.length > 0 && continues(page, waiting[0]!, maxEvents)) page = joinPages(page, waiting.shift()!);
      taken?.();
      taken = null;
      return { done: false, value: page };
    },
  };
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

  async *subscribe(request: SourceSubscribeRequest, signal: AbortSignal): AsyncIterable<LogPage> {
    const stream: ClientReadableStream<WireLogPage> = this.client.subscribe(
      { room_id: request.room_id, since_seq: request.since_seq, packed: true, known_authority: request.known },
      this.channel.metadata(),
    );
    const onAbort = () => stream.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const page of stream as AsyncIterable<WireLogPage>) yield fromWirePage(page);
    } catch (err) {
      if (signal.aborted) return;
      throw this.channel.error(err);
    } finally {
      signal.removeEventListener("abort", onAbort);
      stream.cancel();
    }
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
