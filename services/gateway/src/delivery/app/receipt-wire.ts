import { HermesError } from "@hermes/common/client";
import type { Receipt as WireReceipt } from "@hermes/proto/hermes/v1/delivery";
import { isDeliveryReason } from "../core/reasons.js";
import { RECEIPT_STATES, type Receipt, type ReceiptState } from "../core/receipt.js";

/** A receipt for the wire (unset optionals absent rather than null). */
export function receiptToWire(r: Receipt): WireReceipt {
  return {
    delivery_id: r.delivery_id,
    from: r.from,
    target: r.target,
    state: r.state,
    ...(r.reason !== null ? { reason: r.reason } : {}),
    ...(r.error !== null ? { error: r.error } : {}),
    attempts: r.attempts,
    created_at: r.created_at,
    ...(r.settled_at !== null ? { settled_at: r.settled_at } : {}),
    ...(r.reply !== null ? { reply: r.reply } : {}),
  };
}

/** A receipt from the wire; a state this build does not know is refused, an unknown reason becomes `unknown`. */
export function receiptFromWire(wire: WireReceipt | undefined, from = "the relay"): Receipt {
  if (!wire) throw new HermesError("unknown", `${from} answered without a receipt`);
  if (!(RECEIPT_STATES as readonly string[]).includes(wire.state)) {
    throw new HermesError("unknown", `${from} reported the unknown delivery state ${JSON.stringify(wire.state)}`);
  }
  const reason = wire.reason ?? null;
  return {
    delivery_id: wire.delivery_id,
    from: wire.from,
    target: wire.target,
    state: wire.state as ReceiptState,
    reason: reason === null ? null : isDeliveryReason(reason) ? reason : "unknown",
    error: wire.error ?? null,
    attempts: wire.attempts,
    created_at: wire.created_at,
    settled_at: wire.settled_at ?? null,
    reply: wire.reply ?? null,
  };
}
