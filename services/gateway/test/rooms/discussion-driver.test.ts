import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallOptions, Metadata, ServiceError } from "@grpc/grpc-js";
import { authMetadata, unaryCall } from "@hermes/common";
import { RoomServiceClient, type RoomStateReply, type StateRequest } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import type { Member, RoomEvent } from "../../src/rooms/core/index.js";
import { createBot, transcript, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import {
  type ScriptedProvider,
  scriptedBot,
  scriptedProviderConfig,
  startedTurns,
  startScriptedProvider,
  turnLines,
} from "../support/discussion-fixtures.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";

/**
 * The discussion driver on a real in-process gateway: members are profiles whose provider is
 * a scripted OpenAI-compatible endpoint (real HTTP), so each test says what each bot answers and
 * reads back the room log the driver wrote.
 */

let t: TestGateway;
let provider: ScriptedProvider;
let roomCounter = 0;

const ALICE: Member = { member_id: "alice", profile: "alice", display_name: "Alice" };
const BOB: Member = { member_id: "bob", profile: "bob" };
const CAROL: Member = { member_id: "carol", profile: "carol" };
const DAVE: Member = { member_id: "dave", profile: "dave" };

beforeAll(async () => {
  provider = await startScriptedProvider();
  const home = mkdtempSync(join(tmpdir(), "hdisc-"));
  const { config, env } = scriptedProviderConfig(provider.url);
  writeHomeConfig(home, config);
  writeHomeEnv(home, env);
  t = await startTestGateway({ home });
  for (const name of ["alice", "bob", "carol", "dave"]) createBot(t, name, scriptedBot());
  // Two bots on the embedded local provider, for the one test that shows it in a room.
  createBot(t, "lia", { title: "Librarian" });
  createBot(t, "max", { title: "Mechanic" });
}, 60_000);

afterAll(async () => {
  await t?.destroy();
  await provider?.close();
});

afterEach(() => {
  provider.script(() => "(pass)");
});

function newRoom(members: Member[]): string {
  const roomId = `disc-${++roomCounter}`;
  t.gateway.rooms.create({ room_id: roomId, name: `Discussion ${roomCounter}`, members });
  return roomId;
}

async function say(roomId: string, text: string): Promise<RoomEvent> {
  const { event } = await t.gateway.rooms.send({ room_id: roomId, event_id: `user-${Date.now()}-${Math.random()}`, payload: { text } });
  return event;
}

function log(roomId: string): RoomEvent[] {
  return t.gateway.rooms.log({ room_id: roomId, since_seq: 0, limit: 500 }).events;
}

/** Waits until the discussion of the newest user message has ended; its state. */
async function ended(roomId: string, userSeq: number, timeoutMs = 20_000) {
  return eventually(
    () => {
      const state = t.gateway.rooms.state(roomId);
      expect(state.discussion?.discussion_seq).toBe(userSeq);
      expect(["settled", "bounded", "stopped"]).toContain(state.driver_status);
      return state;
    },
    { timeoutMs },
  );
}

/** Replies whose text names the member and its round, so the log shows who said what when. */
const chatty = (handle: string, n: number) => `${handle} thought #${n}`;

describe("rounds and caps", () => {
  it("nobody mentioned: everybody answers, up to 3 serial rounds, each turn logged started → message → settled", async () => {
    provider.script(chatty);
    const room = newRoom([ALICE, BOB, CAROL]);
    const user = await say(room, "What should we build next?");
    const state = await ended(room, user.seq);
    expect(state).toMatchObject({ driver_status: "bounded", discussion: { state: "bounded", reason: "max_rounds", replies: 9 } });
    const events = log(room);
    expect(startedTurns(events)).toEqual(["0:alice", "0:bob", "0:carol", "1:bob", "1:carol", "1:alice", "2:carol", "2:alice", "2:bob"]);
    // Serial: each turn ends before the next starts, and a reply is its message then its settle.
    const lines = turnLines(events).filter((l) => l.seq > user.seq);
    for (let i = 0; i < lines.length; i += 3) {
      expect(lines.slice(i, i + 3).map((l) => l.kind)).toEqual(["turn.started", "message.member", "turn.settled"]);
      expect(lines[i + 2]).toMatchObject({ passed: false, turn_id: lines[i]!.turn_id });
      expect(lines[i + 1]!.member).toBe(lines[i]!.member);
    }
    // Authors are the members; turn events are the gateway's.
    const reply = events.find((e) => e.kind === "message.member")!;
    expect(JSON.parse(reply.actor_json)).toEqual({ kind: "member", id: "alice", profile: "alice", display_name: "Alice" });
    const started = events.find((e) => e.kind === "turn.started")!;
    expect(JSON.parse(started.actor_json)).toEqual({ kind: "gateway", id: t.gateway.id });
    // Later turns saw the earlier replies: bob's first call carried alice's reply, attributed.
    const bobFirst = provider.callsOf("bob").at(-3)!;
    expect(bobFirst.messages.map((m) => m.content)).toEqual(["What should we build next?", "[Alice] alice thought #0"]);
  });

  it("stops at 10 member replies per user message", async () => {
    provider.script(chatty);
    const room = newRoom([ALICE, BOB, CAROL, DAVE]);
    const user = await say(room, "brainstorm, everyone");
    const state = await ended(room, user.seq);
    expect(state.discussion).toMatchObject({ state: "bounded", reason: "max_replies", replies: 10 });
    const events = log(room);
    expect(events.filter((e) => e.kind === "message.member")).toHaveLength(10);
    expect(startedTurns(events)).toHaveLength(10);
    expect(startedTurns(events).slice(-2)).toEqual(["2:carol", "2:dave"]);
  });

  it("a full silent round settles the discussion: passes are logged as turn.settled{passed:true}, no message", async () => {
    provider.script((handle) => (handle === "alice" ? "PASS" : handle === "bob" ? "" : "(pass)"));
    const room = newRoom([ALICE, BOB, CAROL]);
    const user = await say(room, "anything to add?");
    const state = await ended(room, user.seq);
    expect(state.discussion).toMatchObject({ state: "settled", reason: "silent_round", replies: 0 });
    const lines = turnLines(log(room)).filter((l) => l.seq > user.seq);
    expect(lines.map((l) => [l.kind, l.member, l.passed])).toEqual([
      ["turn.started", "alice", undefined],
      ["turn.settled", "alice", true],
      ["turn.started", "bob", undefined],
      ["turn.settled", "bob", true],
      ["turn.started", "carol", undefined],
      ["turn.settled", "carol", true],
    ]);
  });
});

describe("mentions", () => {
  it("scope the round: only @bob answers; mentions in replies bring others into the next round", async () => {
    provider.script((handle, _n, call) => {
      const last = call.messages.at(-1)?.content ?? "";
      if (handle === "bob" && last.startsWith("@bob")) return "I'd ask @carol, she knows the numbers";
      if (handle === "carol") return "It is 42.";
      return "(pass)";
    });
    const aliceBefore = provider.callsOf("alice").length;
    const room = newRoom([ALICE, BOB, CAROL]);
    const user = await say(room, "@bob how big is the budget?");
    const state = await ended(room, user.seq);
    expect(startedTurns(log(room))).toEqual(["0:bob", "1:carol", "1:bob"]);
    expect(state.discussion).toMatchObject({ state: "settled", replies: 2 });
    // alice was never asked, and has no room session.
    expect(provider.callsOf("alice").length).toBe(aliceBefore);
    expect(t.gateway.sessions.store.byKey(`agent:alice:room:group:${room}`)).toBeUndefined();
  });

  it("@user raises the room's needs-you flag; the next user message clears it", async () => {
    provider.script((handle) => (handle === "bob" ? "@user which date works for you?" : "(pass)"));
    const room = newRoom([ALICE, BOB]);
    const first = await say(room, "let's plan the offsite");
    const state = await ended(room, first.seq);
    expect(state.needs_you).toBe(true);
    expect(state.discussion?.needs_you).toBe(true);
    provider.script(() => "(pass)");
    const answer = await say(room, "May 3rd");
    const after = await ended(room, answer.seq);
    expect(after.needs_you).toBe(false);
  });
});

describe("member turns", () => {
  it("each member runs in its own room session agent:<profile>:room:group:<room>, which keeps the room transcript", async () => {
    provider.script((handle) => (handle === "alice" ? "Happy to help." : "(pass)"));
    const room = newRoom([ALICE, BOB]);
    const user = await say(room, "hello room");
    await ended(room, user.seq);
    const alice = t.gateway.sessions.store.byKey(`agent:alice:room:group:${room}`)!;
    expect(alice).toMatchObject({ kind: "room", profile_name: "alice", title: expect.stringContaining("Discussion") });
    expect(transcript(t, "alice", alice.session_id).map((m) => [m.role, m.content])).toEqual([
      ["user", "hello room"],
      ["assistant", "Happy to help."],
    ]);
    const bob = t.gateway.sessions.store.byKey(`agent:bob:room:group:${room}`)!;
    expect(transcript(t, "bob", bob.session_id).map((m) => [m.role, m.content, m.meta["passed"] ?? null])).toEqual([
      ["user", "hello room", null],
      ["user", "Happy to help.", null],
      ["assistant", "(pass)", true],
    ]);
    // The room prompt went to the model, not into the stored transcript.
    expect(provider.callsOf("alice").at(-1)!.system).toContain("You are @alice in a group room");
  });

  it("a failing provider fails that turn with its delivery reason; the discussion goes on", async () => {
    provider.script((handle) =>
      handle === "alice"
        ? { status: 429, body: { error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" } } }
        : handle === "bob"
          ? "bob is here"
          : "(pass)",
    );
    const room = newRoom([ALICE, BOB]);
    const user = await say(room, "status?");
    const state = await ended(room, user.seq);
    const lines = turnLines(log(room)).filter((l) => l.kind === "turn.failed" || l.kind === "message.member");
    expect(lines[0]).toMatchObject({ kind: "turn.failed", member: "alice", reason: "provider_rate_limit" });
    expect(lines[1]).toMatchObject({ kind: "message.member", member: "bob", text: "bob is here" });
    expect(state.discussion?.replies).toBe(1);
  });

  it("with the local provider, a bot answers when addressed and passes otherwise", async () => {
    const room = newRoom([
      { member_id: "lia", profile: "lia" },
      { member_id: "max", profile: "max" },
    ]);
    const user = await say(room, "@lia who are you?");
    const state = await ended(room, user.seq);
    const replies = turnLines(log(room)).filter((l) => l.kind === "message.member");
    expect(replies).toHaveLength(1);
    expect(replies[0]).toMatchObject({ member: "lia", text: expect.stringContaining("Librarian") });
    expect(state.discussion).toMatchObject({ state: "settled" });
  });

  it("members the driver cannot run are listed; a room with none runs nothing", async () => {
    const room = newRoom([ALICE, { member_id: "ghost", profile: "ghost" }]);
    provider.script(() => "(pass)");
    const user = await say(room, "anyone?");
    const state = await ended(room, user.seq);
    expect(state.discussion?.unavailable).toEqual([{ member_id: "ghost", why: "no profile ghost on this gateway" }]);
    expect(startedTurns(log(room))).toEqual(["0:alice"]);

    const empty = newRoom([
      { member_id: "ghost", profile: "ghost" },
      { member_id: "ghoul", profile: "ghoul" },
    ]);
    const lone = await say(empty, "hello?");
    await t.gateway.discussions.idle();
    expect(t.gateway.rooms.state(empty)).toMatchObject({ driver_status: "no_members", needs_you: false });
    expect(log(empty).map((e) => e.seq)).toEqual([1, lone.seq]);
  });
});

describe("control", () => {
  it("groups.stop cancels the running turn (turn.failed discussion_stopped) and ends the discussion", async () => {
    provider.script(chatty);
    provider.hold("bob");
    const room = newRoom([ALICE, BOB, CAROL]);
    const user = await say(room, "long discussion please");
    await eventually(() => expect(provider.held("bob")).toBe(1));
    expect(t.gateway.rooms.state(room)).toMatchObject({ driver_status: "running", discussion: { turn: { member_id: "bob" } } });
    const stopped = t.gateway.rooms.stopRoom(room);
    expect(stopped).toMatchObject({ room_id: room, cancelled: 1 });
    const state = await ended(room, user.seq);
    expect(state.driver_status).toBe("stopped");
    const lines = turnLines(log(room)).filter((l) => l.seq > user.seq);
    expect(lines.at(-1)).toMatchObject({ kind: "turn.failed", member: "bob", reason: "discussion_stopped" });
    expect(startedTurns(log(room))).toEqual(["0:alice", "0:bob"]);
    provider.release("bob");
    // Nothing more runs (the driver has acted on everything in the log); a new user message starts a new discussion.
    await t.gateway.discussions.idle();
    expect(startedTurns(log(room))).toHaveLength(2);
    provider.script(() => "(pass)");
    const next = await say(room, "ok, new topic");
    expect((await ended(room, next.seq)).driver_status).toBe("settled");
    expect(t.gateway.rooms.stopRoom(room).cancelled).toBe(0);
  });

  it("a fenced room stops driving: the running turn is abandoned, nothing more is appended", async () => {
    provider.script(chatty);
    provider.hold("alice");
    const room = newRoom([ALICE, BOB]);
    await say(room, "hello");
    await eventually(() => expect(provider.held("alice")).toBe(1));
    const before = log(room).length;
    t.gateway.rooms.observe(room, { gateway_id: "usurper", epoch: 7 });
    expect(t.gateway.rooms.state(room).driver_status).toBe("fenced");
    provider.release("alice");
    await t.gateway.discussions.idle();
    expect(log(room)).toHaveLength(before);
    expect(provider.callsOf("bob").filter((c) => c.messages.some((m) => m.content === "hello"))).toHaveLength(0);
  });

  it("capabilities say driver: true; gRPC State carries driver status, needs-you and the discussion", async () => {
    expect(t.gateway.rooms.capabilities().driver).toBe(true);
    provider.script((handle) => (handle === "alice" ? "@user please confirm" : "(pass)"));
    const room = newRoom([ALICE, BOB]);
    const user = await say(room, "deploy?");
    await ended(room, user.seq);
    const client = t.client(RoomServiceClient);
    const reply = await unaryCall<RoomStateReply>((cb) =>
      (
        client.state as (
          r: StateRequest,
          m: Metadata,
          o: Partial<CallOptions>,
          c: (e: ServiceError | null, r: RoomStateReply) => void,
        ) => void
      ).call(client, { room_id: room, include_disbanded: false }, authMetadata(TEST_KEY), {}, (e, r) => cb(e, r)),
    );
    expect(reply).toMatchObject({
      driver_status: "settled",
      needs_you: true,
      discussion: { state: "settled", reason: "silent_round", discussion_seq: user.seq, replies: 1, unavailable: [] },
    });
  });
});
