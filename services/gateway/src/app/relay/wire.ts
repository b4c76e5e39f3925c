import { type ErrorReason, HermesError, isErrorReason, toHermesError } from "@hermes/common";
import type { Receipt as WireReceipt } from "@hermes/proto/hermes/v1/delivery";
import type { ErrorInfo } from "@hermes/proto/hermes/v1/relay";
import { isDeliveryReason } from "../../core/delivery/reasons.js";
import { RECEIPT_STATES, type Receipt, type ReceiptState } from "../../core/delivery/receipt.js";

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
export function receiptFromWire(wire: WireReceipt | undefined): Receipt {
  if (!wire) throw new HermesError("unknown", "the relay answered without a receipt");
  if (!(RECEIPT_STATES as readonly string[]).includes(wire.state)) {
    throw new HermesError("unknown", `the relay reported the unknown delivery state ${JSON.stringify(wire.state)}`);
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

export function errorToWire(err: unknown): ErrorInfo {
  const e = toHermesError(err);
  return { reason: e.reason, message: e.message, data_json: Object.keys(e.data).length > 0 ? JSON.stringify(e.data) : "" };
}

/** A typed error from the wire; a reason this build does not know becomes `fallback`, keeping the text. */
export function errorFromWire(info: ErrorInfo | undefined, fallback: ErrorReason = "unknown"): HermesError {
  let data: Record<string, unknown> = {};
  if (info?.data_json) {
    try {
      const parsed = JSON.parse(info.data_json) as unknown;
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) data = parsed as Record<string, unknown>;
    } catch {
      data = {};
    }
  }
  const reason = info && isErrorReason(info.reason) ? info.reason : fallback;
  return new HermesError(reason, info?.message || "the relay sent no error text", { data });
}
