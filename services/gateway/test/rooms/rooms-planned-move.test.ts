import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { peerKeyVariable } from "@hermes/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import type { Member } from "../../src/rooms/core/index.js";
import { createBot, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import {
  type ScriptedProvider,
  scriptedBot,
  scriptedProviderConfig,
  startScriptedProvider,
  turnLines,
} from "../support/discussion-fixtures.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";

/**
 * The README's mesh and its four-command planned move, in this process: gw-1 leads `lobby` (alice
 * on gw-1, carol on gw-2, erin on gw-3), gw-2 and gw-3 follow it; then
 *
 *   gw-2: groups promote lobby --confirm --reason planned-handover
 *   gw-1: groups demote lobby --observed-gateway gw-2 --observed-epoch 2
 *   gw-1: groups replicate lobby --from gw-2 --follow
 *   gw-3: groups replicate lobby --from gw-2 --follow
 *
 * A clean move raises no split-brain alarm anywhere, and every member keeps taking turns in the
 * room now led by gw-2 — alice on gw-1 too. Every gateway knows the others as registered peers.
 */

const ROOM = "lobby";
const QUESTION = "who is still here after the move?";
let provider: ScriptedProvider;
const gateways = new Map<string, TestGateway>();

function gw(id: string): TestGateway {
  return gateways.get(id)!;
}

function divergencesCounted(t: TestGateway): Promise<number> {
  return t.gateway.metrics.registry
    .getSingleMetric("hermes_room_divergences_detected_total")!
    .get()
    .then((m) => m.values[0]?.value ?? 0);
}

beforeAll(async () => {
  provider = await startScriptedProvider();
  const { config, env } = scriptedProviderConfig(provider.url);
  for (const [id, bot] of [
    ["gw-1", "alice"],
    ["gw-2", "carol"],
    ["gw-3", "erin"],
  ] as const) {
    const home = mkdtempSync(join(tmpdir(), `hpm-${id}-`));
    writeHomeConfig(home, config);
    writeHomeEnv(home, env);
    const t = await startTestGateway({ home, overrides: { id } });
    createBot(t, bot, scriptedBot());
    gateways.set(id, t);
  }
  // Every gateway registers the others as peers (config.yaml and .env are re-read on change).
  for (const [id, t] of gateways) {
    const others = [...gateways].filter(([other]) => other !== id);
    writeHomeConfig(t.home, {
      ...config,
      bot_peers: Object.fromEntries(others.map(([other, o]) => [other, { url: `grpc://${o.gateway.grpcAddress}` }])),
    });
    writeHomeEnv(t.home, { ...env, ...Object.fromEntries(others.map(([other]) => [peerKeyVariable(other), TEST_KEY])) });
  }

  // As `hermes up` creates it: alice without a gateway (she is a profile of the creator), the others by gateway.
  const members: Member[] = [
    { member_id: "alice", profile: "alice" },
    { member_id: "carol", profile: "carol", gateway_id: "gw-2" },
    { member_id: "erin", profile: "erin", gateway_id: "gw-3" },
  ];
  gw("gw-1").gateway.rooms.create({ room_id: ROOM, name: "Lobby", members });
  await gw("gw-1").gateway.rooms.send({ room_id: ROOM, event_id: "welcome", payload: { text: "welcome to the lobby" } });
  for (const id of ["gw-2", "gw-3"]) await gw(id).gateway.rooms.replicate({ room_id: ROOM, from: { peer: "gw-1" }, follow: true });
  // The welcome's discussion settles on gw-1 (everybody passes) and reaches both followers.
  await eventually(() => expect(gw("gw-1").gateway.rooms.state(ROOM).driver_status).toBe("settled"), { timeoutMs: 30_000 });
  const head = gw("gw-1").gateway.rooms.replicaState(ROOM).last_seq;
  for (const id of ["gw-2", "gw-3"]) {
    await eventually(() => expect(gw(id).gateway.rooms.replicaState(ROOM)).toMatchObject({ last_seq: head, caught_up: true }), {
      timeoutMs: 15_000,
    });
  }

  // The four commands.
  expect(gw("gw-2").gateway.rooms.promote({ room_id: ROOM, confirm: true, reason: "planned-handover" })).toMatchObject({
    authority_gateway_id: "gw-2",
    authority_epoch: 2,
    claim_seq: head + 1,
  });
  gw("gw-1").gateway.rooms.demote({ room_id: ROOM, observed_gateway_id: "gw-2", observed_epoch: 2 });
  await gw("gw-1").gateway.rooms.replicate({ room_id: ROOM, from: { peer: "gw-2" }, follow: true });
  await gw("gw-3").gateway.rooms.replicate({ room_id: ROOM, from: { peer: "gw-2" }, follow: true });
}, 120_000);

afterAll(async () => {
  for (const t of gateways.values()) await t.destroy();
  await provider?.close();
});

describe("the README's planned move of lobby from gw-1 to gw-2", () => {
  it("leaves every gateway passive, with no divergence recorded or counted; the demotion is an audit record on gw-1", async () => {
    for (const [id, t] of gateways) {
      const state = t.gateway.rooms.replicaState(ROOM);
      expect(state, id).toMatchObject({ authority: { gateway_id: "gw-2", epoch: 2 }, safety_status: "passive", safety_reason: null });
      expect(t.gateway.rooms.divergence(ROOM).branches, id).toEqual([]);
      expect(await divergencesCounted(t), id).toBe(0);
    }
    expect(gw("gw-2").gateway.rooms.replicaState(ROOM).role).toBe("authority");
    // The three logs are one log.
    const heads = [...gateways.values()].map((t) => {
      const { last_seq } = t.gateway.rooms.replicaState(ROOM);
      return t.gateway.rooms.log({ room_id: ROOM, since_seq: last_seq - 1, limit: 1 }).events[0]!.hash;
    });
    expect(new Set(heads).size).toBe(1);
    // The demotion is kept for the operator, outside the log.
    expect(gw("gw-1").gateway.rooms.replicaState(ROOM).demoted).toMatchObject({
      previous_gateway_id: "gw-1",
      previous_epoch: 1,
      authority_gateway_id: "gw-2",
      authority_epoch: 2,
    });
    expect(gw("gw-1").gateway.rooms.state(ROOM).room.demoted).toMatchObject({ authority_gateway_id: "gw-2" });
  });

  it("keeps every member taking turns: alice on gw-1 replies in the room gw-2 now leads", async () => {
    provider.script((handle, _n, call) => {
      const asked = call.messages.some((m) => m.content === QUESTION);
      const answered = call.messages.some((m) => m.role === "assistant" && m.content.includes("after the move"));
      return asked && !answered ? `${handle} is here after the move` : "(pass)";
    });
    const lead = gw("gw-2").gateway.rooms;
    const { event } = await lead.send({ room_id: ROOM, event_id: "after-move", payload: { text: QUESTION } });
    const state = await eventually(
      () => {
        const s = lead.state(ROOM);
        expect(s.discussion?.discussion_seq).toBe(event.seq);
        expect(s.driver_status).toBe("settled");
        return s;
      },
      { timeoutMs: 30_000 },
    );
    expect(state.discussion?.unavailable).toEqual([]);
    const events = lead.log({ room_id: ROOM, since_seq: event.seq, limit: 500 }).events;
    const replies = turnLines(events).filter((l) => l.kind === "message.member");
    expect(replies.map((l) => [l.member, l.text]).sort()).toEqual([
      ["alice", "alice is here after the move"],
      ["carol", "carol is here after the move"],
      ["erin", "erin is here after the move"],
    ]);
    expect(turnLines(events).filter((l) => l.kind === "turn.failed")).toEqual([]);
    // alice's turn ran on gw-1, in her room session there.
    expect(gw("gw-1").gateway.sessions.store.byKey(`agent:alice:room:group:${ROOM}`)).toMatchObject({ profile_name: "alice" });
    expect(gw("gw-2").gateway.sessions.store.byKey(`agent:alice:room:group:${ROOM}`)).toBeUndefined();
  });
});
