import { describe, expect, it } from "vitest";
import { type AppendRequest, clientSendRequest, planAppend, planAppendBatch, sendResult } from "./append.js";
import { observeEpoch } from "./authority.js";
import { eventHash, verifyChain } from "./hash-chain.js";
import { MAX_BATCH_APPENDS } from "./limits.js";
import { encodeTuples } from "./log-segment.js";
import { refusalError } from "./refusal.js";
import { newReplicaState, planCreateRoom } from "./room-state.js";
import type { RoomEvent, RoomState } from "./types.js";

const NOW = "2025-01-01T00:00:00.000Z";
const USER = { kind: "user" as const, id: "u1" };

function room(): { state: RoomState; events: RoomEvent[] } {
  const created = planCreateRoom({
    room_id: "r1",
    name: "Room",
    members: [
      { member_id: "ann", profile: "ann" },
      { member_id: "bob", profile: "bob" },
    ],
    self_gateway_id: "A",
    now: NOW,
    retired: false,
    exists: false,
  });
  if (!created.ok) throw new Error(created.refusal.message);
  return { state: created.state, events: [created.event] };
}

const send = (event_id: string, text = `text of ${event_id}`, extra: Partial<AppendRequest> = {}): AppendRequest => ({
  origin: "client",
  event_id,
  kind: "message.user",
  actor: USER,
  payload: { text },
  ...extra,
});

describe("planAppend", () => {
  it("appends at last_seq + 1 in the authority's epoch, chained to the last hash", () => {
    const { state, events } = room();
    const plan = planAppend(state, send("m1"), null, NOW);
    expect(plan.outcome.kind).toBe("appended");
    expect(plan.appended).toHaveLength(1);
    const event = plan.appended[0]!;
    expect(event).toMatchObject({ room_id: "r1", seq: 2, epoch: 1, kind: "message.user", event_id: "m1", created_at: NOW });
    expect(event.payload_json).toBe('{"text":"text of m1"}');
    expect(event.actor_json).toBe('{"id":"u1","kind":"user"}');
    expect(verifyChain([...events, event], 0, "")).toEqual({ ok: true, last_hash: event.hash });
    expect(plan.state).toMatchObject({ last_seq: 2, latest_seq: 2, last_hash: event.hash });
    expect(sendResult({ kind: "appended", event })).toEqual({ event, accepted: true, idempotent: false });
  });

  it("answers a retry with the stored event, and a reused id with different content with a conflict", () => {
    const { state } = room();
    const first = planAppend(state, send("m1", "hello"), null, NOW);
    const stored = first.appended[0]!;
    const retry = planAppend(first.state, send("m1", "hello"), stored, NOW);
    expect(retry.outcome).toEqual({ kind: "idempotent", event: stored });
    expect(retry.appended).toEqual([]);
    expect(retry.state).toBe(first.state);
    const other = planAppend(first.state, send("m1", "different"), stored, NOW);
    expect(other.outcome).toMatchObject({ kind: "refused", refusal: { reason: "idempotency_conflict", data: { event_id: "m1", seq: 2 } } });
    const otherUser = planAppend(first.state, { ...send("m1", "hello"), actor: { kind: "user", id: "u2" } }, stored, NOW);
    expect(otherUser.outcome).toMatchObject({ kind: "refused", refusal: { reason: "idempotency_conflict" } });
  });

  it("checks expected_latest_seq", () => {
    const { state } = room();
    expect(planAppend(state, send("m1", "x", { expected_latest_seq: 1 }), null, NOW).outcome.kind).toBe("appended");
    const stale = planAppend(state, send("m1", "x", { expected_latest_seq: 0 }), null, NOW);
    expect(stale.outcome).toMatchObject({
      kind: "refused",
      refusal: { reason: "cursor_conflict", data: { expected_latest_seq: 0, latest_seq: 1 } },
    });
    expect(planAppend(state, send("m1", "x", { expected_latest_seq: -2 }), null, NOW).outcome).toMatchObject({
      refusal: { reason: "invalid_params" },
    });
  });

  it("lets clients append only message.user, and never the kinds of create/promote/demote", () => {
    const { state } = room();
    const asClient = planAppend(
      state,
      { ...send("x"), kind: "room.renamed", actor: { kind: "system", id: "s" }, payload: { name: "n" } },
      null,
      NOW,
    );
    expect(asClient.outcome).toMatchObject({ refusal: { reason: "invalid_params", data: { field: "kind" } } });
    const asServer = planAppend(
      state,
      { origin: "server", event_id: "c", kind: "authority.claimed", actor: { kind: "system", id: "s" }, payload: {} },
      null,
      NOW,
    );
    expect(asServer.outcome).toMatchObject({ refusal: { reason: "invalid_params" } });
    const unknown = planAppend(state, { ...send("x"), kind: "message.secret" }, null, NOW);
    expect(unknown.outcome).toMatchObject({ refusal: { reason: "invalid_params" } });
    const renamed = planAppend(
      state,
      {
        origin: "server",
        event_id: "rename-1",
        kind: "room.renamed",
        actor: { kind: "system", id: "room-control" },
        payload: { name: "New" },
      },
      null,
      NOW,
    );
    expect(renamed.outcome.kind).toBe("appended");
  });

  it("keeps the server's id prefixes for the server: clients never, reposts only their derived repost: ids", () => {
    const { state } = room();
    for (const id of ["system:room-disbanded", "turn:t1:started", `repost:${"0".repeat(40)}`]) {
      expect(planAppend(state, send(id), null, NOW).outcome, id).toMatchObject({
        kind: "refused",
        refusal: { reason: "invalid_params", data: { field: "event_id", reserved_prefix: id.slice(0, id.indexOf(":") + 1) } },
      });
    }
    const repost = (event_id: string) => planAppend(state, { ...send(event_id), origin: "repost" }, null, NOW).outcome;
    expect(repost(`repost:${"ab".repeat(20)}`).kind).toBe("appended");
    expect(repost("system:room-disbanded")).toMatchObject({ refusal: { reason: "invalid_params" } });
    expect(repost("m1")).toMatchObject({ refusal: { reason: "invalid_params" } });
    expect(
      planAppend(state, { ...send(`repost:${"ab".repeat(20)}`), origin: "repost", kind: "room.renamed" }, null, NOW).outcome,
    ).toMatchObject({
      refusal: { reason: "invalid_params", data: { field: "kind" } },
    });
  });

  it("requires a gateway actor to be the authority itself", () => {
    const { state } = room();
    const turn = (id: string): AppendRequest => ({
      origin: "server",
      event_id: `t-${id}`,
      kind: "turn.started",
      actor: { kind: "gateway", id },
      payload: {},
    });
    expect(planAppend(state, turn("A"), null, NOW).outcome.kind).toBe("appended");
    expect(planAppend(state, turn("B"), null, NOW).outcome).toMatchObject({
      refusal: { reason: "invalid_params", data: { field: "actor" } },
    });
  });

  it("refuses on a replica with not_authority and the authority to redirect to", () => {
    const replica = { ...newReplicaState("r1", "B", "A"), authority: { gateway_id: "A", epoch: 3 } };
    expect(planAppend(replica, send("m1"), null, NOW).outcome).toMatchObject({
      kind: "refused",
      refusal: { reason: "not_authority", data: { authority: { gateway_id: "A", epoch: 3 } } },
    });
  });

  it("refuses on a fenced room with authority_conflict naming the newer authority", () => {
    const fenced = observeEpoch(room().state, { gateway_id: "B", epoch: 2 })!.state;
    const { outcome } = planAppend(fenced, send("m1"), null, NOW);
    expect(outcome).toMatchObject({
      kind: "refused",
      refusal: { reason: "authority_conflict", data: { authority: { gateway_id: "B", epoch: 2 } } },
    });
    // The adapters send it as the shared HermesError: reason, status and data travel together.
    if (outcome.kind !== "refused") return;
    const error = refusalError(outcome.refusal);
    expect(error.toJSON()).toEqual({
      reason: "authority_conflict",
      message: outcome.refusal.message,
      data: { authority: { gateway_id: "B", epoch: 2 } },
    });
    expect(error.exitCode).toBe(2);
  });

  it("refuses validation errors before anything else", () => {
    const { state } = room();
    expect(planAppend(state, send("bad id"), null, NOW).outcome).toMatchObject({ refusal: { reason: "invalid_params" } });
    expect(planAppend(state, send("m1", "x".repeat(70_000)), null, NOW).outcome).toMatchObject({
      refusal: { reason: "payload_too_large" },
    });
  });

  it("builds a client request from validated params with the server's actor", () => {
    const request = clientSendRequest(
      { room_id: "r1", event_id: "e1", payload: { text: "hi", thread_id: "t" }, expected_latest_seq: 3 },
      USER,
    );
    expect(request).toEqual({
      origin: "client",
      event_id: "e1",
      kind: "message.user",
      actor: USER,
      payload: { text: "hi", thread_id: "t" },
      expected_latest_seq: 3,
    });
  });
});

describe("planAppendBatch (group commit)", () => {
  it("gives each send its own outcome, with dense seqs and chained hashes for the accepted ones", () => {
    const { state, events } = room();
    const first = planAppend(state, send("old"), null, NOW);
    const old = first.appended[0]!;
    const plan = planAppendBatch(
      first.state,
      [
        { request: send("a"), stored: null },
        { request: send("bad id"), stored: null },
        { request: send("b", "x", { expected_latest_seq: 3 }), stored: null },
        { request: send("a"), stored: null },
        { request: send("a", "changed"), stored: null },
        { request: send("old"), stored: old },
        { request: send("c", "x", { expected_latest_seq: 3 }), stored: null },
        { request: send("d", "x", { expected_latest_seq: 4 }), stored: null },
      ],
      NOW,
    );
    expect(plan.outcomes.map((o) => o.kind)).toEqual([
      "appended",
      "refused",
      "appended",
      "idempotent",
      "refused",
      "idempotent",
      "refused",
      "appended",
    ]);
    expect(plan.outcomes[4]).toMatchObject({ refusal: { reason: "idempotency_conflict" } });
    expect(plan.outcomes[6]).toMatchObject({ refusal: { reason: "cursor_conflict", data: { latest_seq: 4 } } });
    expect(plan.appended.map((e) => [e.event_id, e.seq])).toEqual([
      ["a", 3],
      ["b", 4],
      ["d", 5],
    ]);
    expect(plan.outcomes[3]).toEqual({ kind: "idempotent", event: plan.appended[0] });
    expect(verifyChain([...events, old, ...plan.appended], 0, "").ok).toBe(true);
    expect(plan.state).toMatchObject({ last_seq: 5, latest_seq: 5, last_hash: plan.appended[2]!.hash });
  });

  it("plans the appended events' stored encoding and hashes as encodeTuples and eventHash compute them", () => {
    const { state } = room();
    const texts = ["plain", 'quote"', "back\\slash", "ctl\u0001", "日本語 😀", "lone \ud800", "x".repeat(60_000)];
    const items = [
      ...texts.map((text, i) => ({ request: send(`m${i}`, text), stored: null })),
      { request: send("threaded", "in a thread", { payload: { text: "in a thread", thread_id: "t1" } }), stored: null },
      { request: send("bad id"), stored: null },
      {
        request: {
          origin: "server" as const,
          event_id: "system:renamed",
          kind: "room.renamed",
          actor: { kind: "system" as const, id: "A" },
          payload: { name: "New" },
        },
        stored: null,
      },
      { request: send("m0", "plain"), stored: null },
    ];
    const plan = planAppendBatch(state, items, NOW);
    expect(plan.outcomes.map((o) => o.kind)).toEqual([...texts.map(() => "appended"), "appended", "refused", "appended", "idempotent"]);
    const run = plan.run!;
    const expected = encodeTuples(plan.appended);
    expect(run.first_seq).toBe(expected.first_seq);
    expect(Array.from(run.ends)).toEqual(Array.from(expected.ends));
    expect(Buffer.from(run.body).equals(Buffer.from(expected.body))).toBe(true);
    let prev = state.last_hash;
    for (const event of plan.appended) {
      expect(event.hash).toBe(eventHash(prev, event));
      prev = event.hash;
    }
    expect(planAppendBatch(plan.state, [{ request: send("bad id"), stored: null }], NOW).run).toBeUndefined();
  });

  it("closes the log inside the batch once room.disbanded is appended", () => {
    const { state } = room();
    const plan = planAppendBatch(
      state,
      [
        { request: send("a"), stored: null },
        {
          request: {
            origin: "server",
            event_id: "system:room-disbanded",
            kind: "room.disbanded",
            actor: { kind: "system", id: "room-control" },
            payload: {},
          },
          stored: null,
        },
        { request: send("b"), stored: null },
      ],
      NOW,
    );
    expect(plan.outcomes.map((o) => (o.kind === "refused" ? o.refusal.reason : o.kind))).toEqual([
      "appended",
      "appended",
      "room_disbanded",
    ]);
    expect(plan.state.disbanded).toBe(true);
  });

  it("refuses a whole batch above the size limit and changes nothing", () => {
    const { state } = room();
    const items = Array.from({ length: MAX_BATCH_APPENDS + 1 }, (_, i) => ({ request: send(`m${i}`), stored: null }));
    const plan = planAppendBatch(state, items, NOW);
    expect(plan.appended).toEqual([]);
    expect(plan.state).toBe(state);
    expect(new Set(plan.outcomes.map((o) => (o.kind === "refused" ? o.refusal.reason : o.kind)))).toEqual(new Set(["limit_exceeded"]));
  });

  it("plans group commits of 1000 appends (prints a figure, never a gate)", () => {
    let { state } = room();
    let best = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 25; round++) {
      const items = Array.from({ length: 1000 }, (_, i) => ({ request: send(`m${round}-${i}`, "x".repeat(200)), stored: null }));
      const started = performance.now();
      const plan = planAppendBatch(state, items, NOW);
      best = Math.min(best, performance.now() - started);
      expect(plan.appended).toHaveLength(1000);
      state = plan.state;
    }
    expect(state.last_seq).toBe(25_001);
    console.info(
      `planAppendBatch: best of 25 batches of 1000 (200-byte texts): ${best.toFixed(1)} ms = ${Math.round(1_000_000 / best)} appends/s`,
    );
  });
});
