import { describe, expect, it } from "vitest";
import { describeEffects, ingressRow, T0 } from "../../../test/support/delivery-machine-fixtures.js";
import { type IngressEvent, IngressMachine, type TurnFailure } from "./ingress-machine.js";
import { claim, settle } from "./receipt.js";
import type { IngressRow } from "./rows.js";

/**
 * The target's machine, event by event: every transition as a table row (the state before is built
 * by the events in `given`), then the orderings a table cannot show, and the refusals.
 */

const admit = (row: IngressRow, stored?: IngressRow): IngressEvent => ({ kind: "admit", row, stored });
const opened = (id: string, session = "s-bob"): IngressEvent => ({ kind: "session_opened", id, session_id: session });
const reply = (id: string, text = "ok"): IngressEvent => ({ kind: "turn_ended", id, result: { kind: "reply", reply: text } });
const failure = (over: Partial<TurnFailure> = {}): TurnFailure => ({
  reason: "provider_server_error",
  error: "500 from the provider",
  cancelled: false,
  timed_out: false,
  effects: 0,
  ...over,
});
const turnFailed = (id: string, over: Partial<TurnFailure> = {}): IngressEvent => ({
  kind: "turn_ended",
  id,
  result: { kind: "failed", failure: failure(over) },
});

function machine(retryDelayMs = 0, maxParallelTargets = 8): IngressMachine {
  return new IngressMachine({ maxParallelTargets, retryDelayMs, turnTimeoutMs: 30_000 });
}

const d1 = ingressRow("d1", "alice", "bob");
const d2 = ingressRow("d2", "carol", "bob");
const c1 = ingressRow("c1", "alice", "carol");
const BOB = "agent:bob:bot:dm:bot-chat";

interface Row {
  name: string;
  given?: IngressEvent[];
  retryDelayMs?: number;
  maxParallelTargets?: number;
  event: IngressEvent;
  effects: string[];
}

const TABLE: Row[] = [
  { name: "admit: stored, and its Bot Chat's lane asked for", event: admit(d1), effects: ["insert_ingress d1", `open_session d1 ${BOB}`] },
  {
    name: "admit behind a delivery to the same bot: stored, waits its turn",
    given: [admit(d1)],
    event: admit(d2),
    effects: ["insert_ingress d2"],
  },
  {
    name: "admit when every slot is taken: stored, waits",
    maxParallelTargets: 1,
    given: [admit(d1)],
    event: admit(c1),
    effects: ["insert_ingress c1"],
  },
  { name: "a repeat of an open id with the same payload: waits for its end", given: [admit(d1)], event: admit(d1), effects: [] },
  {
    name: "a repeat of an ended id: answered with the stored receipt",
    event: admit(d1, { ...d1, ...settle(claim(d1, T0), "ok", T0) }),
    effects: ["answer d1 settled"],
  },
  {
    name: "lane granted: claimed, the sender told, the turn run",
    given: [admit(d1)],
    event: opened("d1"),
    effects: ["save_ingress d1 claimed attempts=1", "progress d1 claimed", "run_turn d1 in s-bob attempt=1"],
  },
  {
    name: "a lane granted for a delivery not asking for one: released",
    event: opened("zz"),
    effects: ["release_session zz"],
  },
  {
    name: "lane refused (the profile is stopping): stays queued, its bot parked until the sweep",
    given: [admit(d1)],
    event: { kind: "session_refused", id: "d1" },
    effects: [],
  },
  {
    name: "the turn's reply: settled, the session touched, released, the next one for the bot asked for",
    given: [admit(d1), admit(d2), opened("d1")],
    event: reply("d1"),
    effects: [
      "save_ingress d1 settled attempts=1",
      "touch_session s-bob",
      "ended d1 settled",
      "release_session d1",
      `open_session d2 ${BOB}`,
    ],
  },
  {
    name: "a retryable failure: queued again, released, the single retry asks for the same lane",
    given: [admit(d1), opened("d1")],
    event: turnFailed("d1"),
    effects: [
      "save_ingress d1 queued/provider_server_error attempts=1",
      "release_session d1",
      "retrying d1 provider_server_error",
      `open_session d1 ${BOB}`,
    ],
  },
  {
    name: "a retryable failure with a retry delay: a timer, the slot kept",
    retryDelayMs: 250,
    given: [admit(d1), opened("d1")],
    event: turnFailed("d1"),
    effects: [
      "save_ingress d1 queued/provider_server_error attempts=1",
      "release_session d1",
      "retrying d1 provider_server_error",
      "retry_timer d1 250ms",
    ],
  },
  {
    name: "the retry's timer: the same lane asked for again",
    retryDelayMs: 250,
    given: [admit(d1), opened("d1"), turnFailed("d1")],
    event: { kind: "retry_due", id: "d1" },
    effects: [`open_session d1 ${BOB}`],
  },
  {
    name: "context_overflow: the retry compacts first",
    given: [admit(d1), opened("d1"), turnFailed("d1", { reason: "context_overflow" })],
    event: opened("d1"),
    effects: ["save_ingress d1 claimed/context_overflow attempts=2", "progress d1 claimed", "run_turn d1 in s-bob attempt=2 compact"],
  },
  {
    name: "the second failure: failed, never a third attempt",
    given: [admit(d1), opened("d1"), turnFailed("d1"), opened("d1")],
    event: turnFailed("d1"),
    effects: ["save_ingress d1 failed/provider_server_error attempts=2", "ended d1 failed", "release_session d1"],
  },
  {
    name: "a failure no retry can fix: failed at once",
    given: [admit(d1), opened("d1")],
    event: turnFailed("d1", { reason: "provider_auth_or_access" }),
    effects: ["save_ingress d1 failed/provider_auth_or_access attempts=1", "ended d1 failed", "release_session d1"],
  },
  {
    name: "a failed turn that already sent messages: failed, not retried (a rerun would repeat them)",
    given: [admit(d1), opened("d1")],
    event: turnFailed("d1", { effects: 2 }),
    effects: ["save_ingress d1 failed/provider_server_error attempts=1", "ended d1 failed", "release_session d1"],
  },
  {
    name: "the turn timed out: delivery_timeout, retried once",
    given: [admit(d1), opened("d1")],
    event: turnFailed("d1", { reason: "runtime_offline", cancelled: true, timed_out: true }),
    effects: [
      "save_ingress d1 queued/delivery_timeout attempts=1",
      "release_session d1",
      "retrying d1 delivery_timeout",
      `open_session d1 ${BOB}`,
    ],
  },
  {
    name: "the turn was cancelled: ambiguous, never replayed",
    given: [admit(d1), opened("d1")],
    event: turnFailed("d1", { reason: "runtime_offline", cancelled: true }),
    effects: ["save_ingress d1 ambiguous/unknown attempts=1", "ended d1 ambiguous", "release_session d1"],
  },
  {
    name: "the turn ended after a stop: ambiguous",
    given: [admit(d1), opened("d1"), { kind: "stop" }],
    event: turnFailed("d1"),
    effects: ["save_ingress d1 ambiguous/unknown attempts=1", "ended d1 ambiguous", "release_session d1"],
  },
  {
    name: "a lane granted after a stop: released, the row stays queued for the next start",
    given: [admit(d1), { kind: "stop" }],
    event: opened("d1"),
    effects: ["release_session d1"],
  },
  {
    name: "profile deleted mid-turn: the turn aborted, ended unknown_target; mail it sent ends too",
    given: [admit(d1), opened("d1"), admit(c1)],
    event: { kind: "profile_deleted", profile: "bob", sent_by_it: new Set(["c1"]) },
    effects: [
      "abort_turn d1 profile_deleted",
      "save_ingress d1 failed/unknown_target attempts=1",
      "ended d1 failed",
      "save_ingress c1 failed/unknown_target attempts=0",
      "ended c1 failed",
    ],
  },
  {
    name: "the aborted turn winds down: its session released, its reply dropped",
    given: [admit(d1), opened("d1"), { kind: "profile_deleted", profile: "bob", sent_by_it: new Set() }],
    event: reply("d1"),
    effects: ["release_session d1"],
  },
  {
    name: "recover: a claimed row is ambiguous (never replayed); queued ones queue again in order",
    event: { kind: "recover", rows: [{ ...d1, ...claim(d1, T0) }, d2, c1] },
    effects: [
      "save_ingress d1 ambiguous/unknown attempts=1",
      "ended d1 ambiguous (restart)",
      `open_session d2 ${BOB}`,
      "open_session c1 agent:carol:bot:dm:bot-chat",
    ],
  },
  { name: "stop: waiters are told", given: [admit(d1)], event: { kind: "stop" }, effects: ["abandon_waiters runtime_offline"] },
];

describe("IngressMachine: one event, its effects", () => {
  for (const row of TABLE) {
    it(row.name, () => {
      const m = machine(row.retryDelayMs, row.maxParallelTargets);
      for (const e of row.given ?? []) m.handle(e, T0);
      expect(describeEffects(m.handle(row.event, T0))).toEqual(row.effects);
    });
  }

  it("sweep past the TTL: waiting and opening mail expires (queued_expired), a running turn does not", () => {
    const m = machine();
    const short = (id: string, target: string) => ingressRow(id, "alice", target, T0, 1);
    m.handle(admit(short("r1", "bob")), T0);
    m.handle(opened("r1"), T0);
    m.handle(admit(short("w1", "bob")), T0);
    m.handle(admit(short("o1", "carol")), T0);
    expect(describeEffects(m.handle({ kind: "sweep" }, T0 + 2000))).toEqual([
      "save_ingress w1 expired/queued_expired attempts=0",
      "ended w1 expired",
      "save_ingress o1 expired/queued_expired attempts=0",
      "ended o1 expired",
    ]);
    expect(m.isOpen("r1")).toBe(true);
  });

  it("a lane granted after the TTL passed: expired, never run", () => {
    const m = machine();
    m.handle(admit(ingressRow("x1", "alice", "bob", T0, 1)), T0);
    expect(describeEffects(m.handle(opened("x1"), T0 + 2000))).toEqual([
      "save_ingress x1 expired/queued_expired attempts=0",
      "ended x1 expired",
    ]);
  });

  it("a parked bot (lane refused) is asked again only after the sweep", () => {
    const m = machine();
    m.handle(admit(d1), T0);
    m.handle({ kind: "session_refused", id: "d1" }, T0);
    expect(describeEffects(m.handle(admit(d2), T0))).toEqual(["insert_ingress d2"]);
    expect(describeEffects(m.handle({ kind: "sweep" }, T0))).toEqual([`open_session d1 ${BOB}`]);
  });

  it("mail to one bot runs one turn at a time, in admission order; other bots run beside it, up to the cap", () => {
    const m = machine(0, 2);
    const opens = (effects: string[]) => effects.filter((e) => e.startsWith("open_session")).map((e) => e.split(" ")[1]);
    const rows = [ingressRow("b1", "a", "bob"), ingressRow("b2", "a", "bob"), ingressRow("c1", "a", "carol"), ingressRow("e1", "a", "eve")];
    expect(rows.flatMap((r) => opens(describeEffects(m.handle(admit(r), T0))))).toEqual(["b1", "c1"]);
    expect(m.stats).toEqual({ running: 2, maxRunning: 2 });
    m.handle(opened("b1"), T0);
    // b1 ends: the oldest waiting lane head (b2, admitted before e1) gets the slot.
    expect(opens(describeEffects(m.handle(reply("b1"), T0)))).toEqual(["b2"]);
    m.handle(opened("c1", "s-carol"), T0);
    expect(opens(describeEffects(m.handle(reply("c1"), T0)))).toEqual(["e1"]);
  });

  it("a rename keeps the mail's place, in the lane and Bot Chat of the new name", () => {
    const m = machine();
    m.handle(admit(d1), T0);
    m.handle(admit(d2), T0);
    m.handle({ kind: "profile_renamed", from: "bob", to: "rob" }, T0);
    m.handle(opened("d1"), T0);
    expect(describeEffects(m.handle(reply("d1"), T0)).at(-1)).toBe("open_session d2 agent:rob:bot:dm:bot-chat");
  });
});

describe("IngressMachine: refusals (typed, nothing changed)", () => {
  it("the same id with another payload is idempotency_conflict", () => {
    const m = machine();
    m.handle(admit(d1), T0);
    const other = ingressRow("d1", "alice", "bob", T0, 900, "another text");
    expect(() => m.handle(admit(other), T0)).toThrow(expect.objectContaining({ reason: "idempotency_conflict" }));
    expect(m.depth()).toBe(1);
  });

  it("mail after stop is runtime_offline", () => {
    const m = machine();
    m.handle({ kind: "stop" }, T0);
    expect(() => m.handle(admit(d1), T0)).toThrow(expect.objectContaining({ reason: "runtime_offline" }));
    expect(m.isOpen("d1")).toBe(false);
  });
});
