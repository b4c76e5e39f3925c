import { describe, expect, it } from "vitest";
import { newEnvelope } from "./envelope.js";
import { outboxFromTarget } from "./outbox-outcome.js";
import { claim, createRecord, type DeliveryRecord, fail, markAmbiguous, type Receipt, settle, toReceipt } from "./receipt.js";

const T0 = Date.UTC(2025, 5, 1, 12, 0, 0);
const sec = (s: number) => T0 + s * 1000;

function queued(): DeliveryRecord {
  const env = newEnvelope(
    { from_profile: "alice", from_gateway: "laptop", target: "spark/bob", message: "hi" },
    { now: T0, newId: () => "dlv_1" },
  );
  return createRecord(env, T0);
}

/** The target's view of the same delivery, driven through the real state machine. */
function target(steps: ((r: DeliveryRecord) => DeliveryRecord)[]): Receipt {
  return toReceipt(steps.reduce((r, step) => step(r), queued()));
}

describe("outboxFromTarget", () => {
  it("mirrors the target's claim on a queued outbox record", () => {
    const next = outboxFromTarget(queued(), target([(r) => claim(r, sec(1))]), sec(1));
    expect(next).toMatchObject({ state: "claimed", attempts: 1 });
  });

  it("ends an open record with the target's settled reply", () => {
    const remote = target([(r) => claim(r, sec(1)), (r) => settle(r, "done", sec(2))]);
    const next = outboxFromTarget(claim(queued(), sec(1)), remote, sec(3));
    expect(next).toMatchObject({ state: "settled", reply: "done", reason: null, error: null, attempts: 1, settled_at: remote.settled_at });
  });

  it("takes a failure as final (the target already applied the retry rule) with its reason and error", () => {
    const remote = target([
      (r) => claim(r, sec(1)),
      (r) => fail(r, { reason: "provider_rate_limit", error: "429" }, sec(2)),
      (r) => claim(r, sec(3)),
      (r) => fail(r, { reason: "provider_rate_limit", error: "429 again" }, sec(4)),
    ]);
    expect(remote).toMatchObject({ state: "failed", attempts: 2 });
    const next = outboxFromTarget(claim(queued(), sec(1)), remote, sec(5));
    expect(next).toMatchObject({ state: "failed", reason: "provider_rate_limit", error: "429 again", attempts: 2, reply: null });
  });

  it("keeps the larger attempt count when the outbox itself retried the transport", () => {
    let outbox = claim(queued(), sec(1));
    outbox = fail(outbox, { reason: "runtime_offline", error: "peer down" }, sec(2));
    outbox = claim(outbox, sec(3));
    expect(outbox.attempts).toBe(2);
    const remote = target([(r) => claim(r, sec(3)), (r) => settle(r, "ok", sec(4))]);
    expect(outboxFromTarget(outbox, remote, sec(5))).toMatchObject({ state: "settled", attempts: 2, reply: "ok" });
  });

  it("adopts ambiguous and expired outcomes", () => {
    const amb = target([(r) => claim(r, sec(1)), (r) => markAmbiguous(r, "restart", sec(2))]);
    expect(outboxFromTarget(queued(), amb, sec(3))).toMatchObject({ state: "ambiguous", reason: "unknown" });
    const expired = target([(r) => claim({ ...r, ttl_seconds: 1 }, sec(5))]);
    expect(expired.state).toBe("expired");
    expect(outboxFromTarget(queued(), expired, sec(6))).toMatchObject({ state: "expired", reason: "queued_expired" });
  });

  it("never changes an ended outbox record", () => {
    const ended = settle(claim(queued(), sec(1)), "first", sec(2));
    const other = target([(r) => claim(r, sec(1)), (r) => fail(r, { reason: "unknown", error: "x" }, sec(2))]);
    expect(outboxFromTarget(ended, other, sec(3))).toBe(ended);
  });

  it("ignores reports that say nothing new", () => {
    const claimed = claim(queued(), sec(1));
    expect(outboxFromTarget(claimed, target([(r) => claim(r, sec(1))]), sec(2))).toBe(claimed);
    expect(outboxFromTarget(queued(), target([]), sec(2))).toEqual(queued());
  });

  it("refuses a receipt of another delivery", () => {
    expect(() => outboxFromTarget(queued(), { ...target([]), delivery_id: "dlv_2" }, sec(1))).toThrow(/dlv_2/);
  });
});
