import { describe, expect, it } from "vitest";
import {
  applyResult,
  decideSend,
  expireIfDue,
  forward,
  type Outcome,
  outcomeLabel,
  type RelayDelivery,
  requeue,
  targetLost,
} from "./deliveries.js";
import type { SendRequest } from "./send.js";

const T0 = Date.parse("2030-01-01T00:00:00.000Z");

function send(overrides: Partial<SendRequest["envelope"]> = {}, target = { c: "b", h: "bob" }): SendRequest {
  return {
    envelope: {
      delivery_id: "dlv_1",
      from_profile: "alice",
      from_gateway: "gw-a",
      target: `${target.h}@${target.c}`,
      message: "hello",
      created_at: new Date(T0).toISOString(),
      ttl_seconds: 60,
      ...overrides,
    },
    target_connection: target.c,
    target_handle: target.h,
    sender_name: "Alice",
  };
}

function stored(state: RelayDelivery["state"], outcome: Outcome | null = null): RelayDelivery {
  const decision = decideSend(undefined, "a", send(), T0);
  if (decision.action !== "insert") throw new Error("expected insert");
  return { ...decision.record, seq: 1, state, outcome };
}

const settled: Outcome = {
  kind: "receipt",
  receipt: { delivery_id: "dlv_1", from: "alice@gw-a", target: "bob@b", state: "settled", attempts: 1, created_at: "x", reply: "hi" },
};

describe("decideSend", () => {
  it("inserts an unseen delivery with its expiry from the envelope", () => {
    const d = decideSend(undefined, "a", send(), T0 + 5000);
    expect(d).toMatchObject({
      action: "insert",
      record: { state: "queued", sender_connection: "a", target_handle: "bob", expires_at: T0 + 60_000 },
    });
  });

  it("counts the TTL from the relay's clock when the sender's clock runs ahead", () => {
    const d = decideSend(undefined, "a", send({ created_at: new Date(T0 + 3_600_000).toISOString() }), T0);
    expect(d).toMatchObject({ record: { expires_at: T0 + 60_000 } });
  });

  it("answers a repeat by state: open → ack, done → the stored outcome, offline → queued again", () => {
    expect(decideSend(stored("queued"), "a", send(), T0)).toEqual({ action: "ack" });
    expect(decideSend(stored("forwarded"), "a", send(), T0)).toEqual({ action: "ack" });
    expect(decideSend(stored("done", settled), "a", send(), T0)).toEqual({ action: "ack_outcome", outcome: settled });
    const offline = targetLost(stored("forwarded"), T0);
    expect(decideSend(offline, "a", send(), T0 + 1)).toMatchObject({ action: "requeue", record: { state: "queued", outcome: null } });
  });

  it("refuses the same id with another payload, sender or target (idempotency_conflict)", () => {
    const existing = stored("queued");
    for (const [sender, s] of [
      ["a", send({ message: "something else" })],
      ["x", send()],
      ["a", send({}, { c: "b", h: "bea" })],
    ] as const) {
      expect(() => decideSend(existing, sender, s, T0)).toThrow(expect.objectContaining({ reason: "idempotency_conflict" }));
    }
  });

  it("treats another created_at or ttl under the same id as the same delivery", () => {
    expect(decideSend(stored("queued"), "a", send({ created_at: new Date(T0 + 10).toISOString(), ttl_seconds: 5 }), T0)).toEqual({
      action: "ack",
    });
  });
});

describe("transitions", () => {
  it("forward → result ends it, but only from the target connection and only while forwarded", () => {
    const f = forward(stored("queued"), T0);
    expect(f).toMatchObject({ state: "forwarded", forwards: 1 });
    expect(applyResult(f, "someone-else", settled, T0)).toBeUndefined();
    expect(applyResult(stored("queued"), "b", settled, T0)).toBeUndefined();
    expect(applyResult(f, "b", settled, T0)).toMatchObject({ state: "done", outcome: settled });
    expect(() => forward(f, T0)).toThrow(/it is forwarded/);
  });

  it("a runtime_offline answer from the target is a disconnect: offline, so the sender's retry is queued again", () => {
    const f = forward(stored("queued"), T0);
    const offline = applyResult(f, "b", { kind: "error", reason: "runtime_offline", message: "stopping" }, T0)!;
    expect(offline).toMatchObject({ state: "offline" });
    expect(decideSend(offline, "a", send(), T0)).toMatchObject({ action: "requeue" });
    const failed = applyResult(f, "b", { kind: "error", reason: "unknown_target", message: "no bob" }, T0)!;
    expect(failed).toMatchObject({ state: "done" });
    expect(decideSend(failed, "a", send(), T0)).toMatchObject({ action: "ack_outcome" });
  });

  it("target lost → offline with runtime_offline; requeue → queued without an outcome", () => {
    const f = forward(stored("queued"), T0);
    expect(targetLost(f, T0)).toMatchObject({ state: "offline", outcome: { kind: "error", reason: "runtime_offline" } });
    expect(requeue(f, T0)).toMatchObject({ state: "queued", outcome: null });
    const q = stored("queued");
    expect(targetLost(q, T0)).toBe(q);
    expect(requeue(q, T0)).toBe(q);
  });

  it("expires only queued deliveries at or past their TTL, as an expired receipt with queued_expired", () => {
    const q = stored("queued");
    expect(expireIfDue(q, T0 + 59_999)).toBe(q);
    const e = expireIfDue(q, T0 + 60_000);
    expect(e).toMatchObject({
      state: "done",
      outcome: {
        kind: "receipt",
        receipt: { state: "expired", reason: "queued_expired", from: "alice@gw-a", target: "bob@b", attempts: 0 },
      },
    });
    const f = forward(q, T0);
    expect(expireIfDue(f, T0 + 120_000)).toBe(f);
    expect(outcomeLabel(e.outcome!)).toBe("expired");
    expect(outcomeLabel(targetLost(f, T0).outcome!)).toBe("runtime_offline");
  });
});
