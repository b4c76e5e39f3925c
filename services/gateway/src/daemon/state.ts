import { isoTime } from "@hermes/common";
import type { GatewayStatus } from "@hermes/proto/hermes/v1/gateway";
import type { GatewayStatusSource } from "../api/grpc/gateway-service.js";
import { peerLinks } from "../app/peers/peer-directory.js";
import type { Foundation } from "./foundation.js";
import type { Services } from "./services.js";
import { VERSION } from "./version.js";

/**
 * What a running gateway knows about itself: when it started, where it listens (known once its
 * servers are bound), whether it is ready. `gateway status` (the gRPC handler and `Gateway.status`)
 * and `/readyz` read it; the start sequence fills it in and the stop sequence clears `ready` first.
 */
export class GatewayState implements GatewayStatusSource {
  readonly startedAt: number;
  ready = false;
  /** Set once both gRPC servers and the HTTP port listen. */
  listening: { grpc: string; http: string } | undefined;

  constructor(
    private readonly f: Foundation,
    private readonly services: Services,
  ) {
    this.startedAt = f.clock.now();
  }

  /** Ready, and writes work (a full disk makes the gateway not ready until a write commits again). */
  get serving(): boolean {
    return this.ready && this.f.profileDbs.writeFailure() === undefined;
  }

  status(): GatewayStatus {
    const { f, services } = this;
    return {
      gateway_id: f.id,
      version: VERSION,
      home: f.home.root,
      grpc_address: this.listening?.grpc ?? "",
      http_address: this.listening?.http ?? "",
      control_socket: f.home.controlSocket,
      started_at: isoTime(this.startedAt),
      uptime_seconds: (f.clock.now() - this.startedAt) / 1000,
      profiles: services.profiles.names().length,
      rooms: services.rooms.count(),
      peers: peerLinks(services.config),
      relay: services.relay?.status() ?? { url: "", connection: "", state: "disabled", roster_epoch: 0 },
    };
  }
}
