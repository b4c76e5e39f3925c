import { HermesError, toHermesError } from "@hermes/common";
import { LogPage as WireLogPage } from "@hermes/proto/hermes/v1/rooms";
import type { RoomSource, RoomSourceFactory, SourceLogRequest, SourceSpec, SourceSubscribeRequest } from "../../rooms/app/room-source.js";
import { fromWirePage } from "../../rooms/app/wire.js";
import type { LogPage } from "../../rooms/core/index.js";
import type { TunnelClient } from "./tunnel-client.js";

/**
 * `relay://<connection>` names a room authority by its relay connection: the gateway nobody can
 * dial (behind NAT) that keeps a stream open to the relay. Replication then runs through the
 * relay tunnel instead of a direct gRPC connection.
 */
export const RELAY_SOURCE_PREFIX = "relay://";

/** The connection a source spec names through the relay, if it does. */
export function relayConnectionOf(spec: SourceSpec): string | undefined {
  const text = "url" in spec ? spec.url : spec.peer;
  if (!text.startsWith(RELAY_SOURCE_PREFIX)) return undefined;
  return text.slice(RELAY_SOURCE_PREFIX.length).replace(/\/+$/, "");
}

/**
 * A page travels the tunnel as the gRPC LogPage, packed, base64 in JSON: byte-for-byte what a
 * direct pull gets (the authority's side encodes it in rooms/api/wire.ts).
 */
export interface TunnelPage {
  page_b64: string;
}

function decodePage(value: unknown): LogPage {
  const b64 = (value as Partial<TunnelPage> | null)?.page_b64;
  if (typeof b64 !== "string") throw new HermesError("internal", "groups.log through the relay tunnel answered without a page");
  return fromWirePage(WireLogPage.decode(Buffer.from(b64, "base64")));
}

/** Pulls a room from the gateway of a relay connection, through the tunnel. */
export class RelayRoomSource implements RoomSource {
  readonly describe: string;

  constructor(
    private readonly tunnel: TunnelClient,
    private readonly connection: string,
  ) {
    this.describe = `${RELAY_SOURCE_PREFIX}${connection} (through the relay)`;
  }

  async log(request: SourceLogRequest): Promise<LogPage> {
    try {
      const result = await this.tunnel.call(this.connection, "groups.log", {
        room_id: request.room_id,
        since_seq: request.since_seq,
        limit: request.limit,
        ...(request.known ? { known_authority: request.known } : {}),
      });
      return decodePage(result);
    } catch (err) {
      throw this.named(toHermesError(err));
    }
  }

  async *subscribe(request: SourceSubscribeRequest, signal: AbortSignal): AsyncIterable<LogPage> {
    const params = { room_id: request.room_id, since_seq: request.since_seq, ...(request.known ? { known_authority: request.known } : {}) };
    try {
      for await (const item of this.tunnel.stream(this.connection, "groups.subscribe", params, signal)) yield decodePage(item);
    } catch (err) {
      if (signal.aborted) return;
      throw this.named(toHermesError(err));
    }
  }

  private named(err: HermesError): HermesError {
    return new HermesError(err.reason, `${this.describe}: ${err.message}`, { data: err.data, cause: err });
  }

  close(): void {
    // The tunnel shares the relay link's channel; nothing to close per source.
  }
}

/** Opens `relay://<connection>` sources through the tunnel and hands every other spec to the direct factory. */
export class RelayAwareRoomSourceFactory implements RoomSourceFactory {
  constructor(
    private readonly tunnel: TunnelClient,
    private readonly direct: RoomSourceFactory,
  ) {}

  open(spec: SourceSpec): RoomSource {
    const connection = relayConnectionOf(spec);
    return connection === undefined ? this.direct.open(spec) : new RelayRoomSource(this.tunnel, connection);
  }
}
