import { HermesError } from "@hermes/common";
import type { MemberTurnReply, MemberTurnRequest as WireMemberTurnRequest } from "@hermes/proto/hermes/v1/rooms";
import { MEMBER_TURN_TUNNEL_METHOD } from "../app/member-turn-routes.js";
import type { MemberTurnServer } from "../app/member-turns.js";
import { checkMemberTurnRequest, type MemberTurnRequest, type MemberTurnResult } from "../core/member-turn.js";
import type { ParamsParser } from "./methods.js";

/**
 * The discussion member turn, served to room authorities on other gateways over two transports:
 * gRPC `RoomMemberService.RunMemberTurn` (unary) and the relay tunnel's `groups.member_turn` (a
 * one-item stream, so that a long turn has no relay timeout). One definition, so both validate
 * the same way and answer the same shape (rooms/api/member-turn-service.ts, rooms/api/room-tunnel.ts).
 */
export interface MemberTurnMethod {
  name: typeof MEMBER_TURN_TUNNEL_METHOD;
  /** The core's check of a member-turn request (zod for the shape, then ids, members and text sizes). */
  parse: ParamsParser<MemberTurnRequest>;
  call(server: MemberTurnServer, request: MemberTurnRequest, context: { from: string; signal: AbortSignal }): Promise<MemberTurnResult>;
  /** The gRPC request as params (the decoded message is the JSON shape) and the result as the reply. */
  grpc: { request(req: WireMemberTurnRequest): unknown; reply(result: MemberTurnResult): MemberTurnReply };
  /** The tunnel's one item: the reply as JSON. */
  tunnel: { reply(result: MemberTurnResult): unknown };
}

const asReply = (result: MemberTurnResult): MemberTurnReply => ({ ...result });

export const MEMBER_TURN_METHOD: MemberTurnMethod = {
  name: MEMBER_TURN_TUNNEL_METHOD,
  parse: (raw) => {
    const checked = checkMemberTurnRequest(raw);
    if (!checked.ok) throw new HermesError("invalid_params", `member turn: ${checked.message}`, { data: { field: checked.field } });
    return checked.value;
  },
  call: (server, request, context) => server.serve(request, context),
  grpc: { request: (req) => req, reply: asReply },
  tunnel: { reply: asReply },
};
