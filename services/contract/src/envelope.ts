/**
 * `@hermes/contract/envelope`: the delivery envelope's schema and its parse. A subpath of its own
 * because it loads zod, which the CLI's start-up and the console do without; the rules it applies
 * are in the main entry (delivery.ts, limits.ts, names.ts).
 */
import { z } from "zod";
import { assertDeliveryMessage } from "./delivery.js";
import { HermesError } from "./errors.js";
import { MAX_TTL_SECONDS } from "./limits.js";
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
