/**
 * The delivery rules every hop applies, without the envelope's schema (`@hermes/contract/envelope`,
 * which loads zod): the message rule, what "the same payload" is, the TTL rule.
 */
import { HermesError } from "./errors.js";
import { MESSAGE_LIMIT_CHARS, messageLength } from "./limits.js";

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

/**
 * What "the same payload" means for idempotency, at every hop: sender, target and message, as one
 * canonical text (each side stores its hash). `created_at` and `ttl_seconds` are left out, so a
 * sender re-sending the same delivery later is still a duplicate.
 */
export function idempotencyPayload(envelope: { from_profile: string; from_gateway: string; target: string; message: string }): string {
  return JSON.stringify([envelope.from_profile, envelope.from_gateway, envelope.target, envelope.message]);
}

/**
 * The instant (milliseconds since the epoch) a delivery that has not started stops being
 * deliverable: `created_at + ttl_seconds`. Where it was accepted from another machine
 * (`acceptedAt`, the receiver's clock), a `created_at` later than that (the sender's clock running
 * ahead) counts from `acceptedAt`, so a skewed clock cannot extend a TTL.
 */
export function ttlDeadline(envelope: { created_at: string; ttl_seconds: number }, acceptedAt?: number): number {
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
