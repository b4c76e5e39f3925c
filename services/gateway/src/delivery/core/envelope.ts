import { createHash } from "node:crypto";
import { HermesError, ID_RULE, isoTime } from "@hermes/common/pure";
import { z } from "zod";
import type { DeliveryReason } from "./reasons.js";

/** `message_agent(target, message ≤ 16,000 chars)`. Counted in Unicode code points, so an emoji is one character. */
export const MESSAGE_LIMIT_CHARS = 16_000;
/** Default envelope TTL: a delivery still queued after this long expires with `queued_expired`. */
export const DEFAULT_TTL_SECONDS = 900;
/** Upper bound on a TTL, so a typo cannot park mail for months. */
export const MAX_TTL_SECONDS = 7 * 24 * 3600;

const idSchema = z.string().regex(new RegExp(ID_RULE), `an id matching ${ID_RULE}`);

/** The envelope as it is stored (outbox, ingress, relay queue) and sent on the wire. */
export const deliveryEnvelopeSchema = z
  .object({
    delivery_id: idSchema,
    from_profile: z.string().min(1).max(128),
    from_gateway: z.string().min(1).max(128),
    target: z.string().min(1).max(300),
    message: z.string(),
    created_at: z.iso.datetime({ offset: true }),
    ttl_seconds: z.number().int().min(1).max(MAX_TTL_SECONDS),
  })
  .strict();

export type DeliveryEnvelope = z.infer<typeof deliveryEnvelopeSchema>;

/** Length as a person counts it: code points, not UTF-16 units. */
export function messageLength(message: string): number {
  let count = 0;
  for (const _ of message) count++;
  return count;
}

/**
 * Checks the message parameter of `message_agent`. The text is data: it is never trimmed, escaped
 * or interpreted, so quotes, `$(...)` and backticks reach the target exactly as written.
 */
export function assertDeliveryMessage(message: unknown): string {
  if (typeof message !== "string") {
    throw new HermesError("invalid_params", `message must be text, got ${message === null ? "null" : typeof message}`);
  }
  if (message.trim().length === 0) {
    throw new HermesError("invalid_params", "message is empty: write what the teammate should do or answer");
  }
  const length = messageLength(message);
  if (length > MESSAGE_LIMIT_CHARS) {
    throw new HermesError(
      "payload_too_large",
      `message is ${length.toLocaleString("en-US")} characters; the limit is ${MESSAGE_LIMIT_CHARS.toLocaleString("en-US")}. Shorten it or split it into several messages.`,
      { data: { limit: MESSAGE_LIMIT_CHARS, length } },
    );
  }
  return message;
}

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

/** Builds a validated envelope; throws a typed error for anything the wire schema would refuse. */
export function newEnvelope(input: NewEnvelopeInput, ctx: EnvelopeContext): DeliveryEnvelope {
  assertDeliveryMessage(input.message);
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

/** Validates an envelope received from elsewhere (relay, peer, disk). */
export function parseEnvelope(value: unknown): DeliveryEnvelope {
  const parsed = deliveryEnvelopeSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "envelope";
    throw new HermesError("invalid_params", `invalid delivery envelope: ${where}: ${issue.message}`, { data: { field: where } });
  }
  assertDeliveryMessage(parsed.data.message);
  return parsed.data;
}

/**
 * What "the same payload" means for idempotency: sender, target and message. `created_at` and
 * `ttl_seconds` are left out, so a sender re-sending the same delivery later is still a duplicate.
 */
export function payloadFingerprint(envelope: Pick<DeliveryEnvelope, "from_profile" | "from_gateway" | "target" | "message">): string {
  const canonical = JSON.stringify([envelope.from_profile, envelope.from_gateway, envelope.target, envelope.message]);
  return createHash("sha256").update(canonical, "utf8").digest("hex");
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
  state: "settled" | "failed" | "expired" | "ambiguous" | "cancelled";
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
