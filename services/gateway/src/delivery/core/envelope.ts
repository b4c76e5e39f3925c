import { createHash } from "node:crypto";
import { HermesError, isoTime } from "@hermes/common/pure";
import { DEFAULT_TTL_SECONDS, type DeliveryReason, idempotencyPayload, type ReceiptState } from "@hermes/contract";
import { type DeliveryEnvelope, parseEnvelope } from "@hermes/contract/envelope";

export interface NewEnvelopeInput {
  from_profile: string;
  from_gateway: string;
  target: string;
  message: string;
  ttl_seconds?: number | undefined;
  /** A caller-chosen id (e.g. an idempotency key); a fresh one is minted otherwise. */
  delivery_id?: string | undefined;
}

export interface EnvelopeContext {
  /** Milliseconds since the epoch. */
  now: number;
  newId: () => string;
}

/** Builds a validated envelope (parseEnvelope: the wire schema, then the message rule); throws a typed error for anything it refuses. */
export function newEnvelope(input: NewEnvelopeInput, ctx: EnvelopeContext): DeliveryEnvelope {
  return parseEnvelope({
    delivery_id: input.delivery_id ?? ctx.newId(),
    from_profile: input.from_profile,
    from_gateway: input.from_gateway,
    target: input.target,
    message: input.message,
    created_at: isoTime(ctx.now),
    ttl_seconds: input.ttl_seconds ?? DEFAULT_TTL_SECONDS,
  });
}

/** "The same payload" for idempotency, as every hop defines it (idempotencyPayload), hashed. */
export function payloadFingerprint(envelope: Pick<DeliveryEnvelope, "from_profile" | "from_gateway" | "target" | "message">): string {
  return createHash("sha256").update(idempotencyPayload(envelope), "utf8").digest("hex");
}

export interface StoredDelivery {
  delivery_id: string;
  fingerprint: string;
}

/**
 * Same id + same payload → `duplicate` (return the existing receipt, run nothing);
 * same id + different payload → `idempotency_conflict`; unseen id → `new`.
 */
export function checkIdempotency(existing: StoredDelivery | undefined, incoming: DeliveryEnvelope): "new" | "duplicate" {
  return checkFingerprint(existing, { delivery_id: incoming.delivery_id, fingerprint: payloadFingerprint(incoming) });
}

/** `checkIdempotency` for a delivery whose payload fingerprint is already known (a row built from its envelope). */
export function checkFingerprint(existing: StoredDelivery | undefined, incoming: StoredDelivery): "new" | "duplicate" {
  if (existing === undefined) return "new";
  if (existing.delivery_id !== incoming.delivery_id) {
    throw new HermesError("internal", `idempotency check compared ${existing.delivery_id} with ${incoming.delivery_id}`);
  }
  if (existing.fingerprint === incoming.fingerprint) return "duplicate";
  throw new HermesError(
    "idempotency_conflict",
    `delivery ${incoming.delivery_id} already exists with a different sender, target or message; use a new delivery id for a new message`,
    { data: { delivery_id: incoming.delivery_id } },
  );
}

/** The ack `message_agent` returns at once: delivery is fire-and-forget. */
export function queuedAck(envelope: Pick<DeliveryEnvelope, "delivery_id">): { status: "queued"; delivery_id: string } {
  return { status: "queued", delivery_id: envelope.delivery_id };
}

/** One line, no control characters: a display name must not be able to fake a second line of prose. */
function oneLine(text: string): string {
  return text.replace(/[\p{Cc}\p{Zl}\p{Zp}\s]+/gu, " ").trim();
}

export interface Sender {
  /** Display name (falls back to the handle when blank). */
  name: string;
  handle: string;
}

/** `Message from 🤖 <sender> (@<handle>): `, added by the server, never by the sending bot. */
export function attributionPrefix(sender: Sender): string {
  const handle = oneLine(sender.handle).replace(/^@+/, "");
  const name = oneLine(sender.name) || handle;
  return `Message from 🤖 ${name} (@${handle}): `;
}

/** The text the target bot receives: attribution, then the message verbatim. */
export function attributedMessage(sender: Sender, message: string): string {
  return attributionPrefix(sender) + message;
}

/** The terminal facts of a delivery the completion notification is built from. */
export interface DeliveryOutcome {
  target: string;
  /** An end state. */
  state: Exclude<ReceiptState, "queued" | "claimed">;
  reason: DeliveryReason | null;
  error: string | null;
  reply: string | null;
}

/**
 * The text that arrives in the sender's Bot Chat when a delivery ends: the reply itself, or
 * `Delivery to <x> failed [reason: <code>]: <error>` so the sending bot can branch on the code.
 */
export function completionNotification(outcome: DeliveryOutcome): string {
  if (outcome.state === "settled") return outcome.reply ?? "";
  if (outcome.state === "cancelled") {
    return `Delivery to ${outcome.target} was cancelled: ${outcome.error ?? "cancelled by the operator"}`;
  }
  const reason = outcome.reason ?? "unknown";
  return `Delivery to ${outcome.target} failed [reason: ${reason}]: ${outcome.error ?? "no error text was recorded"}`;
}
