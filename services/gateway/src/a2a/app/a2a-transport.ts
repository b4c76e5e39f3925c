import { type Clock, HermesError, isoTime } from "@hermes/common";
import { toReceiptReason } from "@hermes/contract";
import type { DeliveryEnvelope } from "@hermes/contract/envelope";
import type { DeliveryTransport, TransportOptions } from "../../delivery/app/transports.js";
import type { Receipt } from "../../delivery/core/receipt.js";
import type { Route } from "../../delivery/core/targets.js";
import { A2aPeerClient, type A2aPeerDirectory } from "./a2a-peer-client.js";

/**
 * Mail for an A2A agent registered as a peer (`message_agent(target="NAME")`, `hermes message`):
 * the envelope's message is sent as one A2A message whose messageId is the delivery id, and the
 * agent's answer becomes the receipt a Hermes target would have sent (a reply settles, a failed
 * task fails with the reason it states, else `unknown`; a cancel is `cancelled`). A failure to
 * reach the agent rejects with the delivery reason, under the sender's single-retry rule, as for
 * any peer: `runtime_offline`, `delivery_timeout` (bounded by delivery.peer_timeout_seconds),
 * `provider_auth_or_access`, `unknown` for an answer that is not A2A.
 */
export class A2aPeerTransport implements DeliveryTransport {
  constructor(
    private readonly peers: A2aPeerDirectory,
    private readonly timeoutMs: number,
    private readonly clock: Clock,
  ) {}

  async deliver(route: Route, envelope: DeliveryEnvelope, options: TransportOptions): Promise<Receipt> {
    if (route.kind !== "peer" || !route.a2a) throw new HermesError("internal", `the A2A transport got a ${route.kind} route`);
    const client = A2aPeerClient.open(this.peers, route.peer, { timeoutMs: this.timeoutMs, signal: options.signal });
    try {
      const from = `${envelope.from_profile}@${envelope.from_gateway}`;
      const { outcome } = await client.send({
        text: envelope.message,
        message_id: envelope.delivery_id,
        sender: { name: options.sender_name, handle: from },
      });
      const receipt: Receipt = {
        delivery_id: envelope.delivery_id,
        from,
        target: route.target,
        state: "settled",
        reason: null,
        error: null,
        attempts: 1,
        created_at: envelope.created_at,
        settled_at: isoTime(this.clock.now()),
        reply: null,
      };
      switch (outcome.kind) {
        case "reply":
          return { ...receipt, reply: outcome.reply };
        case "failed":
          return {
            ...receipt,
            state: "failed",
            reason: toReceiptReason(outcome.reason),
            error: outcome.error,
          };
        case "canceled":
          return { ...receipt, state: "cancelled", error: outcome.error };
        case "open":
          throw new HermesError("delivery_timeout", `${client.describe} left task ${outcome.task_id} ${outcome.state}`, {
            data: { accepted: true },
          });
      }
    } finally {
      client.close();
    }
  }
}
