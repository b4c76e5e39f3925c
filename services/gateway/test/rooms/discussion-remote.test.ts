import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { authMetadata, fromServiceError, type HermesError } from "@hermes/common";
import { type MemberTurnReply, type MemberTurnRequest, RoomMemberServiceClient } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import type { Member, RoomEvent } from "../../src/rooms/core/index.js";
import { createBot, sendAndWait, transcript, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import {
  memberTurnRequest,
  type ScriptedProvider,
  scriptedBot,
  scriptedProviderConfig,
  startedTurns,
  startScriptedProvider,
  turnLines,
} from "../support/discussion-fixtures.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * Discussion members on another gateway run their turns there: the authority sends the turn (directly
 * over gRPC RoomMemberService to a peer named after the member's gateway, or through the relay
 * tunnel to the connection the relay roster lists for the member's gateway id), the member's
 * gateway runs it in the member's own room session, and the authority appends the reply. Five real
 * gateways, a real relay, one scripted provider endpoint.
 */

const KEY_A = "key-a-0123456789abcdef";
const KEY_B = "key-b-0123456789abcdef";
let provider: ScriptedProvider;
let relay: TestRelay;
let a: TestGateway; // authority, dials gw-b directly
let b: TestGateway; // hosts bob, reachable directly
let hub: TestGateway; // authority reached through the relay only
let nat: TestGateway; // hosts nora, behind "NAT": only on the relay
let vps: TestGateway; // hosts vera: gateway gw-469bc200, relay connection "vps" (name ≠ gateway id)
const VPS_ID = "gw-469bc200";
const VERA_DESCRIPTION = "watches the servers at night";

function home(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const { config, env } = scriptedProviderConfig(provider.url);
  writeHomeConfig(dir, config);
  writeHomeEnv(dir, env);
  return dir;
}

beforeAll(async () => {
  provider = await startScriptedProvider();
  b = await startTestGateway({ home: home("hdr-b-"), key: KEY_B, overrides: { id: "gw-b" } });
  createBot(b, "bob", scriptedBot("Remote reviewer"));
  const homeA = home("hdr-a-");
  const { config, env } = scriptedProviderConfig(provider.url);
  writeHomeConfig(homeA, {
    ...config,
    bot_peers: { "gw-b": { url: `grpc://${b.gateway.grpcAddress}` }, "gw-dead": { url: "grpc://127.0.0.1:1" } },
  });
  writeHomeEnv(homeA, { ...env, HERMES_PEER_GW_B_KEY: KEY_B, HERMES_PEER_GW_DEAD_KEY: "whatever-key-000" });
  a = await startTestGateway({ home: homeA, key: KEY_A, overrides: { id: "gw-a" } });
  createBot(a, "alice", scriptedBot());

  relay = await startTestRelay();
  const keys = { hub: relay.relay.keys.add("hub").key, nat: relay.relay.keys.add("nat-b").key, vps: relay.relay.keys.add("vps").key };
  hub = await startTestGateway({ home: home("hdr-hub-"), overrides: { id: "hub", relayUrl: relay.url, relayKey: keys.hub } });
  nat = await startTestGateway({ home: home("hdr-nat-"), overrides: { id: "nat-b", relayUrl: relay.url, relayKey: keys.nat } });
  vps = await startTestGateway({
    home: home("hdr-vps-"),
    overrides: { id: VPS_ID, relayUrl: relay.url, relayKey: keys.vps, relayConnection: "vps" },
  });
  createBot(hub, "hal", scriptedBot());
  createBot(nat, "nora", scriptedBot());
  createBot(vps, "vera", { ...scriptedBot("Night shift"), description: VERA_DESCRIPTION });
  await eventually(() => {
    expect(hub.gateway.relay!.status().state).toBe("connected");
    expect(nat.gateway.relay!.status().state).toBe("connected");
    expect(vps.gateway.relay!.status()).toMatchObject({ state: "connected", connection: "vps" });
  });
}, 90_000);

afterAll(async () => {
  await a?.destroy();
  await b?.destroy();
  await hub?.destroy();
  await nat?.destroy();
  await vps?.destroy();
  await relay?.destroy();
  await provider?.close();
});

async function discuss(t: TestGateway, roomId: string, members: Member[], text: string) {
  t.gateway.rooms.create({ room_id: roomId, name: `Remote ${roomId}`, members });
  const { event } = await t.gateway.rooms.send({ room_id: roomId, event_id: `q-${roomId}`, payload: { text } });
  const state = await eventually(
    () => {
      const s = t.gateway.rooms.state(roomId);
      expect(s.discussion?.discussion_seq).toBe(event.seq);
      expect(["settled", "bounded", "stopped"]).toContain(s.driver_status);
      return s;
    },
    { timeoutMs: 30_000 },
  );
  const events: RoomEvent[] = t.gateway.rooms.log({ room_id: roomId, since_seq: 0, limit: 500 }).events;
  return { state, events };
}

describe("members on another gateway", () => {
  it("run their turn on their own gateway (direct gRPC to a registered peer); the authority appends the reply", async () => {
    // Each member answers once: on its first turn in the room (no reply of its own seen yet).
    provider.script((handle, _n, call) => {
      const first = call.messages.some((m) => m.content === "hello both") && !call.messages.some((m) => m.role === "assistant");
      return first ? `${handle} answering from ${handle === "bob" ? "gw-b" : "gw-a"}` : "(pass)";
    });
    const bob: Member = { member_id: "bob", profile: "bob", gateway_id: "gw-b", display_name: "Bob" };
    const { state, events } = await discuss(a, "cross", [{ member_id: "alice", profile: "alice" }, bob], "hello both");
    expect(state.discussion).toMatchObject({ state: "settled", unavailable: [] });
    expect(startedTurns(events).slice(0, 2)).toEqual(["0:alice", "0:bob"]);
    const reply = events.find((e) => e.kind === "message.member" && JSON.parse(e.actor_json).id === "bob")!;
    expect(JSON.parse(reply.payload_json).text).toBe("bob answering from gw-b");
    expect(JSON.parse(reply.actor_json)).toEqual({ kind: "member", id: "bob", profile: "bob", display_name: "Bob" });
    // The turn ran on gw-b, in bob's room session there; gw-a has no bob at all.
    const session = b.gateway.sessions.store.byKey("agent:bob:room:group:cross")!;
    expect(session).toMatchObject({ kind: "room", profile_name: "bob" });
    expect(transcript(b, "bob", session.session_id).map((m) => [m.role, m.content])).toEqual([
      ["user", "hello both"],
      ["user", "alice answering from gw-a"],
      ["assistant", "bob answering from gw-b"],
    ]);
    expect(a.gateway.sessions.store.byKey("agent:bob:room:group:cross")).toBeUndefined();
    // gw-b holds no copy of the room: the request carried the transcript.
    expect(() => b.gateway.rooms.state("cross")).toThrow(/no room cross/);
  });

  it("run their turn through the relay tunnel when their gateway cannot be dialled", async () => {
    provider.script((handle, _n, call) =>
      call.messages.some((m) => m.content === "ping the nat") && !call.messages.some((m) => m.role === "assistant")
        ? `${handle} here`
        : "(pass)",
    );
    const nora: Member = { member_id: "nora", profile: "nora", gateway_id: "nat-b" };
    const { events } = await discuss(hub, "via-relay", [{ member_id: "hal", profile: "hal" }, nora], "ping the nat");
    const lines = turnLines(events).filter((l) => l.kind === "message.member");
    expect(lines.map((l) => [l.member, l.text])).toEqual([
      ["hal", "hal here"],
      ["nora", "nora here"],
    ]);
    const session = nat.gateway.sessions.store.byKey("agent:nora:room:group:via-relay")!;
    expect(transcript(nat, "nora", session.session_id).at(-1)).toMatchObject({ role: "assistant", content: "nora here" });
  });

  it("run their turn through the relay when the member's gateway connects under another name (vps ≠ gw-469bc200)", async () => {
    // The relay roster tells hub which connection gateway gw-469bc200 is on.
    await eventually(() =>
      expect(hub.gateway.relay!.remoteRoster().find((b) => b.handle === "vera")).toMatchObject({ connection: "vps", gateway_id: VPS_ID }),
    );
    expect(hub.gateway.relay!.tunnel.connectionFor(VPS_ID)).toEqual({ connection: "vps", from: "roster" });
    provider.script((handle, _n, call) =>
      call.messages.some((m) => m.content === "ping the vps") && !call.messages.some((m) => m.role === "assistant")
        ? `${handle} here`
        : "(pass)",
    );
    const vera: Member = { member_id: "vera", profile: "vera", gateway_id: VPS_ID };
    const { state, events } = await discuss(hub, "via-vps", [{ member_id: "hal", profile: "hal" }, vera], "ping the vps");
    expect(state.discussion).toMatchObject({ unavailable: [] });
    const lines = turnLines(events);
    expect(lines.filter((l) => l.kind === "turn.failed")).toEqual([]);
    expect(lines.filter((l) => l.kind === "message.member").map((l) => [l.member, l.text])).toEqual([
      ["hal", "hal here"],
      ["vera", "vera here"],
    ]);
    // It ran on the vps gateway, in vera's room session there.
    const session = vps.gateway.sessions.store.byKey("agent:vera:room:group:via-vps")!;
    expect(transcript(vps, "vera", session.session_id).at(-1)).toMatchObject({ role: "assistant", content: "vera here" });
  });

  it("a member whose gateway is registered but down fails its turn runtime_offline; the discussion goes on", async () => {
    provider.script((handle) => (handle === "alice" ? "still here" : "(pass)"));
    const { events } = await discuss(
      a,
      "dead-peer",
      [
        { member_id: "ghost", profile: "ghost", gateway_id: "gw-dead" },
        { member_id: "alice", profile: "alice" },
      ],
      "anyone there?",
    );
    const lines = turnLines(events);
    expect(lines.find((l) => l.kind === "turn.failed")).toMatchObject({ member: "ghost", reason: "runtime_offline" });
    expect(lines.find((l) => l.kind === "message.member")).toMatchObject({ member: "alice", text: "still here" });
  });

  it("a member on a gateway with no route is listed as unavailable, not run", async () => {
    provider.script(() => "(pass)");
    const { state, events } = await discuss(
      a,
      "no-route",
      [
        { member_id: "zed", profile: "zed", gateway_id: "gw-unknown" },
        { member_id: "alice", profile: "alice" },
      ],
      "hi",
    );
    expect(state.discussion?.unavailable).toEqual([{ member_id: "zed", why: expect.stringContaining("gw-unknown is not reachable") }]);
    expect(startedTurns(events)).toEqual(["0:alice"]);
  });
});

describe("RunMemberTurn at the edge", () => {
  function run(req: MemberTurnRequest, key: string | undefined): Promise<MemberTurnReply> {
    const client = new RoomMemberServiceClient(b.gateway.grpcAddress, credentials.createInsecure());
    return new Promise<MemberTurnReply>((resolve, reject) => {
      client.runMemberTurn(req, authMetadata(key), (err, reply) => {
        client.close();
        if (err) reject(fromServiceError(err));
        else resolve(reply);
      });
    });
  }

  async function refusal(p: Promise<unknown>): Promise<HermesError> {
    try {
      await p;
    } catch (err) {
      return err as HermesError;
    }
    throw new Error("expected a refusal");
  }

  it("runs a turn once per turn id; a repeated request gets the same answer without running again", async () => {
    provider.script((handle) => `${handle} at the edge`);
    const before = provider.callsOf("bob").length;
    const first = await run(memberTurnRequest(), KEY_B);
    const again = await run(memberTurnRequest(), KEY_B);
    expect(first).toMatchObject({ turn_id: memberTurnRequest().turn_id, reply: "bob at the edge", provider: "scripted" });
    expect(again).toEqual(first);
    expect(provider.callsOf("bob").length).toBe(before + 1);
  });

  it("refuses a wrong key, bad input, a member that lives elsewhere and an unknown profile, typed", async () => {
    expect((await refusal(run(memberTurnRequest(), "not-the-key-0000"))).reason).toBe("unauthenticated");
    const bad = await refusal(run(memberTurnRequest({ authority: undefined }), KEY_B));
    expect(bad.reason).toBe("invalid_params");
    expect(bad.message).toContain("authority");
    const elsewhere = memberTurnRequest({
      member: { member_id: "alice", profile: "alice", gateway_id: "gw-a" },
      members: [
        { member_id: "alice", profile: "alice", gateway_id: "gw-a" },
        { member_id: "bob", profile: "bob", gateway_id: "gw-b" },
      ],
    });
    expect((await refusal(run(elsewhere, KEY_B))).reason).toBe("unknown_target");
    const nobody = memberTurnRequest({
      turn_id: "d2.r0.p1.s2.mffffffffffffffffffffffff",
      member: { member_id: "nobody", profile: "nobody" },
      members: [
        { member_id: "alice", profile: "alice" },
        { member_id: "nobody", profile: "nobody" },
      ],
    });
    const unknown = await refusal(run(nobody, KEY_B));
    expect(unknown.reason).toBe("unknown_target");
    expect(unknown.message).toContain("bob");
  });
});

describe("the relay roster in Bot Chat prompts", () => {
  /** The system prompt of the last Bot Chat turn of `handle` (Bot Chat prompts start "You are <name> (@<handle>)"). */
  const lastBotChatPrompt = (handle: string) => provider.calls.filter((c) => c.system.includes(`(@${handle})`)).at(-1)?.system ?? "";

  it("lists a relay teammate with its title and description, and marks it offline while its gateway is away", async () => {
    provider.script(() => "noted");
    await eventually(() =>
      expect(hub.gateway.deliveries.roster("hal")).toContainEqual({
        target: "vera@vps",
        title: "Night shift",
        description: VERA_DESCRIPTION,
        where: "via the relay",
      }),
    );
    // vera@vps writes to hal@hub: hal's Bot Chat turn on hub shows vera with her description.
    expect(await sendAndWait(vps, "vera", "hal@hub", "evening, hal")).toMatchObject({ state: "settled", target: "hal@hub" });
    expect(lastBotChatPrompt("hal")).toContain(`- vera@vps (via the relay): Night shift — ${VERA_DESCRIPTION}`);

    await vps.stop();
    await eventually(() =>
      expect(hub.gateway.deliveries.roster("hal")).toContainEqual(expect.objectContaining({ target: "vera@vps", offline: true })),
    );
    // The next Bot Chat turn of hal says vera is offline (mail to her would wait).
    expect(await sendAndWait(nat, "nora", "hal@hub", "is vera around?")).toMatchObject({ state: "settled" });
    expect(lastBotChatPrompt("hal")).toContain(
      `- vera@vps (via the relay; offline now: mail waits until its gateway is back, up to the delivery's TTL): Night shift — ${VERA_DESCRIPTION}`,
    );
  });
});
