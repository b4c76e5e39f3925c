import { HermesError, type ServiceHandlers } from "@hermes/common";
import type { RoomMemberServiceServer } from "@hermes/proto/hermes/v1/rooms";
import type { MemberTurnServer } from "../app/member-turns.js";
import { MEMBER_TURN_METHOD } from "./member-turn.js";

export interface MemberTurnHandlerDeps {
  server: MemberTurnServer;
  /** Whether this server requires the API key: member turns run bots, so they are only served where it does. */
  keyRequired: boolean;
  transport: "tcp" | "control";
}

/** RoomMemberService over gRPC: a room authority on another gateway runs a member's turn here. */
export function memberTurnServiceHandlers(deps: MemberTurnHandlerDeps): ServiceHandlers<RoomMemberServiceServer> {
  const method = MEMBER_TURN_METHOD;
  return {
    runMemberTurn: async (req, ctx) => {
      if (deps.transport === "tcp" && !deps.keyRequired) {
        throw new HermesError(
          "unauthenticated",
          "this gateway has no API key, so it runs no member turns for other gateways: set API_SERVER_KEY (or gateway.api_key) and register it on the room's authority (hermes peer add … --key KEY)",
        );
      }
      const request = method.parse(method.grpc.request(req));
      return method.grpc.reply(await method.call(deps.server, request, { from: ctx.peer, signal: ctx.signal }));
    },
  };
}
