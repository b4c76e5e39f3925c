import { HermesError, isoTime } from "@hermes/common/pure";
import { type DeliveryReason, isTerminal, type ReceiptState, ttlDeadline, ttlExpired } from "@hermes/contract";
import type { DeliveryEnvelope } from "@hermes/contract/envelope";
import { completionNotification } from "./envelope.js";
import { decideRetry, MAX_DELIVERY_ATTEMPTS } from "./retry-policy.js";

/**
 * The transitions between the receipt states (the states themselves: RECEIPT_STATES in
 * @hermes/contract). `queued → claimed → settled | failed | cancelled | expired | ambiguous`, plus
 * the two edges the single-retry rule and cancellation need:
 *
 *   queued  ──claim──▶ claimed ──settle──▶ settled
 *     │ │                │ ├──fail (final)──▶ failed
 *     │ └─cancel─▶ cancelled ├──fail (retryable, attempt 1)──▶ queued   (the single retry)
 *     └─expire─▶ expired     └──crash / cancel mid-turn / restart──▶ ambiguous
 *
 * A claimed turn that is cancelled or interrupted may already have had effects, so it becomes
 * `ambiguous`, never `cancelled`, and is never replayed automatically.
 */
/** The receipt exactly as `hermes deliveries show ID --json` prints it. */
export interface Receipt {
  delivery_id: string;
  /** The sender as `<profile>@<gateway>`. */
  from: string;
  target: string;
  state: ReceiptState;
  reason: DeliveryReason | null;
  error: string | null;
  /** 0 while never claimed, 1, or 2 after the single retry. */
  attempts: number;
  created_at: string;
  settled_at: string | null;
  reply: string | null;
}

/** The persisted record: the receipt plus what the state machine itself needs. */
export interface DeliveryRecord extends Receipt {
  ttl_seconds: number;
  updated_at: string;
  /** Set when the single retry is for context_overflow: compact the transcript before the next attempt runs. */
  compact: boolean;
}

export type DeliveryEvent = "claim" | "settle" | "fail" | "cancel" | "expire" | "mark_ambiguous" | "adopt" | "end_by_deletion";

/** A transition the state machine does not allow, e.g. settling a delivery that already failed. */
export class IllegalTransitionError extends HermesError {
  constructor(record: Pick<DeliveryRecord, "delivery_id" | "state">, event: DeliveryEvent, why: string) {
    super("refused", `delivery ${record.delivery_id} is ${record.state}; cannot ${event.replace("_", " ")} it: ${why}`, {
      data: { delivery_id: record.delivery_id, state: record.state, event },
    });
  }
}

export function createRecord(envelope: DeliveryEnvelope, now: number): DeliveryRecord {
  return {
    delivery_id: envelope.delivery_id,
    from: `${envelope.from_profile}@${envelope.from_gateway}`,
    target: envelope.target,
    state: "queued",
    reason: null,
    error: null,
    attempts: 0,
    created_at: envelope.created_at,
    settled_at: null,
    reply: null,
    ttl_seconds: envelope.ttl_seconds,
    updated_at: isoTime(now),
    compact: false,
  };
}

/** The receipt's JSON shape, without the internal fields. */
export function toReceipt(record: DeliveryRecord): Receipt {
  const { delivery_id, from, target, state, reason, error, attempts, created_at, settled_at, reply } = record;
  return { delivery_id, from, target, state, reason, error, attempts, created_at, settled_at, reply };
}

function requireState(record: DeliveryRecord, event: DeliveryEvent, allowed: readonly ReceiptState[]): void {
  if (!allowed.includes(record.state)) {
    const why = isTerminal(record.state) ? "it has already ended" : `only a ${allowed.join(" or ")} delivery can`;
    throw new IllegalTransitionError(record, event, why);
  }
}

/**
 * True when a never-claimed delivery has outlived its TTL (ttlExpired). The TTL bounds how long
 * mail may wait for its first attempt; a delivery requeued for its single retry was admitted in
 * time and runs at once in the same lane slot, so it does not expire.
 */
export function isExpired(record: DeliveryRecord, now: number): boolean {
  if (record.state !== "queued" || record.attempts > 0) return false;
  return ttlExpired(ttlDeadline(record), now);
}

/** queued → expired with `queued_expired`, if the TTL has passed; otherwise the record unchanged. */
export function expireIfDue(record: DeliveryRecord, now: number): DeliveryRecord {
  if (!isExpired(record, now)) return record;
  return {
    ...record,
    state: "expired",
    reason: "queued_expired",
    error: `not picked up within its TTL of ${record.ttl_seconds} s (queued at ${record.created_at}); ${record.target} may be offline or busy. Send it again if it still matters.`,
    settled_at: isoTime(now),
    updated_at: isoTime(now),
  };
}

/**
 * queued → claimed, counting the attempt. A delivery whose TTL has passed is expired instead of
 * claimed, so stale mail never runs: check `state` of the result.
 */
export function claim(record: DeliveryRecord, now: number): DeliveryRecord {
  requireState(record, "claim", ["queued"]);
  if (isExpired(record, now)) return expireIfDue(record, now);
  if (record.attempts >= MAX_DELIVERY_ATTEMPTS) {
    throw new IllegalTransitionError(record, "claim", `it already ran ${record.attempts} times and a delivery gets one retry at most`);
  }
  return { ...record, state: "claimed", attempts: record.attempts + 1, updated_at: isoTime(now) };
}

/** claimed → settled with the target's reply (may be empty when the target chose silence). */
export function settle(record: DeliveryRecord, reply: string, now: number): DeliveryRecord {
  requireState(record, "settle", ["claimed"]);
  return {
    ...record,
    state: "settled",
    reason: null,
    error: null,
    reply,
    settled_at: isoTime(now),
    updated_at: isoTime(now),
    compact: false,
  };
}

export interface FailureFacts {
  reason: DeliveryReason;
  /** Human text, the provider's own words where there are any. */
  error: string;
  /**
   * Skip the retry rule: the failure is already final elsewhere (e.g. the target gateway applied
   * the rule and reported `failed`). Defaults to false.
   */
  final?: boolean;
}

/**
 * claimed → failed, or back to queued for the single retry when the retry rule allows it (the
 * record then says whether to compact first). The retry keeps the same delivery id and session.
 */
export function fail(record: DeliveryRecord, facts: FailureFacts, now: number): DeliveryRecord {
  requireState(record, "fail", ["claimed"]);
  const decision = facts.final === true ? { retry: false as const } : decideRetry({ reason: facts.reason, attempts: record.attempts });
  if (decision.retry) {
    // The reason and error of the failed attempt stay visible while the retry is pending.
    return { ...record, state: "queued", reason: facts.reason, error: facts.error, compact: decision.compact, updated_at: isoTime(now) };
  }
  return {
    ...record,
    state: "failed",
    reason: facts.reason,
    error: facts.error,
    reply: null,
    settled_at: isoTime(now),
    updated_at: isoTime(now),
    compact: false,
  };
}

/**
 * A queued delivery is cancelled cleanly. A claimed one is mid-turn: stopping it leaves its outcome
 * unknown (the turn may already have acted), so it becomes ambiguous rather than cancelled.
 */
export function cancel(record: DeliveryRecord, why: string, now: number): DeliveryRecord {
  requireState(record, "cancel", ["queued", "claimed"]);
  if (record.state === "claimed") {
    return markAmbiguous(record, `cancelled mid-turn (${why}); the turn may have partly run`, now);
  }
  return { ...record, state: "cancelled", reason: null, error: why, settled_at: isoTime(now), updated_at: isoTime(now), compact: false };
}

/** Which party of a delivery a profile deletion removed. */
export type DeletedParty = { profile: string; side: "target" | "sender" };

/**
 * A profile the delivery belongs to was deleted: its target, or its sender (whose Bot Chat would
 * get the reply). Queued or running, the delivery ends `failed` with `unknown_target` (what every
 * send to or from that name gets from then on; never retried) and an error naming the deletion.
 * A running turn is stopped by the caller; whatever it would have replied is discarded.
 */
export function endByDeletion(record: DeliveryRecord, deleted: DeletedParty, now: number): DeliveryRecord {
  requireState(record, "end_by_deletion", ["queued", "claimed"]);
  const who = deleted.side === "target" ? deleted.profile : `the sender ${deleted.profile}`;
  const when =
    record.state === "claimed"
      ? "while its turn was running; the turn was stopped and any reply discarded"
      : "before it ran; nothing was delivered";
  return {
    ...record,
    state: "failed",
    reason: "unknown_target",
    error: `${who} was deleted (hermes profile delete ${deleted.profile}) ${when}`,
    reply: null,
    settled_at: isoTime(now),
    updated_at: isoTime(now),
    compact: false,
  };
}

/** claimed → ambiguous: the turn started and its outcome is unknown. Never replayed automatically. */
export function markAmbiguous(record: DeliveryRecord, what: string, now: number): DeliveryRecord {
  requireState(record, "mark_ambiguous", ["claimed"]);
  return {
    ...record,
    state: "ambiguous",
    reason: "unknown",
    error: `outcome unknown: ${what} (attempt ${record.attempts}). It is not replayed automatically; check with ${record.target} before sending it again.`,
    reply: null,
    settled_at: isoTime(now),
    updated_at: isoTime(now),
    compact: false,
  };
}

/**
 * Restart recovery: a delivery claimed when the process stopped has an unknown outcome and becomes
 * ambiguous; queued ones stay queued (they never ran, so running them now is safe) and terminal
 * ones are untouched.
 */
export function recoverAfterRestart(record: DeliveryRecord, now: number): DeliveryRecord {
  if (record.state !== "claimed") return record;
  return markAmbiguous(record, "the gateway restarted while the turn was running", now);
}

const PROGRESS: Record<ReceiptState, number> = {
  queued: 0,
  claimed: 1,
  settled: 2,
  failed: 2,
  cancelled: 2,
  expired: 2,
  ambiguous: 2,
};

/**
 * Adopts the state another hop reported for the same delivery (the sender's outbox mirroring the
 * target's ingress receipt via the relay). Only forward moves are taken: a terminal record never
 * changes, and an older report (lower state, fewer attempts) is ignored.
 */
export function adoptRemote(record: DeliveryRecord, remote: Receipt, now: number): DeliveryRecord {
  if (remote.delivery_id !== record.delivery_id) {
    throw new HermesError("invalid_params", `receipt for ${remote.delivery_id} cannot update delivery ${record.delivery_id}`);
  }
  if (isTerminal(record.state)) {
    if (remote.state === record.state) return record;
    throw new IllegalTransitionError(record, "adopt", `the other side reports ${remote.state}, but this delivery already ended`);
  }
  const newer =
    remote.attempts > record.attempts || (remote.attempts === record.attempts && PROGRESS[remote.state] > PROGRESS[record.state]);
  if (!newer) return record;
  return {
    ...record,
    state: remote.state,
    reason: remote.reason,
    error: remote.error,
    attempts: remote.attempts,
    settled_at: remote.settled_at,
    reply: remote.reply,
    updated_at: isoTime(now),
    compact: false,
  };
}

/** The completion notification for the sender's Bot Chat once a delivery has ended; undefined while it is still open. */
export function completionFor(record: Receipt): string | undefined {
  if (record.state === "queued" || record.state === "claimed") return undefined;
  return completionNotification({ ...record, state: record.state });
}
