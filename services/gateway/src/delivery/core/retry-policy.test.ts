import { HermesError } from "@hermes/common/pure";
import { type DeliveryReason, RECEIPT_REASONS } from "@hermes/contract";
import { describe, expect, it } from "vitest";
import { decideRetry, isRetryableReason, MAX_DELIVERY_ATTEMPTS } from "./retry-policy.js";

const expectedAfterFirstFailure: Record<DeliveryReason, ReturnType<typeof decideRetry>> = {
  runtime_offline: { retry: true, compact: false },
  delivery_timeout: { retry: true, compact: false },
  provider_rate_limit: { retry: true, compact: false },
  provider_server_error: { retry: true, compact: false },
  context_overflow: { retry: true, compact: true },
  provider_auth_or_access: { retry: false },
  provider_quota_limit: { retry: false },
  missing_config: { retry: false },
  model_unavailable: { retry: false },
  queued_expired: { retry: false },
  target_busy: { retry: false },
  unknown: { retry: false },
  // Refusals of the delivery itself: sending the same thing again cannot change the answer.
  unknown_target: { retry: false },
  idempotency_conflict: { retry: false },
};

describe("decideRetry", () => {
  it.each(RECEIPT_REASONS.map((r) => [r]))("after the first failure with %s", (reason) => {
    expect(decideRetry({ reason, attempts: 1 })).toEqual(expectedAfterFirstFailure[reason]);
  });

  it.each(RECEIPT_REASONS.map((r) => [r]))("never a second retry (%s after two attempts)", (reason) => {
    expect(decideRetry({ reason, attempts: 2 })).toEqual({ retry: false });
    expect(decideRetry({ reason, attempts: 7 })).toEqual({ retry: false });
  });

  it.each(RECEIPT_REASONS.map((r) => [r]))("an ambiguous outcome never replays (%s)", (reason) => {
    expect(decideRetry({ reason, attempts: 1, ambiguous: true })).toEqual({ retry: false });
  });

  it("has no fresh-session option in any decision", () => {
    for (const reason of RECEIPT_REASONS) {
      const decision = decideRetry({ reason, attempts: 1 });
      expect(Object.keys(decision).sort()).toEqual(decision.retry ? ["compact", "retry"] : ["retry"]);
    }
  });

  it("refuses a nonsensical attempt count with a typed error", () => {
    for (const attempts of [0, -1, 1.5, Number.NaN]) {
      expect(() => decideRetry({ reason: "unknown", attempts })).toThrow(HermesError);
    }
    try {
      decideRetry({ reason: "unknown", attempts: 0 });
    } catch (err) {
      expect((err as HermesError).reason).toBe("invalid_params");
    }
  });

  it("caps attempts at two", () => {
    expect(MAX_DELIVERY_ATTEMPTS).toBe(2);
  });

  it("isRetryableReason agrees with the decision table", () => {
    for (const reason of RECEIPT_REASONS) expect(isRetryableReason(reason)).toBe(expectedAfterFirstFailure[reason].retry);
  });
});
