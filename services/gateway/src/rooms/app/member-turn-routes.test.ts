import { HermesError, PeerChannel } from "@hermes/common";
import { describe, expect, it } from "vitest";
import type { PeerDirectory } from "../../peers/app/peer-directory.js";
import { RemoteRoster } from "../../relay-link/app/remote-roster.js";
import { TunnelClient } from "../../relay-link/app/tunnel-client.js";
import type { Member } from "../core/index.js";
import type { MemberTurnRequest } from "../core/member-turn.js";
import { MEMBER_TURN_TUNNEL_METHOD, MemberTurnRouter } from "./member-turn-routes.js";
import type { LocalMemberTurns } from "./member-turns.js";

/** A tunnel that records where calls go and answers from a script (no relay, no network). */
class RecordingTunnel extends TunnelClient {
  readonly calls: { connection: string; method: string; params: Record<string, unknown> }[] = [];

  constructor(
    roster: RemoteRoster,
    private readonly answer: (connection: string) => unknown,
  ) {
    // A channel nothing is ever sent on: `stream` below answers instead.
    super(PeerChannel.open({ url: "grpc://127.0.0.1:1" }), (gatewayId) => roster.connectionOf(gatewayId));
  }

  override async *stream(connection: string, method: string, params: Record<string, unknown>): AsyncGenerator<unknown> {
    this.calls.push({ connection, method, params });
    const answer = this.answer(connection);
    if (answer instanceof Error) throw answer;
    yield answer;
  }
}

const peers = (known: Record<string, { url: string; key?: string }>): PeerDirectory => ({
  url: (peer) => known[peer]?.url,
  key: (peer) => known[peer]?.key,
});

const localTurns = {
  unavailable: () => null,
  run: () => Promise.reject(new Error("not here")),
} as unknown as LocalMemberTurns;

function rosterWith(...connections: { connection: string; gateway_id: string; online?: boolean }[]): RemoteRoster {
  const roster = new RemoteRoster();
  roster.update(
    1,
    connections.map((c) => ({
      connection: c.connection,
      gateway_id: c.gateway_id,
      online: c.online ?? true,
      bot: { handle: `bot-${c.connection}`, display_name: "", title: "", description: "" },
    })),
    "self",
  );
  return roster;
}

const member = (gateway_id?: string): Member => ({ member_id: "nora", profile: "nora", ...(gateway_id ? { gateway_id } : {}) });

const request: MemberTurnRequest = {
  room_id: "r",
  room_name: "R",
  authority: { gateway_id: "gw-self", epoch: 1 },
  turn_id: "d2.r0.p1.s2.m0123456789abcdef01234567",
  member: { member_id: "nora", profile: "nora", gateway_id: "gw-469bc200" },
  members: [
    { member_id: "hal", profile: "hal" },
    { member_id: "nora", profile: "nora", gateway_id: "gw-469bc200" },
  ],
  seen_through_seq: 2,
  transcript: [{ seq: 2, event_id: "q", author_kind: "user", author_id: "user", text: "hi" }],
};

const reply = { turn_id: request.turn_id, reply: "hello", model: "m", provider: "p", session_id: "s", fallback_used: false };

describe("MemberTurnRouter.route", () => {
  const roster = rosterWith({ connection: "vps", gateway_id: "gw-469bc200" }, { connection: "b", gateway_id: "gw-b" });

  it("runs members without a gateway id, or with this gateway's, here", () => {
    const router = new MemberTurnRouter({ gatewayId: "gw-self", local: localTurns, peers: peers({}) });
    expect(router.route(member())).toEqual({ kind: "local" });
    expect(router.route(member("gw-self"))).toEqual({ kind: "local" });
  });

  it("prefers a registered peer named after the gateway (also lower-cased), and says when its key is missing", () => {
    const tunnel = new RecordingTunnel(roster, () => reply);
    const router = new MemberTurnRouter({
      gatewayId: "gw-self",
      local: localTurns,
      peers: peers({ "gw-b": { url: "grpc://127.0.0.1:1", key: "k" }, "gw-nokey": { url: "grpc://127.0.0.1:2" } }),
      tunnel,
    });
    expect(router.route(member("gw-b"))).toEqual({ kind: "peer", peer: "gw-b", url: "grpc://127.0.0.1:1", key: "k" });
    expect(router.route(member("GW-B"))).toMatchObject({ kind: "peer", peer: "gw-b" });
    expect(router.route(member("gw-nokey"))).toMatchObject({ kind: "none", why: expect.stringContaining("HERMES_PEER_GW_NOKEY_KEY") });
  });

  it("through the relay: the connection the roster lists for the gateway id, not one named like the id", () => {
    const tunnel = new RecordingTunnel(roster, () => reply);
    const router = new MemberTurnRouter({ gatewayId: "gw-self", local: localTurns, peers: peers({}), tunnel });
    expect(router.route(member("gw-469bc200"))).toEqual({ kind: "relay", gateway: "gw-469bc200", connection: "vps", from: "roster" });
    expect(router.unavailable(member("gw-469bc200"))).toBeNull();
  });

  it("falls back to a connection named like the gateway id (lower case) only when the roster has no such gateway", () => {
    const tunnel = new RecordingTunnel(roster, () => reply);
    const router = new MemberTurnRouter({ gatewayId: "gw-self", local: localTurns, peers: peers({}), tunnel });
    expect(router.route(member("home"))).toEqual({ kind: "relay", gateway: "home", connection: "home", from: "name" });
    expect(router.route(member("GW-Laptop"))).toEqual({ kind: "relay", gateway: "GW-Laptop", connection: "gw-laptop", from: "name" });
    // A connection that happens to be called like the gateway id does not win over the roster's answer.
    const confusing = rosterWith({ connection: "gw-469bc200", gateway_id: "gw-other" }, { connection: "vps", gateway_id: "gw-469bc200" });
    const router2 = new MemberTurnRouter({
      gatewayId: "gw-self",
      local: localTurns,
      peers: peers({}),
      tunnel: new RecordingTunnel(confusing, () => reply),
    });
    expect(router2.route(member("gw-469bc200"))).toMatchObject({ connection: "vps", from: "roster" });
  });

  it("without a peer or a relay the member is unavailable, saying how to fix it", () => {
    const router = new MemberTurnRouter({ gatewayId: "gw-self", local: localTurns, peers: peers({}) });
    expect(router.unavailable(member("gw-x"))).toContain("gw-x is not reachable from here");
  });
});

describe("MemberTurnRouter.run through the relay", () => {
  it("sends the turn down the roster's connection and returns the member's reply", async () => {
    const tunnel = new RecordingTunnel(rosterWith({ connection: "vps", gateway_id: "gw-469bc200" }), () => reply);
    const router = new MemberTurnRouter({ gatewayId: "gw-self", local: localTurns, peers: peers({}), tunnel });
    await expect(router.run(member("gw-469bc200"), request, new AbortController().signal, 1000)).resolves.toEqual(reply);
    expect(tunnel.calls).toEqual([{ connection: "vps", method: MEMBER_TURN_TUNNEL_METHOD, params: { ...request } }]);
  });

  it("keeps the other side's reason and names the gateway and the connection it tried", async () => {
    const refused = new HermesError("unknown_target", "this gateway is gw-elsewhere");
    const viaRoster = new MemberTurnRouter({
      gatewayId: "gw-self",
      local: localTurns,
      peers: peers({}),
      tunnel: new RecordingTunnel(rosterWith({ connection: "vps", gateway_id: "gw-469bc200" }), () => refused),
    });
    await expect(viaRoster.run(member("gw-469bc200"), request, new AbortController().signal, 1000)).rejects.toMatchObject({
      reason: "unknown_target",
      message: "gateway gw-469bc200 (relay connection vps): this gateway is gw-elsewhere",
    });
    const unreachable = new HermesError("unavailable", "connection gw-469bc200 is not connected");
    const byName = new MemberTurnRouter({
      gatewayId: "gw-self",
      local: localTurns,
      peers: peers({}),
      tunnel: new RecordingTunnel(rosterWith(), () => unreachable),
    });
    const err = await byName.run(member("gw-469bc200"), request, new AbortController().signal, 1000).catch((e: HermesError) => e);
    expect(err).toMatchObject({ reason: "unavailable" });
    expect((err as HermesError).message).toContain("no connection in the relay roster has this gateway id");
  });

  it("a stream that ends without an item is runtime_offline", async () => {
    class SilentTunnel extends RecordingTunnel {
      override async *stream(): AsyncGenerator<unknown> {}
    }
    const router = new MemberTurnRouter({
      gatewayId: "gw-self",
      local: localTurns,
      peers: peers({}),
      tunnel: new SilentTunnel(rosterWith({ connection: "vps", gateway_id: "gw-469bc200" }), () => reply),
    });
    await expect(router.run(member("gw-469bc200"), request, new AbortController().signal, 1000)).rejects.toMatchObject({
      reason: "runtime_offline",
    });
  });
});
