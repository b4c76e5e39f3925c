import { ID_RULE } from "@hermes/contract";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "./canonical-json.js";
import {
  type DiscussionDecision,
  type DiscussionLimits,
  isPass,
  MAX_DISCUSSION_REPLIES,
  MAX_DISCUSSION_ROUNDS,
  MentionResolver,
  mentionTokens,
  needsYou,
  nextDiscussionAction,
  openTurns,
  readTurns,
  STOPPED_REASON,
  summarizeDiscussion,
  type TurnPlan,
  turnEventIds,
  turnFields,
  turnIdOf,
} from "./discussion.js";
import type { EventKind, RoomEvent } from "./types.js";
import type { Member } from "./validation.js";

const ROOM = "room-1";
const A: Member = { member_id: "alice", profile: "alice", display_name: "Alice Liddell" };
const B: Member = { member_id: "bob", profile: "bob" };
const C: Member = { member_id: "carol", profile: "carol", display_name: "Carol" };
const D: Member = { member_id: "dave", profile: "dave" };

/** A room log built the way the driver writes it (ids, payloads, actors), without the hash chain the policy never reads. */
class Log {
  readonly events: RoomEvent[] = [];

  add(kind: EventKind, eventId: string, actor: Record<string, unknown>, payload: Record<string, unknown>): RoomEvent {
    const event: RoomEvent = {
      room_id: ROOM,
      seq: this.events.length + 1,
      event_id: eventId,
      kind,
      actor_json: canonicalJson(actor),
      epoch: 1,
      payload_json: canonicalJson(payload),
      created_at: "2026-01-01T00:00:00.000Z",
      hash: "",
    };
    this.events.push(event);
    return event;
  }

  created(members: Member[]): this {
    this.add("room.created", "system:room-created", { kind: "system", id: "room-control" }, { name: "Room", members });
    return this;
  }

  user(text: string, id = `u${this.events.length + 1}`, extra: Record<string, unknown> = {}): RoomEvent {
    return this.add("message.user", id, { kind: "user", id: "user" }, { text, ...extra });
  }

  started(plan: TurnPlan): void {
    this.add("turn.started", turnEventIds(plan.turn_id).started, { kind: "gateway", id: "gw" }, turnFields(plan));
  }

  replied(plan: TurnPlan, text: string): void {
    const ids = turnEventIds(plan.turn_id);
    this.add("message.member", ids.message, { kind: "member", id: plan.member_id }, { text, turn_id: plan.turn_id });
    this.add(
      "turn.settled",
      ids.settled,
      { kind: "gateway", id: "gw" },
      { ...turnFields(plan), passed: false, message_event_id: ids.message },
    );
  }

  passed(plan: TurnPlan): void {
    this.add("turn.settled", turnEventIds(plan.turn_id).settled, { kind: "gateway", id: "gw" }, { ...turnFields(plan), passed: true });
  }

  failed(plan: TurnPlan, reason: string): void {
    this.add("turn.failed", turnEventIds(plan.turn_id).failed, { kind: "gateway", id: "gw" }, { ...turnFields(plan), reason_code: reason });
  }
}

type Script = (member: string, round: number, turn: TurnPlan) => string | { fail: string };

interface Run {
  log: Log;
  turns: string[];
  end: DiscussionDecision;
}

/** Runs the policy to its end the way the driver does: decide, log the turn, log its end, repeat. */
function discuss(
  members: Member[],
  userText: string,
  script: Script,
  options: { log?: Log; limits?: Partial<DiscussionLimits> } = {},
): Run {
  const log = options.log ?? new Log().created(members);
  if (userText) log.user(userText);
  const turns: string[] = [];
  for (let i = 0; i < 100; i++) {
    const decision = nextDiscussionAction({ room_id: ROOM, members, events: log.events, limits: options.limits });
    if (decision.kind !== "turn") return { log, turns, end: decision };
    const plan = decision.turn;
    turns.push(`${plan.round_index}:${plan.member_id}`);
    log.started(plan);
    const answer = script(plan.member_id, plan.round_index, plan);
    if (typeof answer !== "string") log.failed(plan, answer.fail);
    else if (isPass(answer)) log.passed(plan);
    else log.replied(plan, answer);
  }
  throw new Error("the discussion did not end");
}

const chatty: Script = (member, round) => `${member} says something in round ${round}`;
const silent: Script = () => "(pass)";

describe("pass replies", () => {
  it("are empty or exactly (pass) / pass / pass., any case, trimmed", () => {
    for (const text of ["", "   ", "(pass)", "(PASS)", "pass", "Pass", "pass.", "  PASS.  ", "\n(pass)\n"]) expect(isPass(text)).toBe(true);
    for (const text of ["passed", "pass!", "(pass) but also", "I pass", "pass..", "no"]) expect(isPass(text)).toBe(false);
  });
});

describe("mentions", () => {
  const resolver = new MentionResolver([A, B, C]);

  it("tokenise @handles without trailing punctuation, lower-cased", () => {
    expect(mentionTokens("Hi @Bob. And @carol: and @alice-, mail a@b.c")).toEqual(["bob", "carol", "alice", "b.c"]);
  });

  it("name members by id, profile or display-name slug; @all/@everyone everybody; @user the human", () => {
    expect([...resolver.resolve("@bob and @ALICE").members].sort()).toEqual(["alice", "bob"]);
    expect([...resolver.resolve("@alice-liddell").members]).toEqual(["alice"]);
    expect([...resolver.resolve("@aliceliddell").members]).toEqual(["alice"]);
    expect(resolver.resolve("@all hi")).toMatchObject({ all: true, user: false });
    expect(resolver.resolve("@everyone hi").all).toBe(true);
    expect(resolver.resolve("@user what now?")).toMatchObject({ user: true, all: false, members: new Set() });
    expect(resolver.resolve("@nobody here").members.size).toBe(0);
  });

  it("exact ids beat aliases; an alias two members share names nobody", () => {
    const twins = new MentionResolver([
      { member_id: "sam", profile: "sam-a", display_name: "Sam" },
      { member_id: "sam-b", profile: "sam-b", display_name: "Sam" },
    ]);
    expect([...twins.resolve("@sam").members]).toEqual(["sam"]);
    const clash = new MentionResolver([
      { member_id: "x1", profile: "p1", display_name: "Pat" },
      { member_id: "x2", profile: "p2", display_name: "Pat" },
    ]);
    expect(clash.resolve("@pat").members.size).toBe(0);
    expect([...clash.resolve("@p2").members]).toEqual(["x2"]);
  });

  it("a member whose id is `user` is a member, not the human", () => {
    const r = new MentionResolver([{ member_id: "user", profile: "u" }, B]);
    expect(r.resolve("@user").user).toBe(false);
    expect([...r.resolve("@user").members]).toEqual(["user"]);
  });
});

describe("rounds", () => {
  it("with nobody mentioned, everybody answers, in rounds rotated by one, for three rounds", () => {
    const run = discuss([A, B, C], "what do you all think?", chatty);
    expect(run.turns).toEqual(["0:alice", "0:bob", "0:carol", "1:bob", "1:carol", "1:alice", "2:carol", "2:alice", "2:bob"]);
    expect(run.end).toEqual({ kind: "bounded", reason: "max_rounds", replies: 9 });
  });

  it("stops at 10 member replies per user message", () => {
    const run = discuss([A, B, C, D], "go", chatty);
    expect(run.turns).toHaveLength(10);
    expect(run.turns.slice(8)).toEqual(["2:carol", "2:dave"]);
    expect(run.end).toEqual({ kind: "bounded", reason: "max_replies", replies: 10 });
    expect(run.log.events.filter((e) => e.kind === "message.member")).toHaveLength(10);
  });

  it("limits are parameters", () => {
    expect(discuss([A, B], "go", chatty, { limits: { max_rounds: 1 } }).end).toMatchObject({ kind: "bounded", reason: "max_rounds" });
    expect(discuss([A, B, C], "go", chatty, { limits: { max_replies: 4 } }).turns).toHaveLength(4);
  });

  it("settles when a full round is silent", () => {
    const run = discuss([A, B, C], "anyone?", silent);
    expect(run.turns).toEqual(["0:alice", "0:bob", "0:carol"]);
    expect(run.end).toEqual({ kind: "settled", reason: "silent_round", round_index: 0, replies: 0 });
    expect(run.log.events.filter((e) => e.kind === "message.member")).toHaveLength(0);
  });

  it("settles in a later round once it goes quiet", () => {
    const run = discuss([A, B, C], "go", (m, round) => (round === 0 && m === "bob" ? "one thought" : "pass"));
    // Round 1 (bob, carol, alice): bob has nothing new, carol saw bob's reply in round 0, alice has it unseen.
    expect(run.turns).toEqual(["0:alice", "0:bob", "0:carol", "1:alice"]);
    expect(run.end).toMatchObject({ kind: "settled", reason: "silent_round", round_index: 1, replies: 1 });
  });

  it("a member runs only with something unseen", () => {
    // alice replies, bob (who saw it) passes; in round 1 neither has anything new: silent, settled.
    const run = discuss([A, B], "hello", (m) => (m === "alice" ? "hi there" : "(pass)"));
    expect(run.turns).toEqual(["0:alice", "0:bob"]);
    expect(run.end).toMatchObject({ kind: "settled", round_index: 1 });
  });

  it("failed turns are not replies and do not stop the discussion", () => {
    const run = discuss([A, B], "hello", (m, round) =>
      m === "alice" && round === 0 ? { fail: "provider_rate_limit" } : round === 0 ? "bob here" : "pass",
    );
    expect(run.turns).toEqual(["0:alice", "0:bob", "1:alice"]);
    expect(run.end).toMatchObject({ kind: "settled", replies: 1 });
    const turns = readTurns(run.log.events);
    expect(turns[0]).toMatchObject({ member_id: "alice", state: "failed", reason_code: "provider_rate_limit" });
  });
});

describe("mentions scope the round", () => {
  it("only the mentioned members answer the user message", () => {
    const run = discuss([A, B, C], "@bob what do you think?", (m) => `${m}: no idea`);
    // bob answers; in round 1 only bob is a responder and he has nothing new: silent.
    expect(run.turns).toEqual(["0:bob"]);
    expect(run.end).toMatchObject({ kind: "settled", round_index: 1, replies: 1 });
  });

  it("mentions accumulate across rounds", () => {
    const run = discuss([A, B, C], "@bob thoughts?", (m, round) => {
      if (m === "bob" && round === 0) return "I think @carol knows this best";
      if (m === "carol" && round === 1) return "Yes: it is 42";
      return "pass";
    });
    // Round 1 responders are {bob, carol} rotated: carol first, then bob (who has carol's reply
    // unseen). In round 2 neither has anything new (bob passed after carol): silent.
    expect(run.turns).toEqual(["0:bob", "1:carol", "1:bob"]);
    expect(run.turns.some((t) => t.endsWith("alice"))).toBe(false);
    expect(run.end).toMatchObject({ kind: "settled", round_index: 2, replies: 2 });
  });

  it("@all in the user message addresses everybody; @everyone in a reply opens the next round to everybody", () => {
    expect(discuss([A, B, C], "@all hi", silent).turns).toEqual(["0:alice", "0:bob", "0:carol"]);
    const run = discuss([A, B, C], "@bob hi", (m, round) => (m === "bob" && round === 0 ? "@everyone please weigh in" : "pass"));
    expect(run.turns).toEqual(["0:bob", "1:carol", "1:alice"]);
  });

  it("mentions of unknown names or of the human address nobody in particular", () => {
    expect(discuss([A, B], "@zed @user hello", silent).turns).toEqual(["0:alice", "0:bob"]);
  });

  it("members the driver cannot run are skipped; none at all is no_members", () => {
    const log = new Log().created([A, B, C]);
    log.user("hi");
    const decision = nextDiscussionAction({ room_id: ROOM, members: [A, B, C], events: log.events, available: new Set(["bob"]) });
    expect(decision).toMatchObject({ kind: "turn", turn: { member_id: "bob" } });
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events, available: new Set() })).toEqual({
      kind: "no_members",
    });
  });
});

describe("needs-you", () => {
  it("is raised by a member's @user and cleared by the next user message", () => {
    const run = discuss([A, B], "plan the trip", (m, round) => (m === "bob" && round === 0 ? "@user which dates work for you?" : "pass"));
    expect(needsYou([A, B], run.log.events)).toBe(true);
    expect(summarizeDiscussion({ room_id: ROOM, members: [A, B], events: run.log.events }).needs_you).toBe(true);
    run.log.user("May 3rd");
    expect(needsYou([A, B], run.log.events)).toBe(false);
  });

  it("is not raised by the user's own @user, nor by a member mentioning another member", () => {
    const run = discuss([A, B], "@user note to self", (m) => (m === "alice" ? "@bob over to you" : "pass"));
    expect(needsYou([A, B], run.log.events)).toBe(false);
  });
});

describe("the log is the state", () => {
  it("an open turn (started, never ended) is reported and waited on, never planned again", () => {
    const log = new Log().created([A, B]);
    log.user("hello");
    const first = nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events });
    if (first.kind !== "turn") throw new Error("expected a turn");
    log.started(first.turn);
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events })).toMatchObject({
      kind: "waiting",
      turn: { turn_id: first.turn.turn_id },
    });
    expect(openTurns(log.events).map((t) => t.turn_id)).toEqual([first.turn.turn_id]);
    // Marked failed (what a restarted driver does): the discussion goes on with the next member.
    log.failed(first.turn, "runtime_offline");
    expect(openTurns(log.events)).toEqual([]);
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events })).toMatchObject({
      kind: "turn",
      turn: { member_id: "bob", round_index: 0 },
    });
  });

  it("the same log gives the same decision, with the same deterministic turn id", () => {
    const log = new Log().created([A, B, C]);
    log.user("hi", "client-key-1");
    const a = nextDiscussionAction({ room_id: ROOM, members: [A, B, C], events: log.events });
    const b = nextDiscussionAction({ room_id: ROOM, members: [A, B, C], events: [...log.events] });
    expect(a).toEqual(b);
    if (a.kind !== "turn") throw new Error("expected a turn");
    expect(a.turn.turn_id).toMatch(/^d2\.r0\.p0\.s2\.m[0-9a-f]{24}$/);
    expect(a.turn.turn_id).toBe(turnIdOf(ROOM, a.turn));
    expect(turnIdOf("other-room", a.turn)).not.toBe(a.turn.turn_id);
    const idRule = new RegExp(ID_RULE);
    for (const id of Object.values(turnEventIds(a.turn.turn_id))) {
      expect(id).toMatch(idRule);
      expect(id.length).toBeLessThanOrEqual(128);
    }
    // Even with very long seqs the ids stay within the id rule.
    const big = turnIdOf(ROOM, {
      ...a.turn,
      discussion_seq: 9_007_199_254_740_991,
      seen_through_seq: 9_007_199_254_740_991,
      round_index: 2,
      member_index: 5,
    });
    expect(turnEventIds(big).started.length).toBeLessThanOrEqual(128);
  });

  it("carries the user message's thread to the turns", () => {
    const log = new Log().created([A, B]);
    log.user("in a thread", "t1", { thread_id: "th-9" });
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events })).toMatchObject({ turn: { thread_id: "th-9" } });
  });

  it("a new user message starts a new discussion; the old one's late reply is unseen news, not a reply", () => {
    const log = new Log().created([A, B]);
    log.user("first question");
    const d1 = nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events });
    if (d1.kind !== "turn") throw new Error("expected a turn");
    log.started(d1.turn);
    log.user("second question");
    // The old turn belongs to the old discussion: the new one starts at once.
    const d2 = nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events });
    expect(d2).toMatchObject({ kind: "turn", turn: { member_id: "alice", discussion_seq: 4, round_index: 0 }, replies: 0 });
    log.replied(d1.turn, "answer to the first");
    const run = discuss([A, B], "", silent, { log });
    expect(run.turns).toEqual(["0:alice", "0:bob"]);
    expect(run.end).toMatchObject({ kind: "settled", replies: 0 });
  });

  it("a stopped discussion stays stopped", () => {
    const log = new Log().created([A, B]);
    log.user("hello");
    const d = nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events });
    if (d.kind !== "turn") throw new Error("expected a turn");
    log.started(d.turn);
    log.failed(d.turn, STOPPED_REASON);
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events })).toEqual({ kind: "stopped", replies: 0 });
    expect(summarizeDiscussion({ room_id: ROOM, members: [A, B], events: log.events }).state).toBe("stopped");
  });

  it("no user message: idle; foreign or malformed turn events are ignored, never a crash", () => {
    const log = new Log().created([A, B]);
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events })).toEqual({ kind: "idle" });
    log.user("hi");
    log.add("turn.started", "x1", { kind: "gateway", id: "gw" }, { turn_id: 5 });
    log.add("turn.settled", "x2", { kind: "gateway", id: "gw" }, {});
    log.add("message.member", "x3", { kind: "member", id: "alice" }, { text: "stray" });
    expect(readTurns(log.events)).toEqual([]);
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events })).toMatchObject({ kind: "turn" });
  });

  it("events before the newest user message do not matter", () => {
    const log = new Log().created([A, B]);
    discuss([A, B], "one", chatty, { log });
    const tail = discuss([A, B], "two", chatty, { log });
    const start = log.events.findIndex((e) => e.kind === "message.user" && JSON.parse(e.payload_json).text === "two");
    expect(nextDiscussionAction({ room_id: ROOM, members: [A, B], events: log.events.slice(start) })).toEqual(tail.end);
  });
});

describe("status", () => {
  it("summarises each state", () => {
    const members = [A, B];
    const log = new Log().created(members);
    expect(summarizeDiscussion({ room_id: ROOM, members, events: log.events })).toMatchObject({ state: "idle", needs_you: false });
    log.user("hi");
    expect(summarizeDiscussion({ room_id: ROOM, members, events: log.events })).toMatchObject({
      state: "running",
      discussion_seq: 2,
      turn: { member_id: "alice", round_index: 0 },
    });
    const run = discuss(members, "", chatty, { log });
    // Two members alternate: alice, bob; then whoever has the other's reply unseen (alice, then bob).
    expect(run.turns).toEqual(["0:alice", "0:bob", "1:alice", "2:bob"]);
    expect(summarizeDiscussion({ room_id: ROOM, members, events: run.log.events })).toMatchObject({
      state: "bounded",
      reason: "max_rounds",
      replies: 4,
    });
    expect(summarizeDiscussion({ room_id: ROOM, members, events: log.events, available: new Set() }).state).toBe("no_members");
  });
});

describe("properties (random rooms, mentions and replies)", () => {
  const NAMES = ["ann", "ben", "cy", "dot", "eve", "fay"];
  const word = fc.constantFrom("@ann", "@ben", "@cy", "@dot", "@eve", "@fay", "@all", "@user", "@nobody", "hello", "ok");
  const text = fc.array(word, { maxLength: 3 }).map((w) => w.join(" "));
  const reply = fc.oneof(text, fc.constant("(pass)"), fc.constant("PASS"), fc.constant(""), fc.constant({ fail: "provider_server_error" }));

  it("every discussion ends within the caps, deterministically, by the rules", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 6 }), text, fc.array(reply, { minLength: 1, maxLength: 40 }), (n, userText, replies) => {
        const members = NAMES.slice(0, n).map((name) => ({ member_id: name, profile: name }));
        let i = 0;
        const run = discuss(members, userText || "hi", () => replies[i++ % replies.length]!);
        const turns = readTurns(run.log.events);
        const spoken = turns.filter((t) => t.state === "replied");
        expect(spoken.length).toBeLessThanOrEqual(MAX_DISCUSSION_REPLIES);
        expect(turns.every((t) => t.round_index < MAX_DISCUSSION_ROUNDS)).toBe(true);
        // Nobody runs twice in a round.
        const keys = turns.map((t) => `${t.round_index}:${t.member_id}`);
        expect(new Set(keys).size).toBe(keys.length);
        // Every turn had something unseen: a message by someone else after its previous turn's view.
        const seen = new Map<string, number>();
        for (const t of turns) {
          const before = seen.get(t.member_id) ?? 1;
          const news = run.log.events.some(
            (e) =>
              (e.kind === "message.user" || e.kind === "message.member") &&
              e.seq > before &&
              e.seq <= t.seen_through_seq &&
              JSON.parse(e.actor_json).id !== t.member_id,
          );
          expect(news).toBe(true);
          seen.set(t.member_id, t.seen_through_seq);
        }
        // Round 0 answers the mentioned members (or everybody), in member order.
        const first = new MentionResolver(members).resolve(userText || "hi");
        const round0 = turns.filter((t) => t.round_index === 0).map((t) => t.member_id);
        const expected = members.map((m) => m.member_id).filter((id) => first.all || first.members.size === 0 || first.members.has(id));
        expect(round0).toEqual(expected.slice(0, round0.length));
        // How it ended matches the log.
        const end = run.end;
        if (end.kind === "settled") {
          expect(turns.filter((t) => t.round_index === end.round_index && t.state === "replied")).toHaveLength(0);
        } else if (end.kind === "bounded" && end.reason === "max_replies") {
          expect(spoken).toHaveLength(MAX_DISCUSSION_REPLIES);
        } else expect(end).toMatchObject({ kind: "bounded", reason: "max_rounds" });
        // Deterministic: replaying every prefix of the log decides what was done.
        for (const t of turns) {
          const prefix = run.log.events.filter((e) => e.seq < t.started_seq!);
          const again = nextDiscussionAction({ room_id: ROOM, members, events: prefix });
          expect(again).toMatchObject({ kind: "turn", turn: { turn_id: t.turn_id } });
        }
      }),
      { numRuns: Number(process.env.DISCUSSION_PROPERTY_RUNS ?? 300) },
    );
  });
});
