import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import { HermesError, PeerChannels } from "@hermes/common";
import { isDeliveryReason } from "@hermes/contract";
import type { DeliveryEnvelope } from "@hermes/contract/envelope";
import { type DeliverReply, DeliveryServiceClient } from "@hermes/proto/hermes/v1/delivery";
import type { PeerDirectory } from "../../peers/app/peer-directory.js";
import type { Receipt } from "../core/receipt.js";
import type { Route } from "../core/targets.js";
import { receiptFromWire } from "./receipt-wire.js";

export interface TransportOptions {
  /** The sender's display name, for the attribution prefix on the target. */
  sender_name: string;
  signal?: AbortSignal | undefined;
}

/**
 * How a delivery reaches a target on another gateway, by route kind (mail to a local bot goes
 * straight to the ingress machine, in the same commit as its outbox row). `deliver` resolves with
 * the target's receipt once the delivery has ended there (the target applies the retry rule), or
 * rejects with a typed error when the target could not be reached (unavailable, timeout,
 * runtime_offline, …), which the sender's outbox records as a delivery reason (attemptFailure)
 * under the single-retry rule. Re-sending the same envelope is always safe: the target's ingress is
 * idempotent by delivery id.
 */
export interface DeliveryTransport {
  deliver(route: Route, envelope: DeliveryEnvelope, options: TransportOptions): Promise<Receipt>;
  close?(): void;
}

/** Relay routes arrive with the relay client; until one is connected they fail as runtime_offline. */
export class NoRelayTransport implements DeliveryTransport {
  deliver(route: Route): Promise<Receipt> {
    return Promise.reject(
      new HermesError("runtime_offline", `no relay is connected, so ${route.target} cannot be reached; configure relay.url and restart`),
    );
  }
}

/**
 * `<peer>/<profile>` over real gRPC: DeliveryService.Deliver on the peer's URL with its key. The call
 * waits for the outcome on the peer (bounded by `timeoutMs`, then delivery_timeout).
 */
export class PeerTransport implements DeliveryTransport {
  private readonly channels: PeerChannels;

  constructor(
    peers: PeerDirectory,
    private readonly timeoutMs: number,
  ) {
    this.channels = new PeerChannels(peers);
  }

  async deliver(route: Route, envelope: DeliveryEnvelope, options: TransportOptions): Promise<Receipt> {
    if (route.kind !== "peer") throw new HermesError("internal", `peer transport got a ${route.kind} route`);
    const channel = this.channels.get(route.peer);
    const client = channel.client(DeliveryServiceClient);
    let reply: DeliverReply;
    try {
      reply = await channel.unary(
        client,
        client.deliver,
        { envelope, target_profile: route.profile, sender_name: options.sender_name },
        { timeoutMs: this.timeoutMs, signal: options.signal },
      );
    } catch (err) {
      throw this.transportError(route.peer, err as HermesError);
    }
    return receiptFromWire(reply.receipt, "the peer");
  }

  /**
   * A failed call, worded for the sender's receipt: the peer named once, the peer's own reason kept
   * (the outbox records it through attemptFailure, whose deliveryReasonFor decides the delivery reason).
   */
  private transportError(peer: string, e: HermesError): HermesError {
    const where = `peer ${peer}`;
    // What the peer itself said, without the channel's naming (the outbox names the peer once).
    const said = e.cause instanceof HermesError ? e.cause : e;
    if (isDeliveryReason(e.reason)) return new HermesError(e.reason, `${where}: ${said.message}`, { data: said.data, cause: e });
    if ((said.cause as Partial<ServiceError> | undefined)?.code === GrpcStatus.DEADLINE_EXCEEDED) {
      return new HermesError("timeout", `${where} did not finish within ${Math.round(this.timeoutMs / 1000)} s`, { cause: e });
    }
    switch (e.reason) {
      case "unavailable":
        return new HermesError("unavailable", `${where} is unreachable: ${said.message}`, { cause: e });
      case "unauthenticated":
        // The channel's text: which key was refused, and how to set the right one.
        return e;
      default:
        return new HermesError(e.reason, `${where}: ${said.message} [${e.reason}]`, {
          data: { peer_reason: e.reason, ...said.data },
          cause: e,
        });
    }
  }

  close(): void {
    this.channels.close();
  }
}
