import { HermesError, PeerChannels, peerTarget, toHermesError } from "@hermes/common";
import { RoomMemberServiceClient } from "@hermes/proto/hermes/v1/rooms";
import { z } from "zod";
import type { PeerDirectory } from "../../peers/app/peer-directory.js";
import type { TunnelClient } from "../../relay-link/app/tunnel-client.js";
import type { Member } from "../core/index.js";
import type { MemberTurnRequest, MemberTurnResult } from "../core/member-turn.js";
import type { LocalMemberTurns } from "./member-turns.js";

/** The relay tunnel method a member turn travels as (JSON params = MemberTurnRequest). */
export const MEMBER_TURN_TUNNEL_METHOD = "groups.member_turn";

/** How the authority reaches a member: this gateway, a registered peer, or the relay. */
export type MemberRoute =
  | { kind: "local" }
  | { kind: "peer"; peer: string; url: string; key: string }
  | { kind: "relay"; connection: string; gateway: string; from: "roster" | "name" }
  | { kind: "none"; why: string };

export interface MemberTurnRouterDeps {
  gatewayId: string;
  local: LocalMemberTurns;
  /** Registered peers (config.yaml bot_peers): a member's gateway is reached directly when a peer carries its id as name. */
  peers: PeerDirectory;
  /** The relay tunnel, when this gateway has a relay. */
  tunnel?: TunnelClient | undefined;
}

/** Slack on top of the turn timeout before a direct call gives up on its own. */
const CALL_MARGIN_MS = 30_000;

const resultSchema = z.object({
  turn_id: z.string(),
  reply: z.string(),
  model: z.string(),
  provider: z.string(),
  session_id: z.string(),
  fallback_used: z.boolean(),
});

function parseResult(value: unknown, where: string): MemberTurnResult {
  const parsed = resultSchema.safeParse(value);
  if (!parsed.success) throw new HermesError("unknown", `${where} answered a member turn with an unexpected shape`);
  return parsed.data;
}

/**
 * Where each member's turn runs, by the gateway hosting it: rooms store every
 * member with its host (the store fills in the writer of member lists that lack one), so after an
 * authority move the creator's bots still run on the creator. Members hosted here (or naming no
 * gateway at all) run here; a member on another gateway runs there — directly over gRPC
 * (`RoomMemberService.RunMemberTurn`) when a registered peer is named after that gateway
 * (`bot_peers.<gateway id>` with `HERMES_PEER_<GATEWAY_ID>_KEY`), else through the relay tunnel to
 * the connection the relay roster lists for that gateway id (a connection may be named anything,
 * e.g. `vps` for gateway `gw-469bc200`), falling back to a connection named like the id when the
 * roster does not know the gateway. The authority appends the reply either way.
 */
export class MemberTurnRouter {
  private readonly channels: PeerChannels;

  constructor(private readonly deps: MemberTurnRouterDeps) {
    this.channels = new PeerChannels(deps.peers);
  }

  isLocal(member: Member): boolean {
    return member.gateway_id === undefined || member.gateway_id === this.deps.gatewayId;
  }

  route(member: Member): MemberRoute {
    if (this.isLocal(member)) return { kind: "local" };
    const gateway = member.gateway_id!;
    for (const peer of new Set([gateway, gateway.toLowerCase()])) {
      let url: string | undefined;
      try {
        url = this.deps.peers.url(peer);
      } catch {
        url = undefined; // an unreadable config.yaml names no peers
      }
      if (!url) continue;
      try {
        return { kind: "peer", peer, url, key: peerTarget(this.deps.peers, peer).key! };
      } catch (err) {
        return { kind: "none", why: `gateway ${gateway}: ${toHermesError(err).message}` }; // a peer without a key
      }
    }
    const { tunnel } = this.deps;
    if (tunnel) return { kind: "relay", gateway, ...tunnel.connectionFor(gateway) };
    return {
      kind: "none",
      why: `gateway ${gateway} is not reachable from here: register it (hermes peer add ${gateway} --url grpc://HOST:PORT --key KEY) or configure a relay`,
    };
  }

  /** Null when the member's turn can be sent somewhere; otherwise why not. */
  unavailable(member: Member): string | null {
    const route = this.route(member);
    if (route.kind === "none") return route.why;
    if (route.kind === "local") return this.deps.local.unavailable(member);
    return null;
  }

  /** Runs the member's turn where it lives; rejects with a typed error (the reason becomes turn.failed's reason_code). */
  async run(member: Member, request: MemberTurnRequest, signal: AbortSignal, timeoutMs: number): Promise<MemberTurnResult> {
    const route = this.route(member);
    switch (route.kind) {
      case "local":
        return this.deps.local.run(request, signal);
      case "peer":
        return this.viaPeer(route, request, signal, timeoutMs);
      case "relay":
        return this.viaRelay(route, request, signal);
      case "none":
        throw new HermesError("runtime_offline", route.why, { data: { member_id: member.member_id } });
    }
  }

  private async viaPeer(
    route: Extract<MemberRoute, { kind: "peer" }>,
    request: MemberTurnRequest,
    signal: AbortSignal,
    timeoutMs: number,
  ): Promise<MemberTurnResult> {
    const channel = this.channels.get(route.peer);
    const client = channel.client(RoomMemberServiceClient);
    const reply = await channel.unary(client, client.runMemberTurn, request, { timeoutMs: timeoutMs + CALL_MARGIN_MS, signal });
    return parseResult(reply, channel.describe);
  }

  /** Through the relay as a one-item stream: a tunnelled stream has no relay-side timeout, a turn may take minutes. */
  private async viaRelay(
    route: Extract<MemberRoute, { kind: "relay" }>,
    request: MemberTurnRequest,
    signal: AbortSignal,
  ): Promise<MemberTurnResult> {
    const { connection, gateway } = route;
    const { tunnel } = this.deps;
    const where =
      route.from === "roster"
        ? `gateway ${gateway} (relay connection ${connection})`
        : `gateway ${gateway} (through the relay, as connection ${connection}: no connection in the relay roster has this gateway id)`;
    if (!tunnel) throw new HermesError("runtime_offline", `${where}: this gateway has no relay any more`);
    try {
      for await (const item of tunnel.stream(connection, MEMBER_TURN_TUNNEL_METHOD, { ...request }, signal)) {
        return parseResult(item, where);
      }
    } catch (err) {
      const e = toHermesError(err);
      throw new HermesError(e.reason, `${where}: ${e.message}`, { data: e.data, cause: e });
    }
    signal.throwIfAborted();
    throw new HermesError("runtime_offline", `${where} ended the member turn without an answer`);
  }

  close(): void {
    this.channels.close();
  }
}
