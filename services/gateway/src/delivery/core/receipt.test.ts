import { HermesError } from "@hermes/common/pure";
import { DELIVERY_REASONS, RECEIPT_STATES, type ReceiptState } from "@hermes/contract";
import { describe, expect, it } from "vitest";
import { newEnvelope } from "./envelope.js";
import {
  adoptRemote,
  cancel,
  claim,
  completionFor,
  createRecord,
  type DeliveryRecord,
  endByDeletion,
  expireIfDue,
  fail,
  IllegalTransitionError,
  isExpired,
  markAmbiguous,
  recoverAfterRestart,
  settle,
  toReceipt,
} from "./receipt.js";

const T0 = Date.UTC(2025, 5, 1, 12, 0, 0);
const sec = (s: number) => T0 + s * 1000;

function queued(ttl_seconds = 900): DeliveryRecord {
  const env = newEnvelope(
    { from_profile: "alice", from_gateway: "laptop", target: "bob", message: "hi", ttl_seconds },
    { now: T0, newId: () => "dlv_1" },
  );
  return createRecord(env, T0);
}

function inState(state: ReceiptState): DeliveryRecord {
  const q = queued();
  switch (state) {
    case "queued":
      return q;
    case "claimed":
      return claim(q, sec(1));
    case "settled":
      return settle(claim(q, sec(1)), "ok", sec(2));
    case "failed":
      return fail(claim(q, sec(1)), { reason: "provider_auth_or_access", error: "bad key" }, sec(2));
    case "cancelled":
      return cancel(q, "stopped by operator", sec(1));
    case "expired":
      return expireIfDue(q, sec(901));
    case "ambiguous":
      return markAmbiguous(claim(q, sec(1)), "crash", sec(2));
  }
}

function refusal(fn: () => unknown): IllegalTransitionError {
  try {
    fn();
  } catch (err) {
    if (err instanceof IllegalTransitionError) return err;
    throw err;
  }
  throw new Error("expected an IllegalTransitionError");
}

describe("receipt JSON", () => {
  it("has exactly the receipt fields", () => {
    const r = toReceipt(settle(claim(queued(), sec(1)), "the answer", sec(3)));
    expect(r).toEqual({
      delivery_id: "dlv_1",
      from: "alice@laptop",
      target: "bob",
      state: "settled",
      reason: null,
      error: null,
      attempts: 1,
      created_at: "2025-06-01T12:00:00.000Z",
      settled_at: "2025-06-01T12:00:03.000Z",
      reply: "the answer",
    });
    expect(Object.keys(r)).toEqual([
      "delivery_id",
      "from",
      "target",
      "state",
      "reason",
      "error",
      "attempts",
      "created_at",
      "settled_at",
      "reply",
    ]);
  });
});

describe("legal transitions", () => {
  it("queued → claimed counts the attempt", () => {
    const c = claim(queued(), sec(5));
    expect(c.state).toBe("claimed");
    expect(c.attempts).toBe(1);
    expect(c.updated_at).toBe("2025-06-01T12:00:05.000Z");
  });

  it("the single retry: claimed → queued → claimed → settled, attempts 2, same id", () => {
    let r = claim(queued(), sec(1));
    r = fail(r, { reason: "provider_rate_limit", error: "429 slow down" }, sec(2));
    expect(r).toMatchObject({ state: "queued", attempts: 1, reason: "provider_rate_limit", error: "429 slow down", compact: false });
    r = claim(r, sec(3));
    expect(r).toMatchObject({ state: "claimed", attempts: 2 });
    r = settle(r, "done", sec(4));
    expect(toReceipt(r)).toMatchObject({ delivery_id: "dlv_1", state: "settled", attempts: 2, reason: null, error: null, reply: "done" });
  });

  it("context_overflow retries once with compaction asked for", () => {
    let r = fail(claim(queued(), sec(1)), { reason: "context_overflow", error: "maximum context length" }, sec(2));
    expect(r).toMatchObject({ state: "queued", compact: true });
    r = claim(r, sec(3));
    expect(r).toMatchObject({ state: "claimed", attempts: 2, compact: true });
    expect(settle(r, "fits now", sec(4)).compact).toBe(false);
  });

  it("a second failure is final even for a retryable reason", () => {
    let r = claim(queued(), sec(1));
    r = claim(fail(r, { reason: "delivery_timeout", error: "timed out" }, sec(2)), sec(3));
    r = fail(r, { reason: "provider_server_error", error: "HTTP 503 overloaded" }, sec(4));
    expect(toReceipt(r)).toMatchObject({ state: "failed", attempts: 2, reason: "provider_server_error", error: "HTTP 503 overloaded" });
    expect(r.settled_at).toBe("2025-06-01T12:00:04.000Z");
  });

  it.each(
    DELIVERY_REASONS.filter(
      (r) => !["runtime_offline", "delivery_timeout", "provider_rate_limit", "provider_server_error", "context_overflow"].includes(r),
    ),
  )("%s fails at once, attempts 1", (reason) => {
    const r = fail(claim(queued(), sec(1)), { reason, error: "x" }, sec(2));
    expect(r).toMatchObject({ state: "failed", attempts: 1, reason });
  });

  it("a failure marked final skips the retry rule", () => {
    const r = fail(claim(queued(), sec(1)), { reason: "provider_rate_limit", error: "remote gave up", final: true }, sec(2));
    expect(r.state).toBe("failed");
  });

  it("cancel: queued → cancelled, claimed → ambiguous", () => {
    expect(toReceipt(cancel(queued(), "stopped by alice", sec(1)))).toMatchObject({
      state: "cancelled",
      reason: null,
      error: "stopped by alice",
    });
    const a = cancel(claim(queued(), sec(1)), "stopped by alice", sec(2));
    expect(a.state).toBe("ambiguous");
    expect(a.reason).toBe("unknown");
    expect(a.error).toContain("stopped by alice");
    expect(a.error).toContain("not replayed");
  });
});

describe("endByDeletion", () => {
  it("ends a queued or running delivery failed with unknown_target and a text naming the deletion", () => {
    const q = endByDeletion(queued(), { profile: "bob", side: "target" }, sec(1));
    expect(toReceipt(q)).toMatchObject({ state: "failed", reason: "unknown_target", attempts: 0, reply: null });
    expect(q.error).toBe("bob was deleted (hermes profile delete bob) before it ran; nothing was delivered");
    expect(q.settled_at).toBe("2025-06-01T12:00:01.000Z");
    const c = endByDeletion(claim(queued(), sec(1)), { profile: "alice", side: "sender" }, sec(2));
    expect(toReceipt(c)).toMatchObject({ state: "failed", reason: "unknown_target", attempts: 1 });
    expect(c.error).toBe(
      "the sender alice was deleted (hermes profile delete alice) while its turn was running; the turn was stopped and any reply discarded",
    );
    expect(completionFor(c)).toMatch(/^Delivery to bob failed \[reason: unknown_target\]: the sender alice was deleted/);
  });

  it.each(["settled", "failed", "cancelled", "expired", "ambiguous"] as const)("leaves an ended (%s) delivery alone: refused", (state) => {
    expect(refusal(() => endByDeletion(inState(state), { profile: "bob", side: "target" }, sec(9))).reason).toBe("refused");
  });
});

describe("illegal transitions", () => {
  const events: Record<string, (r: DeliveryRecord) => unknown> = {
    claim: (r) => claim(r, sec(10)),
    settle: (r) => settle(r, "x", sec(10)),
    fail: (r) => fail(r, { reason: "unknown", error: "x" }, sec(10)),
    cancel: (r) => cancel(r, "x", sec(10)),
    mark_ambiguous: (r) => markAmbiguous(r, "x", sec(10)),
  };
  const legal: Record<string, ReceiptState[]> = {
    claim: ["queued"],
    settle: ["claimed"],
    fail: ["claimed"],
    cancel: ["queued", "claimed"],
    mark_ambiguous: ["claimed"],
  };

  for (const state of RECEIPT_STATES) {
    for (const [event, apply] of Object.entries(events)) {
      if (legal[event]!.includes(state)) continue;
      it(`${event} from ${state} is refused with a typed error`, () => {
        const err = refusal(() => apply(inState(state)));
        expect(err).toBeInstanceOf(HermesError);
        expect(err.reason).toBe("refused");
        expect(err.data).toEqual({ delivery_id: "dlv_1", state, event });
        expect(err.message).toContain(`is ${state}`);
      });
    }
  }

  it("a third claim is refused", () => {
    let r = claim(queued(), sec(1));
    r = claim(fail(r, { reason: "runtime_offline", error: "gone" }, sec(2)), sec(3));
    // Force the record back to queued the way a buggy store might; the machine still refuses.
    expect(refusal(() => claim({ ...r, state: "queued" }, sec(4))).message).toContain("one retry");
  });
});

describe("TTL", () => {
  it("expires a never-claimed delivery at the end of its TTL with queued_expired", () => {
    const q = queued();
    // created_at + ttl_seconds is the deadline (docs/PROTOCOL.md), the same instant on every hop.
    expect(isExpired(q, sec(899.999))).toBe(false);
    expect(expireIfDue(q, sec(899.999))).toBe(q);
    expect(isExpired(q, sec(900))).toBe(true);
    const e = expireIfDue(q, sec(901));
    expect(toReceipt(e)).toMatchObject({ state: "expired", reason: "queued_expired", attempts: 0, settled_at: "2025-06-01T12:15:01.000Z" });
    expect(e.error).toContain("900 s");
  });

  it("claim of a stale delivery expires it instead of running it", () => {
    const r = claim(queued(60), sec(61));
    expect(r.state).toBe("expired");
    expect(r.attempts).toBe(0);
  });

  it("a retry pending after a long first attempt does not expire", () => {
    const r = fail(claim(queued(60), sec(1)), { reason: "provider_server_error", error: "500" }, sec(600));
    expect(isExpired(r, sec(10_000))).toBe(false);
    expect(claim(r, sec(10_000)).state).toBe("claimed");
  });

  it("non-queued deliveries never expire", () => {
    for (const state of RECEIPT_STATES.filter((s) => s !== "queued")) {
      expect(isExpired(inState(state), sec(100_000))).toBe(false);
    }
  });
});

describe("restart recovery", () => {
  it("claimed becomes ambiguous and is never replayed", () => {
    const r = recoverAfterRestart(claim(queued(), sec(1)), sec(50));
    expect(toReceipt(r)).toMatchObject({ state: "ambiguous", reason: "unknown", attempts: 1, reply: null });
    expect(r.error).toContain("restarted");
    expect(refusal(() => claim(r, sec(51))).reason).toBe("refused");
  });

  it("queued stays queued, terminal states are untouched", () => {
    for (const state of RECEIPT_STATES.filter((s) => s !== "claimed")) {
      const before = inState(state);
      expect(recoverAfterRestart(before, sec(99))).toBe(before);
    }
  });

  it("a retry pending at restart stays queued and runs as attempt 2", () => {
    const pending = fail(claim(queued(), sec(1)), { reason: "runtime_offline", error: "target offline" }, sec(2));
    const after = recoverAfterRestart(pending, sec(3));
    expect(after.state).toBe("queued");
    expect(claim(after, sec(4)).attempts).toBe(2);
  });
});

describe("adoptRemote", () => {
  it("moves forward to the state the other hop reports", () => {
    const local = queued();
    const remote = toReceipt(settle(claim(queued(), sec(1)), "hello back", sec(2)));
    const r = adoptRemote(local, remote, sec(3));
    expect(toReceipt(r)).toEqual(remote);
  });

  it("ignores stale reports and refuses to change an ended delivery", () => {
    const claimed = claim(queued(), sec(1));
    expect(adoptRemote(claimed, toReceipt(queued()), sec(2))).toBe(claimed);
    const settled = inState("settled");
    expect(adoptRemote(settled, toReceipt(settled), sec(3))).toBe(settled);
    expect(refusal(() => adoptRemote(settled, toReceipt(inState("failed")), sec(3))).reason).toBe("refused");
  });

  it("follows the other side through its single retry", () => {
    const local = claim(queued(), sec(1));
    const remoteRetryPending = fail(claim(queued(), sec(1)), { reason: "runtime_offline", error: "target offline" }, sec(2));
    // Same attempt count, lower state: not newer, ignored.
    expect(adoptRemote(local, toReceipt(remoteRetryPending), sec(3))).toBe(local);
    const remoteSecondAttempt = claim(remoteRetryPending, sec(4));
    expect(adoptRemote(local, toReceipt(remoteSecondAttempt), sec(5))).toMatchObject({ state: "claimed", attempts: 2 });
  });

  it("refuses a receipt for another delivery", () => {
    const other = { ...toReceipt(queued()), delivery_id: "dlv_2" };
    expect(() => adoptRemote(queued(), other, sec(1))).toThrow(/dlv_2/);
  });
});

describe("state machine properties (random event sequences)", () => {
  it("attempts never exceed 2, ended deliveries never change, and every refusal is typed", async () => {
    const fc = await import("fast-check");
    const event = fc.constantFrom("claim", "settle", "fail_retryable", "fail_final", "cancel", "crash", "restart", "tick");
    fc.assert(
      fc.property(fc.array(event, { maxLength: 30 }), fc.integer({ min: 1, max: 2000 }), (events, ttl) => {
        let r = queued(ttl);
        let now = T0;
        for (const e of events) {
          now += 60_000;
          const before = r;
          try {
            switch (e) {
              case "claim":
                r = claim(r, now);
                break;
              case "settle":
                r = settle(r, "ok", now);
                break;
              case "fail_retryable":
                r = fail(r, { reason: "provider_server_error", error: "500" }, now);
                break;
              case "fail_final":
                r = fail(r, { reason: "provider_auth_or_access", error: "401" }, now);
                break;
              case "cancel":
                r = cancel(r, "stop", now);
                break;
              case "crash":
                r = markAmbiguous(r, "crash", now);
                break;
              case "restart":
                r = recoverAfterRestart(r, now);
                break;
              case "tick":
                r = expireIfDue(r, now);
                break;
            }
          } catch (err) {
            expect(err).toBeInstanceOf(IllegalTransitionError);
            expect(r).toBe(before);
          }
          if (["settled", "failed", "cancelled", "expired", "ambiguous"].includes(before.state)) expect(r).toBe(before);
          expect(r.attempts).toBeLessThanOrEqual(2);
          if (r.state === "expired") expect(r.attempts).toBe(0);
          if (r.state === "settled") expect(r.reply).toBe("ok");
          if (r.state === "failed" || r.state === "expired" || r.state === "ambiguous") expect(r.reason).not.toBeNull();
          expect(r.settled_at === null).toBe(r.state === "queued" || r.state === "claimed");
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe("completionFor", () => {
  it("is undefined while open and the completion notification once ended", () => {
    expect(completionFor(inState("queued"))).toBeUndefined();
    expect(completionFor(inState("claimed"))).toBeUndefined();
    expect(completionFor(inState("settled"))).toBe("ok");
    expect(completionFor(inState("failed"))).toBe("Delivery to bob failed [reason: provider_auth_or_access]: bad key");
    expect(completionFor(inState("expired"))).toMatch(
      /^Delivery to bob failed \[reason: queued_expired\]: not picked up within its TTL of 900 s/,
    );
    expect(completionFor(inState("ambiguous"))).toMatch(/^Delivery to bob failed \[reason: unknown\]: outcome unknown: crash/);
    expect(completionFor(inState("cancelled"))).toBe("Delivery to bob was cancelled: stopped by operator");
  });
});
