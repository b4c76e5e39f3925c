import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { describeEffects, localRoute, outboxRow, peerRoute, T0 } from "../../../test/support/delivery-machine-fixtures.js";
import { type OutboxEvent, OutboxMachine } from "./outbox-machine.js";
import { claim, type Receipt, settle, toReceipt } from "./receipt.js";
import type { OutboxRow } from "./rows.js";

/**
 * The sender's machine, event by event: every transition as a table row (the state before is built
 * by the events listed in `given`), plus the refusals it throws. The effects are the whole contract
 * with the shell: rows to commit, and what runs after the commit.
 */

const remote = (id: string, from = "alice") => outboxRow(id, from, peerRoute("b", "bob"));
const local = (id: string, from = "alice", to = "bob") => outboxRow(id, from, localRoute(to));
const send = (row: OutboxRow): OutboxEvent => ({ kind: "send", row, stored: undefined });
const failed = (id: string, reason: "runtime_offline" | "unknown_target" = "runtime_offline"): OutboxEvent => ({
  kind: "transport_failed",
  id,
  failure: { reason, error: `${reason} happened` },
});
/** The target's settled receipt for `row` (claimed once, settled with "ok"). */
const settledAt = (row: OutboxRow, attempts = 1): Receipt => ({ ...toReceipt(settle(claim(row, T0), "ok", T0)), attempts });

function machine(retryDelayMs = 0, maxParallelTargets = 8): OutboxMachine {
  return new OutboxMachine({ maxParallelTargets, retryDelayMs });
}

interface Row {
  name: string;
  given?: OutboxEvent[];
  retryDelayMs?: number;
  maxParallelTargets?: number;
  event: OutboxEvent;
  effects: string[];
}

const d1 = remote("d1");
const d2 = remote("d2");
const l1 = local("l1");

const TABLE: Row[] = [
  {
    name: "send remote: stored, claimed and transmitted in one step",
    event: send(d1),
    effects: ["insert_outbox d1", "save_outbox d1 claimed attempts=1", "transmit d1"],
  },
  {
    name: "send remote behind a running one to the same target: stored, waits in its lane",
    given: [send(d1)],
    event: send(d2),
    effects: ["insert_outbox d2"],
  },
  {
    name: "send remote when every slot is taken: waits",
    maxParallelTargets: 1,
    given: [send(d1)],
    event: send(outboxRow("d3", "alice", peerRoute("c", "carol"))),
    effects: ["insert_outbox d3"],
  },
  {
    name: "send local: stored and handed to the local ingress in the same step",
    event: send(l1),
    effects: ["insert_outbox l1", "admit_local l1"],
  },
  {
    name: "a repeat of an open id with the same payload: nothing new",
    given: [send(d1)],
    event: send(d1),
    effects: [],
  },
  {
    name: "a repeat of a stored id with the same payload: nothing new",
    event: { kind: "send", row: d1, stored: d1 },
    effects: [],
  },
  {
    name: "transport answered settled: the end, the notification, the lane's next",
    given: [send(d1), send(d2)],
    event: { kind: "transport_answered", id: "d1", receipt: settledAt(d1) },
    effects: [
      "save_outbox d1 settled attempts=1",
      "ended d1 settled",
      "notify d1 settled",
      "save_outbox d2 claimed attempts=1",
      "transmit d2",
    ],
  },
  {
    name: "transport answered without an end: stalled until the next start, the lane goes on",
    given: [send(d1), send(d2)],
    event: { kind: "transport_answered", id: "d1", receipt: toReceipt(claim(d1, T0)) },
    effects: ["save_outbox d2 claimed attempts=1", "transmit d2"],
  },
  {
    name: "first transport failure: the single retry at once (no delay)",
    given: [send(d1)],
    event: failed("d1"),
    effects: [
      "save_outbox d1 queued/runtime_offline attempts=1",
      "retrying d1 runtime_offline",
      "save_outbox d1 claimed/runtime_offline attempts=2",
      "transmit d1",
    ],
  },
  {
    name: "first transport failure with a retry delay: a timer, the slot kept",
    retryDelayMs: 500,
    given: [send(d1)],
    event: failed("d1"),
    effects: ["save_outbox d1 queued/runtime_offline attempts=1", "retrying d1 runtime_offline", "retry_timer d1 500ms"],
  },
  {
    name: "the retry's timer: the second attempt",
    retryDelayMs: 500,
    given: [send(d1), failed("d1")],
    event: { kind: "retry_due", id: "d1" },
    effects: ["save_outbox d1 claimed/runtime_offline attempts=2", "transmit d1"],
  },
  {
    name: "second transport failure: failed, never a third attempt",
    given: [send(d1), failed("d1")],
    event: failed("d1"),
    effects: ["save_outbox d1 failed/runtime_offline attempts=2", "ended d1 failed", "notify d1 failed"],
  },
  {
    name: "a failure no retry can fix: failed at once",
    given: [send(d1)],
    event: failed("d1", "unknown_target"),
    effects: ["save_outbox d1 failed/unknown_target attempts=1", "ended d1 failed", "notify d1 failed"],
  },
  {
    name: "a transport report for a delivery not sending: ignored",
    given: [send(d1), send(d2)],
    event: failed("d2"),
    effects: [],
  },
  {
    name: "the local target claimed it: the outbox follows",
    given: [send(l1)],
    event: { kind: "target_reported", receipt: toReceipt(claim(l1, T0)) },
    effects: ["save_outbox l1 claimed attempts=1"],
  },
  {
    name: "the local target settled it: the end and the notification",
    given: [send(l1)],
    event: { kind: "target_reported", receipt: settledAt(l1) },
    effects: ["save_outbox l1 settled attempts=1", "ended l1 settled", "notify l1 settled"],
  },
  {
    name: "the local ingress refused it: failed, final, never retried",
    given: [send(l1)],
    event: { kind: "local_refused", id: "l1", failure: { reason: "unknown_target", error: "gone" } },
    effects: ["save_outbox l1 failed/unknown_target attempts=1", "ended l1 failed", "notify l1 failed"],
  },
  {
    name: "notified: the mark (deferrable)",
    event: { kind: "notified", id: "d1" },
    effects: ["mark_notified d1"],
  },
  {
    name: "sweep: remote mail still waiting past its TTL expires; the running one does not",
    given: [send(outboxRow("e1", "alice", peerRoute("b", "bob"), T0, 1)), send(outboxRow("e2", "alice", peerRoute("b", "bob"), T0, 1))],
    event: { kind: "sweep" },
    effects: [],
  },
  {
    name: "profile deleted: its open mail ends without notifying its own Bot Chat",
    given: [send(d1), send(local("l2", "carol", "alice"))],
    event: { kind: "profile_deleted", profile: "alice" },
    effects: [
      "save_outbox d1 failed/unknown_target attempts=1",
      "ended d1 failed",
      "mark_notified d1",
      "save_outbox l2 failed/unknown_target attempts=0",
      "ended l2 failed",
      "notify l2 failed",
    ],
  },
  {
    name: "recover: remote rows are sent again, a local one without ingress row is admitted again, unnotified ends are notified",
    event: {
      kind: "recover",
      open: [
        { row: { ...d1, ...claim(d1, T0) }, ingress: undefined },
        { row: l1, ingress: undefined },
      ],
      unnotified: [{ ...d2, ...settle(claim(d2, T0), "ok", T0) }],
    },
    effects: ["admit_local l1", "notify d2 settled (recovering)", "transmit d1"],
  },
  {
    name: "recover: a local row whose ingress ended while it was down takes that end",
    event: { kind: "recover", open: [{ row: l1, ingress: settledAt(l1) }], unnotified: [] },
    effects: ["save_outbox l1 settled attempts=1", "ended l1 settled", "notify l1 settled"],
  },
  {
    name: "recover: a local row whose ingress is open waits for it",
    event: { kind: "recover", open: [{ row: l1, ingress: "open" }], unnotified: [] },
    effects: [],
  },
  {
    name: "stop: waiters are told, nothing else",
    given: [send(d1)],
    event: { kind: "stop" },
    effects: ["abandon_waiters runtime_offline"],
  },
  {
    name: "a transport failure after stop: the row stays as it is for the next start",
    given: [send(d1), { kind: "stop" }],
    event: failed("d1"),
    effects: [],
  },
];

describe("OutboxMachine: one event, its effects", () => {
  for (const row of TABLE) {
    it(row.name, () => {
      const m = machine(row.retryDelayMs, row.maxParallelTargets);
      for (const e of row.given ?? []) m.handle(e, T0);
      expect(describeEffects(m.handle(row.event, T0))).toEqual(row.effects);
    });
  }

  it("sweep after the TTL: the waiting one expires (queued_expired); the one on the wire goes on", () => {
    const m = machine();
    m.handle(send(outboxRow("e1", "alice", peerRoute("b", "bob"), T0, 1)), T0);
    m.handle(send(outboxRow("e2", "alice", peerRoute("b", "bob"), T0, 1)), T0);
    expect(describeEffects(m.handle({ kind: "sweep" }, T0 + 2000))).toEqual([
      "save_outbox e2 expired/queued_expired attempts=0",
      "ended e2 expired",
      "notify e2 expired",
    ]);
    expect(m.isOpen("e1")).toBe(true);
  });

  it("the lane's next one that expired while it waited ends instead of being sent", () => {
    const m = machine();
    m.handle(send(outboxRow("e1", "alice", peerRoute("b", "bob"), T0, 1)), T0);
    m.handle(send(outboxRow("e2", "alice", peerRoute("b", "bob"), T0, 1)), T0);
    const effects = describeEffects(
      m.handle({ kind: "transport_answered", id: "e1", receipt: settledAt(outboxRow("e1", "alice", peerRoute("b", "bob"))) }, T0 + 2000),
    );
    expect(effects).toEqual([
      "save_outbox e1 settled attempts=1",
      "ended e1 settled",
      "notify e1 settled",
      "save_outbox e2 expired/queued_expired attempts=0",
      "ended e2 expired",
      "notify e2 expired",
    ]);
  });

  it("mail to one remote target goes one at a time, in send order; other targets run beside it", () => {
    const m = machine();
    const sent = ["a1", "a2", "a3"].map((id) => remote(id));
    const other = outboxRow("c1", "alice", peerRoute("c", "carol"));
    const transmits = (effects: string[]) => effects.filter((e) => e.startsWith("transmit"));
    expect(transmits(describeEffects(m.handle(send(sent[0]!), T0)))).toEqual(["transmit a1"]);
    expect(transmits(describeEffects(m.handle(send(sent[1]!), T0)))).toEqual([]);
    expect(transmits(describeEffects(m.handle(send(sent[2]!), T0)))).toEqual([]);
    expect(transmits(describeEffects(m.handle(send(other), T0)))).toEqual(["transmit c1"]);
    for (const [i, row] of sent.entries()) {
      const next = transmits(describeEffects(m.handle({ kind: "transport_answered", id: row.delivery_id, receipt: settledAt(row) }, T0)));
      expect(next).toEqual(i < 2 ? [`transmit ${sent[i + 1]!.delivery_id}`] : []);
    }
  });

  it("a rename follows the open rows: the sender's notifications go to the renamed Bot Chat", () => {
    const m = machine();
    m.handle(send(l1), T0);
    m.handle({ kind: "profile_renamed", from: "alice", to: "ann" }, T0);
    const [, , notify] = m.handle({ kind: "target_reported", receipt: settledAt(l1) }, T0);
    expect(notify).toMatchObject({
      kind: "notify",
      row: { from_profile: "ann", from: "ann@gw1", sender_session_key: expect.stringContaining(":ann:") },
    });
  });

  it("openSentBy lists the open mail of one sender", () => {
    const m = machine();
    m.handle(send(d1), T0);
    m.handle(send(local("l9", "carol")), T0);
    expect([...m.openSentBy("alice")]).toEqual(["d1"]);
    expect(m.depth()).toBe(2);
  });
});

describe("OutboxMachine: refusals (typed, nothing changed)", () => {
  it("the same id with another payload is idempotency_conflict", () => {
    const m = machine();
    m.handle(send(d1), T0);
    const other = outboxRow("d1", "alice", peerRoute("b", "bob"), T0, 900, "something else");
    const err = (() => {
      try {
        m.handle(send(other), T0);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(HermesError);
    expect((err as HermesError).reason).toBe("idempotency_conflict");
    expect(m.depth()).toBe(1);
  });

  it("a send after stop is runtime_offline", () => {
    const m = machine();
    m.handle({ kind: "stop" }, T0);
    expect(() => m.handle(send(d1), T0)).toThrow(expect.objectContaining({ reason: "runtime_offline" }));
    expect(m.isOpen("d1")).toBe(false);
  });
});
