import { HermesError } from "@hermes/common/pure";
import { MAX_ENVELOPE_BYTES, NAME_RULE } from "@hermes/contract";
import { type DeliveryEnvelope, parseEnvelope } from "@hermes/contract/envelope";
import { z } from "zod";

/** A validated `send` frame. */
export interface SendRequest {
  envelope: DeliveryEnvelope;
  target_connection: string;
  target_handle: string;
  sender_name: string;
}

const name = z.string().regex(new RegExp(NAME_RULE), `a name matching ${NAME_RULE}`);

const sendSchema = z
  .object({
    // Checked next, by the envelope's own rules (the gateways run the same ones).
    envelope: z.unknown(),
    target_connection: name,
    target_handle: name,
    sender_name: z.string().max(200),
  })
  .strict();

/**
 * Validates a `send` frame: a typed `invalid_params` naming the bad field, or `payload_too_large`
 * for a message over the limit or an envelope over MAX_ENVELOPE_BYTES. `encodedBytes` is the size
 * of the envelope as it arrived on the wire.
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
  return { ...parsed.data, envelope: parseEnvelope(parsed.data.envelope, { frame: "send frame", field: "envelope" }) };
}
