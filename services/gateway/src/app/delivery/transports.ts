import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import { authMetadata, clientCredentials, fromServiceError, HermesError, parseGrpcUrl } from "@hermes/common";
import { DeliveryServiceClient } from "@hermes/proto/hermes/v1/delivery";
import type { DeliveryEnvelope } from "../../core/delivery/envelope.js";
import { isDeliveryReason } from "../../core/delivery/reasons.js";
import type { Receipt } from "../../core/delivery/receipt.js";
import type { Route } from "../../core/delivery/targets.js";
import { type PeerDirectory, peerKeyName } from "../peers/peer-directory.js";
import type { DeliveryIngress } from "./ingress.js";
import { receiptFromWire } from "./receipt-wire.js";

export interface TransportOptions {
  /** The sender's display name, for the attribution prefix on the target. */
  sender_name: string;
  /** Called when the target reports progress (claimed); optional for transports that cannot. */
  onProgress?: ((receipt: Receipt) => void) | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * How a delivery reaches its target, by route kind. `deliver` resolves with the target's receipt
 * once the delivery has ended there (the target applies the retry rule), or rejects with a typed
 * error when the target could not be reached (runtime_offline, delivery_timeout, …), which the
 * sender's outbox treats under the single-retry rule. Re-sending the same envelope is always safe:
 * the target's ingress is idempotent by delivery id.
 */
export interface DeliveryTransport {
  deliver(route: Route, envelope: DeliveryEnvelope, options: TransportOptions): Promise<Receipt>;
  close?(): void;
}

/** Mail between two bots of this gateway: straight into the ingress. */
export class LocalTransport implements DeliveryTransport {
  constructor(private readonly ingress: DeliveryIngress) {}

  deliver(route: Route, envelope: DeliveryEnvelope, options: TransportOptions): Promise<Receipt> {
    if (route.kind !== "local") return Promise.reject(new HermesError("internal", `local transport got a ${route.kind} route`));
    return this.ingress.accept(envelope, {
      target_profile: route.profile,
      sender_name: options.sender_name,
      source: "local",
      onProgress: options.onProgress,
      signal: options.signal,
    });
  }
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
  private readonly clients = new Map<string, DeliveryServiceClient>();

  constructor(
    private readonly peers: PeerDirectory,
    private readonly timeoutMs: number,
  ) {}

  private client(url: string): DeliveryServiceClient {
    let client = this.clients.get(url);
    if (!client) {
      const { target, tls } = parseGrpcUrl(url);
      client = new DeliveryServiceClient(target, clientCredentials(tls), { "grpc.max_receive_message_length": 8 * 1024 * 1024 });
      this.clients.set(url, client);
    }
    return client;
  }

  deliver(route: Route, envelope: DeliveryEnvelope, options: TransportOptions): Promise<Receipt> {
    if (route.kind !== "peer") return Promise.reject(new HermesError("internal", `peer transport got a ${route.kind} route`));
    const url = this.peers.url(route.peer);
    if (!url) {
      return Promise.reject(
        new HermesError(
          "missing_config",
          `peer ${route.peer} is not registered: add it with hermes peer add ${route.peer} --url … --key …`,
        ),
      );
    }
    const key = this.peers.key(route.peer);
    if (!key) {
      return Promise.reject(
        new HermesError("missing_config", `no key for peer ${route.peer}: set ${peerKeyName(route.peer)} in HERMES_HOME/.env`),
      );
    }
    let client: DeliveryServiceClient;
    try {
      client = this.client(url);
    } catch (err) {
      return Promise.reject(new HermesError("missing_config", `peer ${route.peer} has a bad url: ${(err as Error).message}`));
    }
    return new Promise<Receipt>((resolve, reject) => {
      const call = client.deliver(
        { envelope, target_profile: route.profile, sender_name: options.sender_name },
        authMetadata(key),
        { deadline: new Date(Date.now() + this.timeoutMs) },
        (err: ServiceError | null, reply) => {
          options.signal?.removeEventListener("abort", onAbort);
          if (err) reject(this.transportError(route, err));
          else {
            try {
              resolve(receiptFromWire(reply?.receipt, "the peer"));
            } catch (e) {
              reject(e);
            }
          }
        },
      );
      const onAbort = () => call.cancel();
      options.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** A failed call, as the delivery reason the sender's outbox records (the peer's own reason when it sent one). */
  private transportError(route: Route, err: ServiceError): HermesError {
    const e = fromServiceError(err);
    const where = `peer ${route.kind === "peer" ? route.peer : route.target}`;
    if (isDeliveryReason(e.reason)) return new HermesError(e.reason, `${where}: ${e.message}`, { data: e.data, cause: err });
    if (err.code === GrpcStatus.DEADLINE_EXCEEDED) {
      return new HermesError("delivery_timeout", `${where} did not finish within ${Math.round(this.timeoutMs / 1000)} s`, { cause: err });
    }
    if (e.reason === "unavailable")
      return new HermesError("runtime_offline", `${where} is unreachable: ${err.details || err.message}`, { cause: err });
    if (e.reason === "unauthenticated") {
      return new HermesError(
        "provider_auth_or_access",
        `${where} refused our key (${peerKeyName(route.kind === "peer" ? route.peer : "")}): ${e.message}`,
        { cause: err },
      );
    }
    return new HermesError("unknown", `${where}: ${e.message} [${e.reason}]`, { data: { peer_reason: e.reason, ...e.data }, cause: err });
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
