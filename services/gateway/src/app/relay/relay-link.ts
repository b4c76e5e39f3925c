import type { Clock, Logger } from "@hermes/common";
import type { RelayLink as GatewayRelayLink } from "@hermes/proto/hermes/v1/gateway";
import type { RosterBot } from "@hermes/proto/hermes/v1/relay";
import type { ChatService } from "../chat.js";
import type { DeliveryService } from "../delivery/delivery-service.js";
import { receiptToWire } from "../delivery/receipt-wire.js";
import { peerDirectory } from "../peers/peer-directory.js";
import type { ProfileService } from "../profiles.js";
import { GrpcRoomSourceFactory, type RoomSourceFactory } from "../rooms/room-source.js";
import { RelayClient } from "./relay-client.js";
import { RelayAwareRoomSourceFactory } from "./relay-room-source.js";
import { RelayTransport } from "./relay-transport.js";
import { TunnelClient } from "./tunnel-client.js";
import { TunnelHandlers } from "./tunnel-handlers.js";

export interface RelayLinkSettings {
  url: string;
  key?: string | undefined;
  /** The connection name; defaults to the gateway id. */
  connection?: string | undefined;
}

export interface RelayLinkDeps {
  settings: RelayLinkSettings;
  gatewayId: string;
  version: string;
  logger: Logger;
  clock: Clock;
  profiles: ProfileService;
  chat: ChatService;
  deliveries: DeliveryService;
  /** How long a relayed delivery may wait for its outcome (the peer timeout). */
  outcomeTimeoutMs: number;
  /** Test knobs. */
  keepaliveMs?: number;
  rosterCheckMs?: number;
}

/** The connection name this gateway uses at the relay: `relay.connection`, else its gateway id. */
export function relayConnectionName(settings: RelayLinkSettings | undefined, gatewayId: string): string {
  return settings?.connection || gatewayId;
}

/** This gateway's bots as the relay announces them: handle = profile name, with display name, title, description. */
export function localRosterBots(profiles: ProfileService, chat: ChatService): RosterBot[] {
  return profiles.names().map((name) => {
    try {
      const p = chat.modelConfig.forProfile(name).persona;
      return { handle: name, display_name: p.display_name, title: p.title, description: p.description };
    } catch {
      // A profile whose config does not validate still receives mail (its turns will say why).
      return { handle: name, display_name: name, title: "", description: "" };
    }
  });
}

/**
 * Everything the gateway has to do with its relay, wired together: the client (dial-out stream),
 * the delivery transport and remote roster handed to the delivery service, incoming deliveries
 * into the delivery ingress, and the tunnel (methods served here, calls made from here).
 */
export class RelayLink {
  readonly client: RelayClient;
  readonly transport: RelayTransport;
  readonly tunnelHandlers = new TunnelHandlers();
  readonly tunnel: TunnelClient;
  readonly connection: string;

  constructor(private readonly deps: RelayLinkDeps) {
    this.connection = relayConnectionName(deps.settings, deps.gatewayId);
    this.client = new RelayClient({
      url: deps.settings.url,
      key: deps.settings.key,
      connection: this.connection,
      gatewayId: deps.gatewayId,
      version: deps.version,
      logger: deps.logger.child({ relay: deps.settings.url }),
      clock: deps.clock,
      localBots: () => localRosterBots(deps.profiles, deps.chat),
      ingress: (deliver, signal) =>
        deps.deliveries.ingress
          .accept(deliver.envelope, { target_profile: deliver.target_profile, sender_name: deliver.sender_name, source: "relay", signal })
          .then(receiptToWire),
      tunnel: this.tunnelHandlers,
      onRoster: () => deps.deliveries.rosterChanged(),
      outcomeTimeoutMs: deps.outcomeTimeoutMs,
      ...(deps.keepaliveMs !== undefined ? { keepaliveMs: deps.keepaliveMs } : {}),
      ...(deps.rosterCheckMs !== undefined ? { rosterCheckMs: deps.rosterCheckMs } : {}),
    });
    this.transport = new RelayTransport(this.client);
    this.tunnel = new TunnelClient(
      () => this.client.grpc,
      deps.settings.key,
      undefined,
      (gatewayId) => this.client.remote.connectionOf(gatewayId),
    );
    deps.deliveries.useRelay(this.transport, this.client.remote);
  }

  start(): void {
    this.client.start();
  }

  /** Profiles were created, renamed or deleted: announce the new list. */
  rosterChanged(): void {
    this.client.rosterChanged();
  }

  /** The bots on other connections (what the Bot Chat roster lists next to the local ones). */
  remoteRoster() {
    return this.client.remote.entries();
  }

  /**
   * Where replicas pull rooms from: `relay://<connection>` through the tunnel, anything else
   * directly (a URL, or a registered peer).
   */
  roomSources(): RoomSourceFactory {
    const direct = new GrpcRoomSourceFactory(peerDirectory(this.deps.chat.modelConfig));
    return new RelayAwareRoomSourceFactory(() => this.tunnel, direct);
  }

  status(): GatewayRelayLink {
    return { url: this.deps.settings.url, connection: this.connection, state: this.client.state, roster_epoch: this.client.remote.epoch };
  }

  stop(): Promise<void> {
    return this.client.stop();
  }
}
