import { createHash } from "node:crypto";
import { HermesError } from "@hermes/common/pure";
import { idempotencyPayload, type ReceiptState, ttlDeadline, ttlExpired } from "@hermes/contract";
import type { DeliveryEnvelope } from "@hermes/contract/envelope";
import type { SendRequest } from "./send.js";

/**
 * A delivery as the relay holds it:
 *
 *   queued ──forward──▶ forwarded ──result──▶ done
 *     ▲  └──expire──▶ done (queued_expired)  │
 *     │                                      ├──target disconnected──▶ offline (sender told runtime_offline)
 *     └─────────── relay restart / stream replaced ◀──┘           │
 *     └──────────────── the sender re-sends (its single retry) ◀──┘
 *
 * `forwarded` lives only in memory: after a restart every open delivery is queued again and
 * forwarded again when its target reconnects. That is safe because the target deduplicates by
 * delivery id (a repeat is answered with the stored result, never a second turn).
 */
export type RelayDeliveryState = "queued" | "forwarded" | "done" | "offline";

/** The end of a delivery as reported to the sender: the target's receipt, or a typed error. */
export type Outcome =
  | { kind: "receipt"; receipt: WireReceipt }
  | { kind: "error"; reason: string; message: string; data?: Record<string, unknown> };

/** A delivery receipt as it travels (proto `Receipt`): unset optionals are absent. */
export interface WireReceipt {
  delivery_id: string;
  from: string;
  target: string;
  state: string;
  reason?: string | undefined;
  error?: string | undefined;
  attempts: number;
  created_at: string;
  settled_at?: string | undefined;
  reply?: string | undefined;
}

export interface RelayDelivery {
  delivery_id: string;
  /** Commit order; lanes deliver in this order. */
  seq: number;
  fingerprint: string;
  sender_connection: string;
  target_connection: string;
  target_handle: string;
  sender_name: string;
  envelope: DeliveryEnvelope;
  state: RelayDeliveryState;
  /** How many times the relay has forwarded it. */
  forwards: number;
  /** Milliseconds since the epoch (relay clock). */
  accepted_at: number;
  expires_at: number;
  updated_at: number;
  outcome: Outcome | null;
}

export type NewDelivery = Omit<RelayDelivery, "seq">;

/** The per-target lane key: one ordered lane per bot (connection + handle), as upstream keys them. */
export function laneKey(connection: string, handle: string): string {
  return `${connection}\u0000${handle}`;
}

/** "The same payload" for idempotency, as every hop defines it (idempotencyPayload), hashed. */
export function payloadFingerprint(envelope: Pick<DeliveryEnvelope, "from_profile" | "from_gateway" | "target" | "message">): string {
  return createHash("sha256").update(idempotencyPayload(envelope), "utf8").digest("hex");
}

/** Builds the record of a newly accepted send. */
export function newDelivery(sender: string, send: SendRequest, now: number): NewDelivery {
  return {
    delivery_id: send.envelope.delivery_id,
    fingerprint: payloadFingerprint(send.envelope),
    sender_connection: sender,
    target_connection: send.target_connection,
    target_handle: send.target_handle,
    sender_name: send.sender_name,
    envelope: send.envelope,
    state: "queued",
    forwards: 0,
    accepted_at: now,
    // The TTL counts from the relay's clock when the sender's runs ahead.
    expires_at: ttlDeadline(send.envelope, now),
    updated_at: now,
    outcome: null,
  };
}

/** What to do with a `send` frame, given what the relay already holds under that id. */
export type SendDecision =
  /** Unseen id: store it, then ack `queued`. */
  | { action: "insert"; record: NewDelivery }
  /** A repeat of an open delivery (the sender reconnected): ack again; the outcome comes when it is known. */
  | { action: "ack" }
  /** A repeat of an ended delivery: ack and answer with the stored outcome at once. */
  | { action: "ack_outcome"; outcome: Outcome }
  /** The sender's single retry after runtime_offline: queue it again (ack after the commit). */
  | { action: "requeue"; record: RelayDelivery };

/**
 * Idempotency at the relay: same id + same payload from the same connection is the same delivery;
 * anything else under a known id is `idempotency_conflict` (nothing is stored or forwarded).
 */
export function decideSend(existing: RelayDelivery | undefined, sender: string, send: SendRequest, now: number): SendDecision {
  if (!existing) return { action: "insert", record: newDelivery(sender, send, now) };
  const sameSender = existing.sender_connection === sender;
  const samePayload = existing.fingerprint === payloadFingerprint(send.envelope);
  const sameTarget = existing.target_connection === send.target_connection && existing.target_handle === send.target_handle;
  if (!sameSender || !samePayload || !sameTarget) {
    throw new HermesError(
      "idempotency_conflict",
      `delivery ${existing.delivery_id} already exists at the relay with a different sender, target or message; use a new delivery id for a new message`,
      { data: { delivery_id: existing.delivery_id } },
    );
  }
  switch (existing.state) {
    case "queued":
    case "forwarded":
      return { action: "ack" };
    case "done":
      return { action: "ack_outcome", outcome: existing.outcome! };
    case "offline":
      return { action: "requeue", record: { ...existing, state: "queued", outcome: null, updated_at: now } };
  }
}

export function forward(record: RelayDelivery, now: number): RelayDelivery {
  if (record.state !== "queued") throw new HermesError("internal", `cannot forward delivery ${record.delivery_id}: it is ${record.state}`);
  return { ...record, state: "forwarded", forwards: record.forwards + 1, updated_at: now };
}

/**
 * The target's answer. Only the connection the delivery was forwarded to can end it, and only while
 * it is forwarded; anything else (a late answer after a disconnect, a forged id) changes nothing.
 */
export function applyResult(record: RelayDelivery, from: string, outcome: Outcome, now: number): RelayDelivery | undefined {
  if (record.state !== "forwarded" || record.target_connection !== from) return undefined;
  // runtime_offline from the target itself (it is stopping and keeps the delivery) is a disconnect
  // announced in words: the sender's retry must be queued again, not answered with this error.
  const state = outcome.kind === "error" && outcome.reason === "runtime_offline" ? "offline" : "done";
  return { ...record, state, outcome, updated_at: now };
}

/** The target's stream ended while it held the delivery: the sender is told runtime_offline. */
export function targetLost(record: RelayDelivery, now: number): RelayDelivery {
  if (record.state !== "forwarded") return record;
  return {
    ...record,
    state: "offline",
    outcome: {
      kind: "error",
      reason: "runtime_offline",
      message: `the gateway of connection ${record.target_connection} disconnected from the relay while delivering to ${record.target_handle}; the outcome of that attempt is unknown there and its gateway keeps it`,
    },
    updated_at: now,
  };
}

/** Back to the queue without telling anyone: relay restart, or the target's stream replaced by a newer one. */
export function requeue(record: RelayDelivery, now: number): RelayDelivery {
  if (record.state !== "forwarded") return record;
  return { ...record, state: "queued", updated_at: now };
}

/** A queued delivery past its TTL ends with `queued_expired` (a receipt in state `expired`). */
export function expireIfDue(record: RelayDelivery, now: number): RelayDelivery {
  if (record.state !== "queued" || !ttlExpired(record.expires_at, now)) return record;
  const ttl = record.envelope.ttl_seconds;
  return {
    ...record,
    state: "done",
    outcome: {
      kind: "receipt",
      receipt: {
        delivery_id: record.delivery_id,
        from: `${record.envelope.from_profile}@${record.envelope.from_gateway}`,
        target: record.envelope.target,
        state: "expired" satisfies ReceiptState,
        reason: "queued_expired",
        error: `not delivered within its TTL of ${ttl} s: the gateway of connection ${record.target_connection} did not take it in time`,
        attempts: 0,
        created_at: record.envelope.created_at,
        settled_at: new Date(now).toISOString(),
      },
    },
    updated_at: now,
  };
}

/** Outcome label for metrics: the receipt state, or the error reason. */
export function outcomeLabel(outcome: Outcome): string {
  return outcome.kind === "receipt" ? outcome.receipt.state : outcome.reason;
}
