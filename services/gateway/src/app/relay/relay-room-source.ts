import { HermesError, toHermesError } from "@hermes/common";
import { LogPage as WireLogPage } from "@hermes/proto/hermes/v1/rooms";
import { z } from "zod";
import type { LogPage } from "../../core/rooms/index.js";
import type { AnyPage } from "../rooms/live-tail.js";
import type { RoomSource, RoomSourceFactory, SourceLogRequest, SourceSpec, SourceSubscribeRequest } from "../rooms/room-source.js";
import type { RoomsService } from "../rooms/rooms-service.js";
import { fromWirePage, toWireAnyPage } from "../rooms/wire.js";
import type { TunnelClient } from "./tunnel-client.js";
import type { TunnelHandlers } from "./tunnel-handlers.js";

/**
 * `relay://<connection>` names a room authority by its relay connection: the gateway nobody can
 * dial (behind NAT) that keeps a stream open to the relay. Replication then runs through the
 * relay tunnel (§5.1) instead of a direct gRPC connection.
 */
export const RELAY_SOURCE_PREFIX = "relay://";

/** The connection a source spec names through the relay, if it does. */
export function relayConnectionOf(spec: SourceSpec): string | undefined {
  const text = "url" in spec ? spec.url : spec.peer;
  if (!text.startsWith(RELAY_SOURCE_PREFIX)) return undefined;
  return text.slice(RELAY_SOURCE_PREFIX.length).replace(/\/+$/, "");
}

/** A page travels the tunnel as the gRPC LogPage, packed, base64 in JSON: byte-for-byte what a direct pull gets. */
interface TunnelPage {
  page_b64: string;
}

function encodePage(page: AnyPage): TunnelPage {
  return { page_b64: Buffer.from(WireLogPage.encode(toWireAnyPage(page)).finish()).toString("base64") };
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

const logParams = z.object({
  room_id: z.string(),
  since_seq: z.number().int().nonnegative().optional(),
  limit: z.number().int().positive().optional(),
  known_authority: z.object({ gateway_id: z.string(), epoch: z.number().int().nonnegative() }).optional(),
});

const subscribeParams = logParams.omit({ limit: true });

function parse<T>(schema: z.ZodType<T>, params: unknown, method: string): T {
  const parsed = schema.safeParse(params);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new HermesError("invalid_params", `${method}: ${issue.path.join(".") || "params"}: ${issue.message}`);
}

/**
 * The authority side: serves `groups.log` (one packed page), `groups.subscribe` (the live tail) and
 * `groups.send` (a member's message to a room led here) to other gateways through the relay tunnel.
 */
export function registerRoomTunnel(handlers: TunnelHandlers, rooms: RoomsService): void {
  handlers.register("groups.log", {
    kind: "unary",
    run: async (params) => {
      const p = parse(logParams, params, "groups.log");
      return encodePage(rooms.logPacked(p));
    },
  });
  handlers.register("groups.subscribe", {
    kind: "stream",
    run: (params, ctx, emit) =>
      new Promise<void>((resolve, reject) => {
        const p = parse(subscribeParams, params, "groups.subscribe");
        const subscription = rooms.subscribe(
          { room_id: p.room_id, since_seq: p.since_seq ?? 0, tuples: true, known_authority: p.known_authority },
          {
            send: (page) => {
              emit(encodePage(page));
              return true;
            },
            drained: () => Promise.resolve(),
            end: (error) => (error ? reject(error) : resolve()),
          },
        );
        ctx.signal.addEventListener("abort", () => {
          subscription.close();
          resolve();
        });
      }),
  });
  handlers.register("groups.send", { kind: "unary", run: (params) => rooms.send(params) });
}
