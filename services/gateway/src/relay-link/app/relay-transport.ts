import { HermesError } from "@hermes/common";
import type { DeliveryEnvelope } from "@hermes/contract/envelope";
import { receiptFromWire } from "../../delivery/app/receipt-wire.js";
import type { DeliveryTransport, TransportOptions } from "../../delivery/app/transports.js";
import type { Receipt } from "../../delivery/core/receipt.js";
import type { Route } from "../../delivery/core/targets.js";
import type { RelayClient } from "./relay-client.js";

/**
 * `<handle>@<connection>` deliveries through the relay: the relay commits the envelope, forwards
 * it to the target gateway's stream and sends back its receipt. A failed attempt rejects with the
 * typed reason (runtime_offline when the target dropped mid-delivery), which the outbox treats
 * under the single-retry rule; sending the same envelope again is safe at every hop.
 */
export class RelayTransport implements DeliveryTransport {
  constructor(private readonly client: RelayClient) {}

  async deliver(route: Route, envelope: DeliveryEnvelope, options: TransportOptions): Promise<Receipt> {
    if (route.kind !== "relay") throw new HermesError("internal", `relay transport got a ${route.kind} route`);
    const wire = await this.client.send(
      { envelope, target_connection: route.connection, target_handle: route.handle, sender_name: options.sender_name },
      options.signal,
    );
    return receiptFromWire(wire);
  }
}
