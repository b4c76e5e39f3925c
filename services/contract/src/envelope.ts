import { z } from "zod";
import { HermesError } from "./errors.js";
import { MAX_TTL_SECONDS, MESSAGE_LIMIT_CHARS, messageLength } from "./limits.js";
import { ID_RULE } from "./names.js";

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

/**
 * The message rule, the one place it is decided: text, not blank, at most MESSAGE_LIMIT_CHARS code
 * points. The text is data: it is never trimmed, escaped or interpreted, so quotes, `$(...)` and
 * backticks reach the target exactly as written. `field` is where the message sits in what was
 * sent (`data.field` of an invalid_params refusal).
 */
export function assertDeliveryMessage(message: unknown, field = "message"): string {
  if (typeof message !== "string") {
    throw new HermesError("invalid_params", `message must be text, got ${message === null ? "null" : typeof message}`, {
      data: { field },
    });
  }
  if (message.trim().length === 0) {
    throw new HermesError("invalid_params", "message is empty: write what the teammate should do or answer", { data: { field } });
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

/** Where an envelope sits when it arrives inside a larger frame (the relay's `send`). */
export interface EnvelopeWithin {
  /** The frame, as a refusal names it: "send frame". */
  frame: string;
  /** The envelope's field in it: "envelope". */
  field: string;
}

/**
 * Validates an envelope, built here or received from elsewhere (a peer, the relay, the disk): the
 * schema, then the message rule. A refusal names the bad field as the sender wrote it
 * (`envelope.ttl_seconds` inside a frame).
 */
export function parseEnvelope(value: unknown, within?: EnvelopeWithin): DeliveryEnvelope {
  const parsed = deliveryEnvelopeSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = [...(within ? [within.field] : []), ...issue.path.map(String)];
    const where = path.length > 0 ? path.join(".") : "envelope";
    throw new HermesError("invalid_params", `invalid ${within?.frame ?? "delivery envelope"}: ${where}: ${issue.message}`, {
      data: { field: where },
    });
  }
  assertDeliveryMessage(parsed.data.message, within ? `${within.field}.message` : "message");
  return parsed.data;
}

/**
 * What "the same payload" means for idempotency, at every hop: sender, target and message, as one
 * canonical text (each side stores its hash). `created_at` and `ttl_seconds` are left out, so a
 * sender re-sending the same delivery later is still a duplicate.
 */
export function idempotencyPayload(envelope: Pick<DeliveryEnvelope, "from_profile" | "from_gateway" | "target" | "message">): string {
  return JSON.stringify([envelope.from_profile, envelope.from_gateway, envelope.target, envelope.message]);
}

/**
 * The instant (milliseconds since the epoch) a delivery that has not started stops being
 * deliverable: `created_at + ttl_seconds`. Where it was accepted from another machine
 * (`acceptedAt`, the receiver's clock), a `created_at` later than that (the sender's clock running
 * ahead) counts from `acceptedAt`, so a skewed clock cannot extend a TTL.
 */
export function ttlDeadline(envelope: Pick<DeliveryEnvelope, "created_at" | "ttl_seconds">, acceptedAt?: number): number {
  const created = Date.parse(envelope.created_at);
  return (acceptedAt === undefined ? created : Math.min(created, acceptedAt)) + envelope.ttl_seconds * 1000;
}

/**
 * The TTL rule, the one place it is decided (gateway outbox and ingress, the relay's queue, the
 * relay link's wait for an ack): mail that has not started by its deadline is expired from the
 * deadline on (`queued_expired`). Timers only say when to ask.
 */
export function ttlExpired(deadline: number, now: number): boolean {
  return now >= deadline;
}
