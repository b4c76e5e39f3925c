import { HermesError } from "@hermes/common/client";
import { isReceiptState, toReceiptReason } from "@hermes/contract";
import type { Receipt as WireReceipt } from "@hermes/proto/hermes/v1/delivery";
import type { Receipt } from "../core/receipt.js";

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
  if (!isReceiptState(wire.state)) {
    throw new HermesError("unknown", `${from} reported the unknown delivery state ${JSON.stringify(wire.state)}`);
  }
  return {
    delivery_id: wire.delivery_id,
    from: wire.from,
    target: wire.target,
    state: wire.state,
    reason: wire.reason === undefined ? null : toReceiptReason(wire.reason),
    error: wire.error ?? null,
    attempts: wire.attempts,
    created_at: wire.created_at,
    settled_at: wire.settled_at ?? null,
    reply: wire.reply ?? null,
  };
}
