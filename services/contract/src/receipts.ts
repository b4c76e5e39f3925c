import type { ErrorReason } from "./errors.js";

/**
 * The states of a delivery receipt, as every side shows and sends them (gateway receipts, the
 * relay's outcome frames, `hermes deliveries`, the console):
 *
 *   queued     waiting for its first attempt (or for the single retry)
 *   claimed    its turn is running
 *   settled    the target answered (the reply may be empty)
 *   failed     it ended with a typed reason
 *   cancelled  stopped before it ran
 *   expired    not started within its TTL (`queued_expired`)
 *   ambiguous  interrupted mid-turn: the outcome is unknown, and it is never replayed automatically
 *
 * The transitions are the gateway's (services/gateway/src/delivery/core/receipt.ts).
 */
export const RECEIPT_STATES = ["queued", "claimed", "settled", "failed", "cancelled", "expired", "ambiguous"] as const;
export type ReceiptState = (typeof RECEIPT_STATES)[number];

export function isReceiptState(value: unknown): value is ReceiptState {
  return typeof value === "string" && (RECEIPT_STATES as readonly string[]).includes(value);
}

/** The states a delivery ends in: nothing changes it afterwards. */
export const TERMINAL_STATES: ReadonlySet<ReceiptState> = new Set(["settled", "failed", "cancelled", "expired", "ambiguous"]);

export function isTerminal(state: string): boolean {
  return (TERMINAL_STATES as ReadonlySet<string>).has(state);
}

/**
 * Typed delivery reasons. A failed bot turn or delivery carries exactly one of these as a field
 * end to end (receipt, relay frame, completion notification), so a calling bot branches on the code
 * instead of parsing provider prose. Every code is also a key of the REASONS table, which gives it
 * a gRPC status and a CLI exit code.
 */
export const DELIVERY_REASONS = [
  "provider_auth_or_access",
  "provider_quota_limit",
  "provider_rate_limit",
  "provider_server_error",
  "context_overflow",
  "missing_config",
  "model_unavailable",
  "runtime_offline",
  "queued_expired",
  "delivery_timeout",
  "target_busy",
  "unknown",
] as const satisfies readonly ErrorReason[];

/**
 * Refusals of the delivery itself rather than failures of a turn: the target vanished between
 * resolving it and the next hop (`unknown_target`), or the delivery id is already taken by another
 * payload there (`idempotency_conflict`). Raised before anything runs, they usually reach the
 * caller directly; when a later hop (the relay, a peer) reports one, the receipt and the
 * notification keep it typed instead of `unknown`, so the sender can branch on it. Never retried.
 */
export const REFUSAL_REASONS = ["unknown_target", "idempotency_conflict"] as const satisfies readonly ErrorReason[];

/** Every reason a receipt can carry: the twelve delivery reasons plus the refusals. */
export const RECEIPT_REASONS = [...DELIVERY_REASONS, ...REFUSAL_REASONS] as const;

export type DeliveryReason = (typeof RECEIPT_REASONS)[number];

export function isDeliveryReason(value: unknown): value is DeliveryReason {
  return typeof value === "string" && (RECEIPT_REASONS as readonly string[]).includes(value);
}

/** A receipt's reason as read from a wire or a row: a reason this build does not know is `unknown`. */
export function toReceiptReason(value: string): DeliveryReason {
  return isDeliveryReason(value) ? value : "unknown";
}
