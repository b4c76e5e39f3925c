import { DaemonState, isoTime } from "@hermes/common";
import type { GatewayStatus } from "@hermes/proto/hermes/v1/gateway";
import type { GatewayStatusSource } from "../api/grpc/gateway-service.js";
import { peerLinks } from "../app/peers/peer-directory.js";
import type { Foundation } from "./foundation.js";
import type { Services } from "./services.js";
import { VERSION } from "./version.js";

/** The running gateway's state (DaemonState), and `gateway status` from it. */
export class GatewayState extends DaemonState implements GatewayStatusSource {
  constructor(
    private readonly f: Foundation,
    private readonly services: Services,
  ) {
    super(f.clock);
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
      grpc_address: this.grpcAddress,
      http_address: this.httpAddress,
      control_socket: f.home.controlSocket,
      started_at: isoTime(this.startedAt),
      uptime_seconds: this.uptimeSeconds,
      profiles: services.profiles.names().length,
      rooms: services.rooms.count(),
      peers: peerLinks(services.config),
      relay: services.relay?.status() ?? { url: "", connection: "", state: "disabled", roster_epoch: 0 },
    };
  }
}
