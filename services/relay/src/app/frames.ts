import { type ErrorReason, HermesError, isErrorReason, toHermesError } from "@hermes/common";
import type { ErrorInfo, RelayFrame } from "@hermes/proto/hermes/v1/relay";
import type { Outcome, RelayDelivery } from "../core/deliveries.js";

/** A typed error as it travels in a frame. */
export function errorInfo(err: unknown): ErrorInfo {
  const e = toHermesError(err);
  return { reason: e.reason, message: e.message, data_json: Object.keys(e.data).length > 0 ? JSON.stringify(e.data) : "" };
}

/** The HermesError an ErrorInfo stands for; a reason this build does not know becomes `unknown`, keeping the text. */
export function fromErrorInfo(info: ErrorInfo | undefined, fallback: ErrorReason = "unknown"): HermesError {
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
  const message = info?.message || "no error text was sent";
  return new HermesError(reason, message, { data: info && reason !== info.reason ? { ...data, sent_reason: info.reason } : data });
}

export function outcomeFrame(deliveryId: string, outcome: Outcome): RelayFrame {
  return {
    frame: {
      $case: "outcome",
      value: {
        delivery_id: deliveryId,
        result:
          outcome.kind === "receipt"
            ? { $case: "receipt", value: outcome.receipt }
            : {
                $case: "error",
                value: { reason: outcome.reason, message: outcome.message, data_json: outcome.data ? JSON.stringify(outcome.data) : "" },
              },
      },
    },
  };
}

export function ackFrame(deliveryId: string, error?: unknown): RelayFrame {
  return {
    frame: {
      $case: "ack",
      value:
        error === undefined
          ? { delivery_id: deliveryId, status: "queued", error: undefined }
          : { delivery_id: deliveryId, status: "", error: errorInfo(error) },
    },
  };
}

export function deliverFrame(record: RelayDelivery): RelayFrame {
  return {
    frame: {
      $case: "deliver",
      value: {
        envelope: record.envelope,
        target_profile: record.target_handle,
        sender_name: record.sender_name,
        from_connection: record.sender_connection,
      },
    },
  };
}

export function frameError(frame: string, error: unknown, deliveryId = ""): RelayFrame {
  return { frame: { $case: "error", value: { error: errorInfo(error), frame, delivery_id: deliveryId } } };
}
