import type { ClientReadableStream } from "@grpc/grpc-js";
import { authMetadata, clientCredentials, fromServiceError, HermesError, parseGrpcUrl, toHermesError } from "@hermes/common";
import { RoomServiceClient, type LogPage as WireLogPage } from "@hermes/proto/hermes/v1/rooms";
import type { Authority, LogPage, RoomEvent } from "../../core/rooms/index.js";
import { type PeerDirectory, peerKeyName } from "../peers/peer-directory.js";
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

/** `{url, key}` of the authority, or the name of a registered peer (config.yaml `bot_peers`). */
export type SourceSpec = { url: string; key?: string | undefined } | { peer: string };

export function describeSpec(spec: SourceSpec): string {
  return "peer" in spec ? `peer ${spec.peer}` : spec.url;
}

export interface RoomSourceFactory {
  open(spec: SourceSpec): RoomSource;
}

/** Opens direct gRPC sources, resolving peer names through the registered peers. */
export class GrpcRoomSourceFactory implements RoomSourceFactory {
  constructor(private readonly peers: PeerDirectory) {}

  open(spec: SourceSpec): RoomSource {
    if ("peer" in spec) {
      const url = this.peers.url(spec.peer);
      if (!url) {
        throw new HermesError(
          "missing_config",
          `peer ${spec.peer} is not registered: add it with hermes peer add ${spec.peer} --url grpc://HOST:PORT --key KEY (config.yaml bot_peers.${spec.peer}.url)`,
        );
      }
      const key = this.peers.key(spec.peer);
      if (!key) {
        throw new HermesError("missing_config", `no key for peer ${spec.peer}: set ${peerKeyName(spec.peer)} in HERMES_HOME/.env`);
      }
      return new GrpcRoomSource(url, key, `peer ${spec.peer} (${url})`);
    }
    return new GrpcRoomSource(spec.url, spec.key, spec.url);
  }
}

const PAGE_DEADLINE_MS = 60_000;
/** Pages of up to 5000 events with payloads up to 256 KiB are bounded by max_bytes (≤ 6 MiB). */
const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

export class GrpcRoomSource implements RoomSource {
  private readonly client: RoomServiceClient;

  constructor(
    url: string,
    private readonly key: string | undefined,
    readonly describe: string,
  ) {
    const { target, tls } = parseGrpcUrl(url);
    this.client = new RoomServiceClient(target, clientCredentials(tls), {
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
      // A follower holds one long stream: notice a dead path (NAT idle timeout) within a minute.
      "grpc.keepalive_time_ms": 30_000,
      "grpc.keepalive_timeout_ms": 10_000,
      // The follower paces its own reconnects (common/backoff); don't let the channel sit in a
      // two-minute backoff after a partition heals.
      "grpc.initial_reconnect_backoff_ms": 500,
      "grpc.max_reconnect_backoff_ms": 5_000,
    });
  }

  log(request: SourceLogRequest): Promise<LogPage> {
    return new Promise((resolve, reject) => {
      this.client.log(
        {
          room_id: request.room_id,
          since_seq: request.since_seq,
          limit: request.limit,
          packed: true,
          known_authority: request.known,
        },
        authMetadata(this.key),
        { deadline: new Date(Date.now() + PAGE_DEADLINE_MS) },
        (err, page) => {
          if (err) return reject(this.named(fromServiceError(err)));
          try {
            resolve(fromWirePage(page));
          } catch (e) {
            reject(this.named(toHermesError(e)));
          }
        },
      );
    });
  }

  async *subscribe(request: SourceSubscribeRequest, signal: AbortSignal): AsyncIterable<LogPage> {
    const stream: ClientReadableStream<WireLogPage> = this.client.subscribe(
      { room_id: request.room_id, since_seq: request.since_seq, packed: true, known_authority: request.known },
      authMetadata(this.key),
    );
    const onAbort = () => stream.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const page of stream as AsyncIterable<WireLogPage>) yield fromWirePage(page);
    } catch (err) {
      if (signal.aborted) return;
      throw this.named(toHermesError(err));
    } finally {
      signal.removeEventListener("abort", onAbort);
      stream.cancel();
    }
  }

  repost(roomId: string, messages: RepostMessage[]): Promise<{ event: RoomEvent; idempotent: boolean }[]> {
    return new Promise((resolve, reject) => {
      this.client.repost(
        { room_id: roomId, seqs: [], divergence_id: undefined, messages },
        authMetadata(this.key),
        { deadline: new Date(Date.now() + PAGE_DEADLINE_MS) },
        (err, reply) => {
          if (err) return reject(this.named(fromServiceError(err)));
          try {
            resolve(reply.items.map((item) => ({ event: fromWireEvent(item.event!), idempotent: item.idempotent })));
          } catch (e) {
            reject(this.named(toHermesError(e)));
          }
        },
      );
    });
  }

  /** The source's error, with where it came from in the message (reason and data kept). */
  private named(err: HermesError): HermesError {
    return new HermesError(err.reason, `${this.describe}: ${err.message}`, { data: err.data, cause: err });
  }

  close(): void {
    this.client.close();
  }
}
