import { toWireError } from "@hermes/common";
import type { RelayFrame } from "@hermes/proto/hermes/v1/relay";
import type { Outcome, RelayDelivery } from "../../deliveries/core/deliveries.js";

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
          : { delivery_id: deliveryId, status: "", error: toWireError(error) },
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
  return { frame: { $case: "error", value: { error: toWireError(error), frame, delivery_id: deliveryId } } };
}
