import { HermesError, type ServiceHandlers } from "@hermes/common";
import type { DeliveryServiceServer } from "@hermes/proto/hermes/v1/delivery";
import type { DeliveryService } from "../app/delivery-service.js";
import { receiptToWire } from "../app/receipt-wire.js";

export interface DeliveryHandlerDeps {
  deliveries: DeliveryService;
  /**
   * Whether this server requires the API key. Peer delivery is only served where it does: a
   * gateway without a key must not run turns for whoever can reach its port.
   */
  keyRequired: boolean;
  transport: "tcp" | "control";
}

/** DeliveryService over gRPC: validation of the edges here, behaviour in delivery/app. */
export function deliveryServiceHandlers(deps: DeliveryHandlerDeps): ServiceHandlers<DeliveryServiceServer> {
  const { deliveries } = deps;
  return {
    sendMessage: async (req, ctx) => {
      if (!req.profile) throw new HermesError("invalid_params", "which bot sends it? set profile (CLI: -p NAME)");
      if (!req.target)
        throw new HermesError("invalid_params", "a target is required (a teammate's name, <peer>/<profile> or <handle>@<connection>)");
      const ack = await deliveries.send(req.profile, req.target, req.message, {
        ttl_seconds: req.ttl_seconds || undefined,
        delivery_id: req.delivery_id || undefined,
      });
      if (!req.wait) return { status: ack.status, delivery_id: ack.delivery_id, receipt: undefined };
      const receipt = await deliveries.wait(ack.delivery_id, ctx.signal);
      return { status: ack.status, delivery_id: ack.delivery_id, receipt: receiptToWire(receipt) };
    },
    getDelivery: (req) => {
      if (!req.delivery_id) throw new HermesError("invalid_params", "a delivery id is required");
      return receiptToWire(deliveries.get(req.delivery_id));
    },
    listDeliveries: (req) => ({
      deliveries: deliveries
        .list({ profile: req.profile || undefined, state: req.state || undefined, limit: req.limit || undefined })
        .map((d) => ({ receipt: receiptToWire(d.record), side: d.side })),
    }),
    deliver: async (req, ctx) => {
      if (deps.transport === "tcp" && !deps.keyRequired) {
        throw new HermesError(
          "unauthenticated",
          "this gateway has no API key, so it does not accept deliveries from other gateways: set API_SERVER_KEY (or gateway.api_key) and give that key to the sending peer",
        );
      }
      if (!req.envelope) throw new HermesError("invalid_params", "Deliver needs an envelope");
      if (!req.target_profile) throw new HermesError("invalid_params", "Deliver needs the target profile");
      const receipt = await deliveries.accept(req.envelope, {
        target_profile: req.target_profile,
        sender_name: req.sender_name || undefined,
        source: "peer",
        signal: ctx.signal,
      });
      return { receipt: receiptToWire(receipt) };
    },
  };
}
