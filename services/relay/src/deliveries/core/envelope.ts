import { createHash } from "node:crypto";
import { HermesError, ID_RULE } from "@hermes/common/pure";
import { z } from "zod";
import { isValidName, NAME_RULE } from "../../roster/core/names.js";

/** A bot-to-bot message is at most 16,000 characters (code points). */
export const MESSAGE_LIMIT_CHARS = 16_000;
/**
 * The largest envelope the relay stores, measured as encoded bytes. 16,000 code points of 4-byte
 * UTF-8 plus the other fields fit well inside; anything larger is refused, never truncated.
 */
export const MAX_ENVELOPE_BYTES = 128 * 1024;
export const MAX_TTL_SECONDS = 7 * 24 * 3600;

/** A delivery envelope as the relay receives it (the same shape the gateway stores and sends). */
export interface RelayEnvelope {
  delivery_id: string;
  from_profile: string;
  from_gateway: string;
  target: string;
  message: string;
  created_at: string;
  ttl_seconds: number;
}

/** A validated `send` frame. */
export interface SendRequest {
  envelope: RelayEnvelope;
  target_connection: string;
  target_handle: string;
  sender_name: string;
}

const name = z.string().regex(new RegExp(NAME_RULE), `a name matching ${NAME_RULE}`);

const envelopeSchema = z
  .object({
    delivery_id: z.string().regex(new RegExp(ID_RULE), `an id matching ${ID_RULE}`),
    from_profile: z.string().min(1).max(128),
    from_gateway: z.string().min(1).max(128),
    target: z.string().min(1).max(300),
    message: z.string(),
    created_at: z.iso.datetime({ offset: true }),
    ttl_seconds: z.number().int().min(1).max(MAX_TTL_SECONDS),
  })
  .strict();

const sendSchema = z
  .object({
    envelope: envelopeSchema,
    target_connection: name,
    target_handle: name,
    sender_name: z.string().max(200),
  })
  .strict();

function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * Validates a `send` frame: a typed `invalid_params` naming the bad field, or `payload_too_large`
 * for a message over 16,000 characters or an envelope over MAX_ENVELOPE_BYTES. `encodedBytes` is
 * the size of the envelope as it arrived on the wire.
 */
export function parseSend(value: unknown, encodedBytes: number): SendRequest {
  if (encodedBytes > MAX_ENVELOPE_BYTES) {
    throw new HermesError(
      "payload_too_large",
      `the envelope is ${encodedBytes} bytes; the relay accepts at most ${MAX_ENVELOPE_BYTES}. Shorten the message.`,
      { data: { limit: MAX_ENVELOPE_BYTES, bytes: encodedBytes } },
    );
  }
  const parsed = sendSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "send";
    throw new HermesError("invalid_params", `invalid send frame: ${where}: ${issue.message}`, { data: { field: where } });
  }
  const send = parsed.data;
  const length = codePoints(send.envelope.message);
  if (length > MESSAGE_LIMIT_CHARS) {
    throw new HermesError(
      "payload_too_large",
      `the message is ${length} characters; the limit is ${MESSAGE_LIMIT_CHARS}. Shorten it or split it into several messages.`,
      { data: { limit: MESSAGE_LIMIT_CHARS, length, delivery_id: send.envelope.delivery_id } },
    );
  }
  if (send.envelope.message.trim().length === 0) {
    throw new HermesError("invalid_params", "the message is empty", { data: { field: "envelope.message" } });
  }
  return send;
}

/**
 * "The same payload" for idempotency, exactly as the gateways define it (sender, target, message;
 * created_at and ttl left out, so a later re-send of the same delivery is still a duplicate).
 */
export function payloadFingerprint(envelope: Pick<RelayEnvelope, "from_profile" | "from_gateway" | "target" | "message">): string {
  const canonical = JSON.stringify([envelope.from_profile, envelope.from_gateway, envelope.target, envelope.message]);
  return createHash("sha256").update(canonical, "utf8").digest("hex");
}

/**
 * When the envelope stops being deliverable: its creation time plus the TTL. A creation time in
 * the relay's future (a sender's clock running ahead) counts from the relay's clock instead, so a
 * skewed clock cannot extend a TTL.
 */
export function expiresAt(envelope: Pick<RelayEnvelope, "created_at" | "ttl_seconds">, now: number): number {
  const created = Math.min(Date.parse(envelope.created_at), now);
  return created + envelope.ttl_seconds * 1000;
}

export { isValidName };
