import { type Cleanup, isoTime } from "@hermes/common";
import { registerMemberTurnTunnel, registerRoomTunnel } from "../api/tunnel/room-tunnel.js";
import { BotMetadata } from "../app/botmode/bot-metadata.js";
import { ChatService } from "../app/chat.js";
import { DeliveryService } from "../app/delivery/delivery-service.js";
import { DeliveryWorker } from "../app/delivery/delivery-worker.js";
import { DeliveryRoster } from "../app/delivery/roster.js";
import { ModelConfigSource } from "../app/model-config.js";
import { type PeerDirectory, peerDirectory } from "../app/peers/peer-directory.js";
import { PeerRuns } from "../app/peers/peer-runs.js";
import { ProfileService } from "../app/profiles.js";
import { RelayLink, RelayRoutes } from "../app/relay/relay-link.js";
import { TunnelHandlers } from "../app/relay/tunnel-handlers.js";
import { DiscussionDriver } from "../app/rooms/discussion-driver.js";
import { MemberTurnRouter } from "../app/rooms/member-turn-routes.js";
import { LocalMemberTurns, MemberTurnServer } from "../app/rooms/member-turns.js";
import { CoordinatedRooms } from "../app/rooms/quorum/coordinated-rooms.js";
import { QuorumAcks } from "../app/rooms/quorum/quorum-acks.js";
import { Replicator } from "../app/rooms/replicator.js";
import { RoomLog } from "../app/rooms/room-log.js";
import { GrpcRoomSourceFactory } from "../app/rooms/room-source.js";
import { RoomsService } from "../app/rooms/rooms-service.js";
import { localTimeZone, RoutineService } from "../app/routines/routine-service.js";
import { SessionService } from "../app/sessions.js";
import type { TelegramBot } from "../app/telegram/telegram-bot.js";
import { DeliveriesStore } from "../store/deliveries-store.js";
import { RoutinesStore } from "../store/routines-store.js";
import { RunsStore } from "../store/runs-store.js";
import type { Foundation } from "./foundation.js";
import { telegramBot } from "./platforms.js";
import { VERSION } from "./version.js";

/**
 * The services of a gateway, built in the order they depend on each other (each one complete when
 * it is built; later ones subscribe to the events of earlier ones):
 *
 *   profiles → relay routes → deliveries (roster, machines, group commit) → turn engine → peer runs
 *   → room log, discussion driver, rooms → relay link → delivery worker → the Telegram bot
 *   → Bot Mode metadata, routines
 *
 * The cycles of the domain are cut at their seams: a turn's message_agent and the relay link's
 * incoming mail only need the delivery service (its machines and commit), whose work (turns in the
 * engine, transports, notifications) the delivery worker, built last, subscribes to; the relay's channel, roster
 * and tunnel exist before the services that use them, its stream after the ones it serves; the
 * discussion driver is built on the room log and subscribes to it, and the rooms service asks it
 * for status.
 */
export interface Services {
  sessions: SessionService;
  profiles: ProfileService;
  config: ModelConfigSource;
  peers: PeerDirectory;
  chat: ChatService;
  deliveries: DeliveryService;
  deliveryWorker: DeliveryWorker;
  peerRuns: PeerRuns;
  rooms: RoomsService;
  discussions: DiscussionDriver;
  memberTurns: MemberTurnServer;
  relay: RelayLink | undefined;
  /** Quorum rooms in the coordinated mesh (with a coordinator). */
  coordination: CoordinatedRooms | undefined;
  quorum: QuorumAcks | undefined;
  telegram: TelegramBot | undefined;
  metadata: BotMetadata;
  routines: RoutineService;
}

/** Profiles (with the default one and its Bot Chat), sessions, the effective config and the peers in it. */
function profileServices(f: Foundation) {
  const sessions = new SessionService(f.db, f.routing, f.clock);
  const profiles = new ProfileService(f.home, f.db, f.profileDbs, sessions, f.routing, f.clock);
  profiles.ensureDefault();
  const config = new ModelConfigSource(f.home, f.env);
  return { sessions, profiles, config, peers: peerDirectory(config) };
}

type ProfileServices = ReturnType<typeof profileServices>;

/** The relay's channel, roster and tunnel, when relay.url is configured. */
function relayRoutes(f: Foundation, cleanup: Cleanup): RelayRoutes | undefined {
  if (!f.settings.relay) return undefined;
  const routes = new RelayRoutes(f.settings.relay, f.id);
  cleanup.push(() => routes.channel.close());
  return routes;
}

/** The turn engine, offering message_agent through the delivery service (built before it) in canonical Bot Chats. */
function turnEngine(f: Foundation, p: ProfileServices, deliveries: DeliveryService): ChatService {
  return new ChatService({
    db: f.db,
    profileDbs: f.profileDbs,
    profiles: p.profiles,
    sessions: p.sessions,
    clock: f.clock,
    logger: f.logger,
    gatewayId: f.id,
    modelConfig: p.config,
    messaging: deliveries,
    agents: f.settings.agents,
    registry: f.metrics.registry,
  });
}

/**
 * Rooms and discussions: the quorum acks (with a coordinator), the log, the replicator, the
 * coordinated rooms, the driver of the rooms led here, the room API, the member side of remote turns.
 */
function roomServices(f: Foundation, p: ProfileServices, chat: ChatService, relay: RelayRoutes | undefined) {
  const logger = f.logger.child({ module: "rooms" });
  const coordinator = f.coordinator;
  const coordinated = f.settings.coordinator;
  const quorum =
    coordinator && coordinated
      ? new QuorumAcks({
          coordinator,
          logger: logger.child({ module: "quorum" }),
          registry: f.metrics.registry,
          maxLag: coordinated.maxLag,
        })
      : undefined;
  const log = new RoomLog({
    db: f.db,
    gatewayId: f.id,
    clock: f.clock,
    logger,
    registry: f.metrics.registry,
    maxAppendsPerCommit: f.settings.rooms.maxAppendsPerCommit,
    commitLingerMs: f.settings.rooms.commitLingerMs,
    quorum,
  });
  const direct = new GrpcRoomSourceFactory(p.peers);
  const replicator = new Replicator({
    store: log.store,
    sources: relay ? relay.roomSources(direct) : direct,
    metrics: log.metrics,
    logger,
    now: () => isoTime(f.clock.now()),
    applied: (roomId, rewritten, appended) => log.changes.notify(roomId, rewritten, appended),
    observe: (roomId, authority) => log.observe(roomId, authority),
    pageLimit: f.settings.rooms.replicationPageLimit,
    maxBackoffMs: f.settings.rooms.followMaxBackoffMs,
  });
  const coordination =
    coordinator && coordinated && quorum
      ? new CoordinatedRooms({
          coordinator,
          log,
          replicator,
          acks: quorum,
          meshKey: f.settings.meshKey,
          leaseTtlMs: coordinated.leaseTtlSeconds * 1000,
          logger: logger.child({ module: "quorum" }),
          registry: f.metrics.registry,
        })
      : undefined;
  // Member turns run here (local profiles, and for other gateways' rooms) or on the member's
  // gateway (a peer named after it, else the relay).
  const discussionsLogger = f.logger.child({ module: "discussions" });
  const localTurns = new LocalMemberTurns({
    chat,
    profiles: p.profiles,
    sessions: p.sessions,
    profileDbs: f.profileDbs,
    clock: f.clock,
    logger: discussionsLogger,
  });
  const discussions = new DiscussionDriver({
    log,
    members: new MemberTurnRouter({ gatewayId: f.id, local: localTurns, peers: p.peers, tunnel: relay?.tunnel }),
    gatewayId: f.id,
    clock: f.clock,
    logger: discussionsLogger,
    registry: f.metrics.registry,
    settings: { turnTimeoutMs: f.settings.delivery.turnTimeoutMs },
  });
  const rooms = new RoomsService({
    log,
    replicator,
    gatewayId: f.id,
    clock: f.clock,
    logger,
    settings: f.settings.rooms,
    driver: discussions,
    coordination,
  });
  const memberTurns = new MemberTurnServer({
    local: localTurns,
    gatewayId: f.id,
    observe: (roomId, authority) => rooms.observe(roomId, authority),
    logger: discussionsLogger,
  });
  return { rooms, discussions, memberTurns, coordination, quorum };
}

/** Who can be messaged: local profiles, peers, the relay's bots. */
function deliveryRoster(f: Foundation, p: ProfileServices, routes: RelayRoutes | undefined): DeliveryRoster {
  return new DeliveryRoster({
    db: f.db,
    profiles: p.profiles,
    config: p.config,
    clock: f.clock,
    remote: routes?.remote,
    relayConnection: routes?.connection,
  });
}

/** The delivery machines and their group commit (what message_agent and relayed mail need). */
function deliveryService(f: Foundation, p: ProfileServices, roster: DeliveryRoster): DeliveryService {
  return new DeliveryService({
    store: new DeliveriesStore(f.db),
    profiles: p.profiles,
    sessions: p.sessions,
    roster,
    flushRouting: () => f.routing.flush(),
    clock: f.clock,
    logger: f.logger,
    gatewayId: f.id,
    settings: f.settings.delivery,
    registry: f.metrics.registry,
  });
}

function peerRuns(f: Foundation, p: ProfileServices, chat: ChatService): PeerRuns {
  return new PeerRuns({
    store: new RunsStore(f.db),
    profiles: p.profiles,
    sessions: p.sessions,
    chat,
    clock: f.clock,
    logger: f.logger.child({ module: "peers" }),
    registry: f.metrics.registry,
    settings: { turnTimeoutMs: f.settings.delivery.turnTimeoutMs },
  });
}

/** The relay's stream: it serves the rooms and member turns of this gateway through the tunnel and feeds the ingress. */
function relayLink(
  f: Foundation,
  p: ProfileServices,
  routes: RelayRoutes,
  deliveries: DeliveryService,
  served: { rooms: RoomsService; memberTurns: MemberTurnServer },
): RelayLink {
  const tunnelHandlers = new TunnelHandlers();
  registerRoomTunnel(tunnelHandlers, served.rooms);
  registerMemberTurnTunnel(tunnelHandlers, served.memberTurns);
  return new RelayLink({
    routes,
    gatewayId: f.id,
    version: VERSION,
    logger: f.logger.child({ module: "relay" }),
    clock: f.clock,
    profiles: p.profiles,
    config: p.config,
    deliveries,
    tunnelHandlers,
    outcomeTimeoutMs: f.settings.delivery.peerTimeoutMs,
  });
}

/** What does the deliveries' work: turns in the engine, the transports (the relay's included), notifications. */
function deliveryWorker(
  f: Foundation,
  p: ProfileServices,
  chat: ChatService,
  deliveries: DeliveryService,
  roster: DeliveryRoster,
  relay: RelayLink | undefined,
): DeliveryWorker {
  return new DeliveryWorker({
    deliveries,
    chat,
    sessions: p.sessions,
    profileDbs: f.profileDbs,
    roster,
    peers: p.peers,
    relay: relay?.transport,
    clock: f.clock,
    logger: f.logger,
    settings: f.settings.delivery,
  });
}

/** Bot Mode: the roster metadata and sections, and the routines whose runs are turns in Bot Chats. */
function botModeServices(f: Foundation, p: ProfileServices, chat: ChatService) {
  const metadata = new BotMetadata(f.home, p.profiles);
  const routines = new RoutineService({
    store: new RoutinesStore(f.db),
    profiles: p.profiles,
    clock: f.clock,
    logger: f.logger.child({ module: "routines" }),
    timeZone: localTimeZone(),
    runner: { chat, sessions: p.sessions, turnTimeoutMs: f.settings.delivery.turnTimeoutMs },
    registry: f.metrics.registry,
  });
  return { metadata, routines };
}

/** Builds every service of the gateway (nothing runs yet: `Gateway.start` starts them once the servers listen). */
export function buildServices(f: Foundation, cleanup: Cleanup): Services {
  const p = profileServices(f);
  const routes = relayRoutes(f, cleanup);
  const roster = deliveryRoster(f, p, routes);
  const deliveries = deliveryService(f, p, roster);
  const chat = turnEngine(f, p, deliveries);
  const runs = peerRuns(f, p, chat);
  const { rooms, discussions, memberTurns, coordination, quorum } = roomServices(f, p, chat, routes);
  cleanup.push(() => void rooms.stop());
  const relay = routes ? relayLink(f, p, routes, deliveries, { rooms, memberTurns }) : undefined;
  if (relay) cleanup.push(() => void relay.stop());
  const worker = deliveryWorker(f, p, chat, deliveries, roster, relay);
  const telegram = telegramBot(f, { ...p, chat });
  const botMode = botModeServices(f, p, chat);
  return {
    ...p,
    chat,
    deliveries,
    deliveryWorker: worker,
    peerRuns: runs,
    rooms,
    discussions,
    memberTurns,
    relay,
    coordination,
    quorum,
    telegram,
    ...botMode,
  };
}
