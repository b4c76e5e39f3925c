import { type Clock, isoTime, type PeerChannel, PeerChannels, toHermesError } from "@hermes/common";
import { DEFAULT_PROFILE } from "@hermes/contract";
import { GatewayServiceClient, type GatewayStatus } from "@hermes/proto/hermes/v1/gateway";
import { type Room, RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { PeerDirectory } from "../../peers/app/peer-directory.js";
import type { RemoteRosterEntry } from "../../relay-link/app/remote-roster.js";
import type { RoomsService, RoomView } from "../../rooms/app/rooms-service.js";
import {
  assembleMeshStatus,
  type BotObservation,
  type CoordinatorView,
  type GatewayObservation,
  type MeshBot,
  type MeshObservations,
  type MeshStatus,
  meshBots,
  type RelayView,
  type RoomCopy,
} from "../core/mesh-status.js";

/** The coordinator, as the mesh view reads it (present only on gateways configured with one). */
export interface CoordinatorSource {
  status(): CoordinatorView;
}

export interface MeshObserverDeps {
  clock: Clock;
  /** This gateway's own status (what `gateway status` shows). */
  selfStatus(): GatewayStatus;
  rooms: RoomsService;
  profiles: ProfileService;
  /** Profiles with a turn running now. */
  activeProfiles(): Set<string>;
  peers: PeerDirectory;
  /** The registered peers (`bot_peers`): name and URL. */
  peerLinks(): { name: string; url: string }[];
  /** The relay's roster of the other connections, when this gateway has a relay. */
  relayRoster?: (() => readonly RemoteRosterEntry[]) | undefined;
  coordinator?: CoordinatorSource | undefined;
}

/** How long one observation serves (several consoles and a `status --watch` share it). */
const OBSERVATION_TTL_MS = 2_000;
/** Deadline of each call to a peer: an unreachable peer costs one status refresh this long at most. */
const PEER_CALL_TIMEOUT_MS = 3_000;

function copyOfView(r: RoomView, known_latest_seq: number | null, following: string | null): RoomCopy {
  return {
    room_id: r.room_id,
    name: r.name,
    role: r.role,
    authority: { gateway_id: r.authority_gateway_id, epoch: r.authority_epoch },
    stored_seq: r.latest_seq,
    known_latest_seq,
    safety_status: r.safety_status,
    safety_reason: r.safety_reason,
    fenced_by: r.fenced_by,
    demoted: r.demoted !== null,
    following,
    members: r.members.map((m) => ({ member_id: m.member_id, profile: m.profile, gateway_id: m.gateway_id })),
  };
}

function copyOfWire(r: Room): RoomCopy {
  return {
    room_id: r.room_id,
    name: r.name,
    role: r.role,
    authority: { gateway_id: r.authority_gateway_id, epoch: r.authority_epoch },
    stored_seq: r.latest_seq,
    known_latest_seq: null,
    safety_status: r.safety_status,
    safety_reason: r.safety_reason ?? null,
    fenced_by: r.fenced_by ? { gateway_id: r.fenced_by.gateway_id, epoch: r.fenced_by.epoch } : null,
    demoted: r.demoted !== undefined,
    following: null,
    members: r.members.map((m) => ({ member_id: m.member_id, profile: m.profile, gateway_id: m.gateway_id || undefined })),
  };
}

/**
 * Observes the mesh from this gateway: itself, each registered peer (its status, rooms and bots
 * over gRPC with the peer's key), the gateways on the relay's roster (online or not, and their
 * bots) and the coordinator when there is one; `assembleMeshStatus` (core) makes the picture. An
 * observation is reused for a couple of seconds, so a console and `hermes status --watch` do not
 * multiply the calls to the peers.
 */
export class MeshObserver {
  private readonly channels: PeerChannels;
  private cached: { at: number; observations: Promise<MeshObservations> } | undefined;

  constructor(private readonly deps: MeshObserverDeps) {
    this.channels = new PeerChannels(deps.peers, { deadlineMs: PEER_CALL_TIMEOUT_MS });
  }

  async status(): Promise<MeshStatus> {
    return assembleMeshStatus(await this.observations());
  }

  async bots(): Promise<MeshBot[]> {
    return meshBots(await this.observations());
  }

  /** The current observations (shared by callers within OBSERVATION_TTL_MS); a failed one is not kept. */
  observations(): Promise<MeshObservations> {
    const now = this.deps.clock.now();
    if (this.cached && now - this.cached.at < OBSERVATION_TTL_MS) return this.cached.observations;
    const observations = this.observe();
    this.cached = { at: now, observations };
    observations.catch(() => {
      if (this.cached?.observations === observations) this.cached = undefined;
    });
    return observations;
  }

  /** Forgets the current observation (after an action that changes what it shows, such as a promote). */
  invalidate(): void {
    this.cached = undefined;
  }

  private async observe(): Promise<MeshObservations> {
    const { deps } = this;
    const self = this.observeSelf();
    const peers = await Promise.all(deps.peerLinks().map((p) => this.observePeer(p.name, p.url)));
    const relay = deps.selfStatus().relay;
    const relayView: RelayView | null =
      relay && relay.state !== "disabled"
        ? { url: relay.url, connection: relay.connection, state: relay.state, roster_epoch: relay.roster_epoch }
        : null;
    let coordinator: CoordinatorView | null = null;
    if (deps.coordinator) {
      try {
        coordinator = deps.coordinator.status();
      } catch (err) {
        coordinator = { endpoints: [], state: "unavailable", error: toHermesError(err).message };
      }
    }
    return {
      observed_at: isoTime(deps.clock.now()),
      self,
      others: [...peers, ...this.observeRelayRoster()],
      relay: relayView,
      coordinator,
    };
  }

  private observeSelf(): GatewayObservation {
    const { deps } = this;
    const status = deps.selfStatus();
    const rooms = deps.rooms.list({ limit: 500 }).rooms.map((r) => {
      if (r.role !== "replica") return copyOfView(r, r.latest_seq, null);
      const s = deps.rooms.replicaState(r.room_id);
      return copyOfView(r, s.latest_seq, s.following?.state ?? null);
    });
    const active = deps.activeProfiles();
    const bots: BotObservation[] = deps.profiles
      .list()
      .filter((p) => !p.is_default)
      .map((p) => ({
        handle: p.name,
        display_name: p.display_name,
        title: p.title,
        description: p.description,
        active: active.has(p.name),
      }));
    return {
      gateway_id: status.gateway_id,
      via: "self",
      peer: null,
      url: status.grpc_address ? `grpc://${status.grpc_address}` : null,
      http_address: status.http_address || null,
      reachable: true,
      error: null,
      version: status.version,
      uptime_seconds: status.uptime_seconds,
      relay_state: status.relay?.state ?? "disabled",
      rooms,
      bots,
    };
  }

  private async observePeer(name: string, url: string): Promise<GatewayObservation> {
    const unreachable = (error: string): GatewayObservation => ({
      gateway_id: name,
      via: "peer",
      peer: name,
      url,
      http_address: null,
      reachable: false,
      error,
      version: null,
      uptime_seconds: null,
      relay_state: null,
      rooms: null,
      bots: null,
    });
    try {
      const channel = this.channels.get(name);
      const gateway = channel.client(GatewayServiceClient);
      const rooms = channel.client(RoomServiceClient);
      const [status, list, profiles] = await Promise.all([
        channel.unary(gateway, gateway.status, {}),
        channel.unary(rooms, rooms.list, { limit: 500, offset: 0, include_disbanded: false }).catch(() => undefined),
        channel.unary(gateway, gateway.listProfiles, {}).catch(() => undefined),
      ]);
      return {
        gateway_id: status.gateway_id,
        via: "peer",
        peer: name,
        url,
        http_address: status.http_address || null,
        reachable: true,
        error: null,
        version: status.version,
        uptime_seconds: status.uptime_seconds,
        relay_state: status.relay?.state ?? "disabled",
        rooms: list ? await Promise.all(list.rooms.map((r) => this.peerCopy(channel, rooms, r))) : null,
        bots: profiles
          ? profiles.profiles
              .filter((p) => !p.is_default)
              .map((p) => ({ handle: p.name, display_name: p.display_name, title: p.title, description: p.description, active: null }))
          : null,
      };
    } catch (err) {
      return unreachable(toHermesError(err).message);
    }
  }

  /**
   * A peer's copy of a room; for a replica also its follower and the latest seq it heard of (its
   * ReplicaState), which the room list does not carry. Without that answer the copy says nothing
   * of them rather than fail the peer.
   */
  private async peerCopy(channel: PeerChannel, rooms: RoomServiceClient, r: Room): Promise<RoomCopy> {
    const copy = copyOfWire(r);
    if (r.role !== "replica") return copy;
    const s = await channel.unary(rooms, rooms.replicaState, { room_id: r.room_id }).catch(() => undefined);
    return s ? { ...copy, known_latest_seq: s.latest_seq, following: s.following?.state ?? null } : copy;
  }

  /** The gateways behind the relay's other connections, with their bots; reachable means online at the relay. */
  private observeRelayRoster(): GatewayObservation[] {
    const entries = this.deps.relayRoster?.() ?? [];
    const byGateway = new Map<string, RemoteRosterEntry[]>();
    for (const e of entries) {
      const id = e.gateway_id || e.connection;
      byGateway.set(id, [...(byGateway.get(id) ?? []), e]);
    }
    return [...byGateway].map(([gatewayId, bots]) => ({
      gateway_id: gatewayId,
      via: "relay" as const,
      peer: null,
      url: null,
      http_address: null,
      reachable: bots.some((b) => b.online),
      error: bots.some((b) => b.online) ? null : `offline at the relay (connection ${bots[0]!.connection})`,
      version: null,
      uptime_seconds: null,
      relay_state: bots.some((b) => b.online) ? "connected" : null,
      rooms: null,
      bots: bots
        .filter((b) => b.handle !== DEFAULT_PROFILE)
        .map((b) => ({ handle: b.handle, display_name: b.display_name, title: b.title, description: b.description, active: null })),
    }));
  }

  close(): void {
    this.channels.close();
  }
}
