import type { TunnelContext, TunnelEmit, TunnelHandlers } from "../../relay-link/app/tunnel-handlers.js";
import type { MemberTurnServer } from "../app/member-turns.js";
import type { RoomsService } from "../app/rooms-service.js";
import { MEMBER_TURN_METHOD } from "./member-turn.js";
import { parseParams, ROOM_METHODS, type SubscriptionRoomMethod, type TailParams, type UnaryRoomMethod } from "./methods.js";

/**
 * The methods this gateway serves to other gateways through the relay tunnel, generated from the
 * room method table (the methods it marks as tunnelled) and the member-turn definition: the same
 * params, validation and calls as over gRPC and JSON-RPC. Pages travel in the gRPC form (packed,
 * protobuf, base64); a live tail waits while the relay stream is full, like one over /rpc waits
 * for its socket.
 */

function unary(
  method: UnaryRoomMethod<unknown, unknown>,
  tunnel: NonNullable<UnaryRoomMethod<unknown, unknown>["tunnel"]>,
  rooms: RoomsService,
) {
  return {
    kind: "unary" as const,
    run: async (raw: Record<string, unknown>) => {
      const params = parseParams(method, tunnel.request ? tunnel.request(raw) : raw);
      return tunnel.reply(await method.call(rooms, params, "tuples"));
    },
  };
}

function subscription(
  method: SubscriptionRoomMethod<TailParams>,
  tunnel: NonNullable<SubscriptionRoomMethod<TailParams>["tunnel"]>,
  rooms: RoomsService,
) {
  return {
    kind: "stream" as const,
    run: (raw: Record<string, unknown>, ctx: TunnelContext, emit: TunnelEmit) =>
      new Promise<void>((resolve, reject) => {
        const params = parseParams(method, tunnel.request ? tunnel.request(raw) : raw);
        const tail = method.open(rooms, params, "tuples", {
          send: (page) => emit(tunnel.page(page)),
          drained: () => ctx.drained(),
          end: (error) => (error ? reject(error) : resolve()),
        });
        const close = () => {
          tail.close();
          resolve();
        };
        if (ctx.signal.aborted) close();
        else ctx.signal.addEventListener("abort", close, { once: true });
      }),
  };
}

/** Serves this gateway's rooms to other gateways through the relay tunnel: `groups.log`, `groups.subscribe`, `groups.send`. */
export function registerRoomTunnel(handlers: TunnelHandlers, rooms: RoomsService): void {
  for (const method of ROOM_METHODS) {
    if (method.kind === "unary" && method.tunnel) handlers.register(method.name, unary(method, method.tunnel, rooms));
    if (method.kind === "subscription" && method.tunnel) handlers.register(method.name, subscription(method, method.tunnel, rooms));
  }
}

/** Serves member turns of this gateway's profiles to room authorities through the relay tunnel (`groups.member_turn`). */
export function registerMemberTurnTunnel(handlers: TunnelHandlers, server: MemberTurnServer): void {
  const method = MEMBER_TURN_METHOD;
  handlers.register(method.name, {
    kind: "stream",
    run: async (raw, ctx, emit) => {
      const request = method.parse(raw);
      emit(
        method.tunnel.reply(await method.call(server, request, { from: `relay connection ${ctx.from_connection}`, signal: ctx.signal })),
      );
    },
  });
}
