import type { Clock, Logger, PeerChannel } from "@hermes/common";
import type { RelayLink as GatewayRelayLink } from "@hermes/proto/hermes/v1/gateway";
import type { RosterBot } from "@hermes/proto/hermes/v1/relay";
import type { ModelConfigSource } from "../../agents/app/model-config.js";
import type { DeliveryService } from "../../delivery/app/delivery-service.js";
import { receiptToWire } from "../../delivery/app/receipt-wire.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { RoomSourceFactory } from "../../rooms/app/room-source.js";
import { RelayClient, relayChannel } from "./relay-client.js";
import { RelayAwareRoomSourceFactory } from "./relay-room-source.js";
import { RelayTransport } from "./relay-transport.js";
import { RemoteRoster } from "./remote-roster.js";
import { TunnelClient } from "./tunnel-client.js";
import type { TunnelHandlers } from "./tunnel-handlers.js";

export interface RelayLinkSettings {
  url: string;
  key?: string | undefined;
  /** The connection name; defaults to the gateway id. */
  connection?: string | undefined;
}

/** The connection name this gateway uses at the relay: `relay.connection`, else its gateway id. */
export function relayConnectionName(settings: RelayLinkSettings | undefined, gatewayId: string): string {
  return settings?.connection || gatewayId;
}

/** This gateway's bots as the relay announces them: handle = profile name, with display name, title, description. */
export function localRosterBots(profiles: ProfileService, config: ModelConfigSource): RosterBot[] {
  return profiles.names().map((name) => {
    try {
      const p = config.forProfile(name).persona;
      return { handle: name, display_name: p.display_name, title: p.title, description: p.description };
    } catch {
      // A profile whose config does not validate still receives mail (its turns will say why).
      return { handle: name, display_name: name, title: "", description: "" };
    }
  });
}

/**
 * What of the relay needs only its channel, so it exists before the services that use it: the
 * roster of the bots on the other connections (read by the delivery roster and by room
 * authorities), tunnel calls to other gateways (room pulls, member turns). The stream that fills
 * the roster and serves this gateway's side is the RelayLink, built once those services exist.
 */
export class RelayRoutes {
  readonly channel: PeerChannel;
  readonly remote = new RemoteRoster();
  readonly tunnel: TunnelClient;
  readonly connection: string;

  constructor(
    readonly settings: RelayLinkSettings,
    gatewayId: string,
  ) {
    this.connection = relayConnectionName(settings, gatewayId);
    this.channel = relayChannel(settings);
    this.tunnel = new TunnelClient(this.channel, (id) => this.remote.connectionOf(id));
  }

  /** Where replicas pull rooms from: `relay://<connection>` through the tunnel, anything else `direct`. */
  roomSources(direct: RoomSourceFactory): RoomSourceFactory {
    return new RelayAwareRoomSourceFactory(this.tunnel, direct);
  }
}

export interface RelayLinkDeps {
  routes: RelayRoutes;
  gatewayId: string;
  version: string;
  logger: Logger;
  clock: Clock;
  profiles: ProfileService;
  config: ModelConfigSource;
  /** Deliveries the relay forwards here are accepted by the delivery service (its ingress machine). */
  deliveries: Pick<DeliveryService, "accept">;
  /** The methods this gateway serves to others through the tunnel. */
  tunnelHandlers: TunnelHandlers;
  /** How long a relayed delivery may wait for its outcome (the peer timeout). */
  outcomeTimeoutMs: number;
}

/**
 * The gateway's live link to its relay: the client (dial-out stream) that announces this gateway's
 * bots (again whenever a profile changes), carries deliveries both ways (incoming ones into the
 * ingress) and serves tunnel calls; and the delivery transport for `<handle>@<connection>`.
 */
export class RelayLink {
  readonly client: RelayClient;
  readonly transport: RelayTransport;
  readonly tunnel: TunnelClient;
  readonly tunnelHandlers: TunnelHandlers;
  readonly connection: string;

  constructor(private readonly deps: RelayLinkDeps) {
    const { routes } = deps;
    this.connection = routes.connection;
    this.tunnel = routes.tunnel;
    this.tunnelHandlers = deps.tunnelHandlers;
    this.client = new RelayClient({
      channel: routes.channel,
      remote: routes.remote,
      connection: this.connection,
      gatewayId: deps.gatewayId,
      version: deps.version,
      logger: deps.logger.child({ relay: routes.settings.url }),
      clock: deps.clock,
      localBots: () => localRosterBots(deps.profiles, deps.config),
      ingress: (deliver, signal) =>
        deps.deliveries
          .accept(deliver.envelope, { target_profile: deliver.target_profile, sender_name: deliver.sender_name, source: "relay", signal })
          .then(receiptToWire),
      tunnel: deps.tunnelHandlers,
      outcomeTimeoutMs: deps.outcomeTimeoutMs,
    });
    this.transport = new RelayTransport(this.client);
    // Profiles were created, renamed or deleted: announce the new list.
    deps.profiles.events.on("changed", () => this.client.rosterChanged());
  }

  start(): void {
    this.client.start();
  }

  /** The bots on other connections (what the Bot Chat roster lists next to the local ones). */
  remoteRoster() {
    return this.client.remote.entries();
  }

  status(): GatewayRelayLink {
    return {
      url: this.deps.routes.settings.url,
      connection: this.connection,
      state: this.client.state,
      roster_epoch: this.client.remote.epoch,
    };
  }

  stop(): Promise<void> {
    return this.client.stop();
  }
}
