import type { CallOptions, Client, ClientOptions, Metadata, ServiceError } from "@grpc/grpc-js";
import { authMetadata, clientCredentials } from "./grpc.js";
import { fromServiceError } from "./grpc-status.js";
import { parseGrpcUrl, plainTransportText } from "./net.js";
import { HermesError, toHermesError } from "./pure/errors.js";

/**
 * The one way this code base dials another process over gRPC (a peer gateway, the relay, the
 * gateway the CLI talks to): a target (a registered peer's name, or a URL and key) becomes a
 * channel whose clients share its options, whose calls carry the key and a deadline, and whose
 * failures read the same everywhere: an unknown peer, a missing key, a bad URL, an unreachable
 * target, a refused key.
 */

/** Where a peer's URL and key are found (the gateway's `bot_peers` in config.yaml and its .env). */
export interface PeerLookup {
  url(peer: string): string | undefined;
  key(peer: string): string | undefined;
}

/** The .env variable holding a peer's key: `HERMES_PEER_<NAME>_KEY` (upper case, `-` → `_`). */
export function peerKeyVariable(peer: string): string {
  return `HERMES_PEER_${peer.toUpperCase().replace(/-/g, "_")}_KEY`;
}

export interface ChannelTarget {
  /** `grpc://host:port`, `grpcs://host:port`, or `unix:/path/to.sock`. */
  url: string;
  key?: string | undefined;
  /** How messages name the target, e.g. `peer vps (grpc://10.0.0.5:7440)`; the URL by default. */
  describe?: string | undefined;
  /** Where the key comes from, named when it is refused (`HERMES_PEER_VPS_KEY`). */
  keyVariable?: string | undefined;
  /** What to do when the key is refused. */
  refusedKeyHint?: string | undefined;
  /** What to do when the target cannot be reached (`start one with: …`). */
  unreachableHint?: string | undefined;
  /** Added to the data of every error (e.g. `{ peer }`). */
  data?: Record<string, unknown> | undefined;
  /**
   * Whether the target's own refusals (not_found, invalid_params, …) are prefixed with its name,
   * as for a peer among several (default); the CLI talks to one gateway and shows them as said.
   */
  nameReplies?: boolean | undefined;
}

export interface ChannelOptions {
  /** Largest message either way (default 8 MiB: a replication page, a tunnelled frame). */
  maxMessageBytes?: number;
  /** Deadline of a call that names none (default 60 s). */
  deadlineMs?: number;
  /** Keepalive pings: notice a dead path (a NAT idle timeout) on a long stream. */
  keepalive?: { timeMs: number; timeoutMs: number; withoutCalls?: boolean };
  /** The channel's own reconnect back-off; callers that pace their own reconnects keep it short. */
  reconnectBackoffMs?: { initial: number; max: number };
  /**
   * HTTP/2 flow-control window of each call and of the connection (default 64 KiB): how much the
   * other side may send before this one reads. A reader that is busy between reads (a replica
   * applying a page while the next is in flight) needs a whole message's worth, or the next one
   * stalls after 64 KiB until the reader returns.
   */
  receiveWindowBytes?: number;
}

const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
const DEFAULT_DEADLINE_MS = 60_000;

/** The grpc-js client options of a channel made with `options`. */
export function grpcClientOptions(options: ChannelOptions): Partial<ClientOptions> {
  const max = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  return {
    "grpc.max_receive_message_length": max,
    "grpc.max_send_message_length": max,
    ...(options.keepalive
      ? {
          "grpc.keepalive_time_ms": options.keepalive.timeMs,
          "grpc.keepalive_timeout_ms": options.keepalive.timeoutMs,
          ...(options.keepalive.withoutCalls ? { "grpc.keepalive_permit_without_calls": 1 } : {}),
        }
      : {}),
    ...(options.reconnectBackoffMs
      ? {
          "grpc.initial_reconnect_backoff_ms": options.reconnectBackoffMs.initial,
          "grpc.max_reconnect_backoff_ms": options.reconnectBackoffMs.max,
        }
      : {}),
    ...(options.receiveWindowBytes ? { "grpc-node.flow_control_window": options.receiveWindowBytes } : {}),
  };
}

/** A unary method of a ts-proto client, in its (request, metadata, options, callback) form. */
export type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;

type ClientConstructor<C extends Client> = new (
  address: string,
  credentials: ReturnType<typeof clientCredentials>,
  options?: Partial<ClientOptions>,
) => C;

/**
 * A registered peer as a channel target: its URL and key from `peers`; an unknown peer or one
 * without a key is missing_config (exit 1) saying what to set.
 */
export function peerTarget(peers: PeerLookup, peer: string): ChannelTarget {
  const url = peers.url(peer);
  if (!url) {
    throw new HermesError(
      "missing_config",
      `unknown peer ${peer}: register it with hermes peer add ${peer} --url grpc://HOST:PORT --key KEY`,
      {
        data: { peer },
      },
    );
  }
  const keyVariable = peerKeyVariable(peer);
  const key = peers.key(peer);
  if (!key) {
    throw new HermesError(
      "missing_config",
      `no key for peer ${peer}: set ${keyVariable} in HERMES_HOME/.env (hermes peer add ${peer} --url ${url} --key KEY)`,
      { data: { peer, key_variable: keyVariable } },
    );
  }
  return {
    url,
    key,
    describe: `peer ${peer} (${url})`,
    keyVariable,
    refusedKeyHint: `Nothing ran there; set the peer's API_SERVER_KEY with hermes peer add ${peer} --url ${url} --key KEY`,
    data: { peer },
  };
}

export class PeerChannel {
  readonly describe: string;
  private readonly address: string;
  private readonly tls: boolean;
  private readonly clientOptions: Partial<ClientOptions>;
  private readonly deadlineMs: number;
  private readonly clients = new Map<ClientConstructor<Client>, Client>();

  private constructor(
    readonly target: ChannelTarget,
    options: ChannelOptions,
  ) {
    this.describe = target.describe ?? target.url;
    if (target.url.startsWith("unix:")) {
      this.address = target.url;
      this.tls = false;
    } else {
      let parsed: { target: string; tls: boolean };
      try {
        parsed = parseGrpcUrl(target.url);
      } catch (err) {
        throw new HermesError("missing_config", `${this.describe} has a bad url: ${(err as Error).message}`, {
          data: { ...target.data },
          cause: err,
        });
      }
      this.address = parsed.target;
      this.tls = parsed.tls;
    }
    this.clientOptions = grpcClientOptions(options);
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  }

  /** A channel to a URL (bad URLs are missing_config naming the target). */
  static open(target: ChannelTarget, options: ChannelOptions = {}): PeerChannel {
    return new PeerChannel(target, options);
  }

  /**
   * A channel to a registered peer: an unknown peer, a peer without a key and a bad URL are
   * missing_config (exit 1) saying what to set.
   */
  static toPeer(peers: PeerLookup, peer: string, options: ChannelOptions = {}): PeerChannel {
    return new PeerChannel(peerTarget(peers, peer), options);
  }

  /** The client of a service on this channel (one per service, sharing the channel's options). */
  client<C extends Client>(Ctor: ClientConstructor<C>): C {
    let client = this.clients.get(Ctor as ClientConstructor<Client>) as C | undefined;
    if (!client) {
      client = new Ctor(this.address, clientCredentials(this.tls), this.clientOptions);
      this.clients.set(Ctor as ClientConstructor<Client>, client);
    }
    return client;
  }

  /** Call metadata: the key as `authorization: Bearer <key>`, when there is one. */
  metadata(): Metadata {
    return authMetadata(this.target.key);
  }

  /** Call options with a deadline `timeoutMs` from now (the channel's default when not given). */
  callOptions(timeoutMs = this.deadlineMs): Partial<CallOptions> {
    return { deadline: new Date(Date.now() + timeoutMs) };
  }

  /** One unary call with the key and a deadline; a failure rejects with `error()`'s text; `signal` cancels it. */
  unary<Req, Res>(
    client: Client,
    method: UnaryMethod<Req, Res>,
    request: Req,
    options: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      const { signal } = options;
      const call = method.call(client, request, this.metadata(), this.callOptions(options.timeoutMs), (err, res) => {
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(this.error(fromServiceError(err)));
        else resolve(res);
      }) as { cancel(): void };
      const onAbort = () => call.cancel();
      if (signal?.aborted) call.cancel();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * A failure of a call on this channel, named after the target, its reason and data kept (plus the
   * target's): `cannot reach …` (unreachable), `… refused our key (…)`, `… did not answer in time`,
   * else `<target>: <message>` (unless `nameReplies` is false).
   */
  error(err: unknown): HermesError {
    const e = toHermesError(err);
    const where = this.describe;
    const data = { ...e.data, ...this.target.data };
    switch (e.reason) {
      case "unavailable": {
        const hint = this.target.unreachableHint ? `; ${this.target.unreachableHint}` : "";
        return new HermesError("unavailable", `cannot reach ${where}: ${plainTransportText(e.message)}${hint}`, { data, cause: e });
      }
      case "unauthenticated": {
        const variable = this.target.keyVariable ? ` (${this.target.keyVariable})` : "";
        const hint = this.target.refusedKeyHint ? `. ${this.target.refusedKeyHint}` : "";
        return new HermesError("unauthenticated", `${where} refused our key${variable}: ${e.message}${hint}`, { data, cause: e });
      }
      case "timeout":
        return new HermesError("timeout", `${where} did not answer in time: ${e.message}`, { data, cause: e });
      default:
        if (this.target.nameReplies === false) return e;
        return new HermesError(e.reason, `${where}: ${e.message}`, { data, cause: e });
    }
  }

  close(): void {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}

/** Channels to registered peers, one per peer, opened on first use and reopened when its URL or key changes. */
export class PeerChannels {
  private readonly open = new Map<string, PeerChannel>();
  /** Channels replaced after a URL or key change: calls may still run on them until close(). */
  private readonly replaced: PeerChannel[] = [];

  constructor(
    private readonly peers: PeerLookup,
    private readonly options: ChannelOptions = {},
  ) {}

  /** The peer's channel; throws what `peerTarget` and a bad URL throw. */
  get(peer: string): PeerChannel {
    const target = peerTarget(this.peers, peer);
    const current = this.open.get(peer);
    if (current && current.target.url === target.url && current.target.key === target.key) return current;
    if (current) this.replaced.push(current);
    const channel = PeerChannel.open(target, this.options);
    this.open.set(peer, channel);
    return channel;
  }

  close(): void {
    for (const channel of [...this.open.values(), ...this.replaced.splice(0)]) channel.close();
    this.open.clear();
  }
}
