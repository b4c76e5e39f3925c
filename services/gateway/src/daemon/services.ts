import { type Cleanup, isoTime } from "@hermes/common";
import { registerMemberTurnTunnel, registerRoomTunnel } from "../api/tunnel/room-tunnel.js";
import { BotMetadata } from "../app/botmode/bot-metadata.js";
import { ChatService } from "../app/chat.js";
import { DeliveryService, deliveryLanes } from "../app/delivery/delivery-service.js";
import { DeliveryIngress } from "../app/delivery/ingress.js";
import { Outbox } from "../app/delivery/outbox.js";
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
 *   profiles → relay routes → delivery roster, outbox → turn engine → delivery ingress → peer runs
 *   → room log, discussion driver, rooms → relay link → delivery service → the Telegram bot
 *   → Bot Mode metadata, routines
 *
 * The cycles of the domain are cut at their seams: a turn's message_agent only needs the outbox
 * (a commit), which the delivery service, built last, subscribes to; the relay's channel, roster
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

/** The turn engine, offering message_agent through the outbox (built before it) in canonical Bot Chats. */
function turnEngine(f: Foundation, p: ProfileServices, outbox: Outbox): ChatService {
  return new ChatService({
    db: f.db,
    profileDbs: f.profileDbs,
    profiles: p.profiles,
    sessions: p.sessions,
    clock: f.clock,
    logger: f.logger,
    gatewayId: f.id,
    modelConfig: p.config,
    messaging: outbox,
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
    quorum,
  });
  const direct = new GrpcRoomSourceFactory(p.peers);
  const replicator = new Replicator({
    store: log.store,
    sources: relay ? relay.roomSources(direct) : direct,
    metrics: log.metrics,
    logger,
    now: () => isoTime(f.clock.now()),
    applied: (roomId) => log.changes.notify(roomId),
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

/** The sending half of deliveries, which the turn engine needs: who can be messaged, and the outbox. */
function deliveryFront(f: Foundation, p: ProfileServices, routes: RelayRoutes | undefined) {
  const store = new DeliveriesStore(f.db);
  const roster = new DeliveryRoster({
    db: f.db,
    profiles: p.profiles,
    config: p.config,
    clock: f.clock,
    remote: routes?.remote,
    relayConnection: routes?.connection,
  });
  const outbox = new Outbox({
    store,
    profiles: p.profiles,
    roster,
    clock: f.clock,
    logger: f.logger,
    gatewayId: f.id,
    settings: f.settings.delivery,
  });
  return { store, roster, outbox };
}

type DeliveryFront = ReturnType<typeof deliveryFront>;

/** The target half: mail for this gateway's bots (local, from peers, from the relay) runs through the turn engine. */
function deliveryIngress(f: Foundation, p: ProfileServices, front: DeliveryFront, chat: ChatService) {
  const lanes = deliveryLanes(f.settings.delivery, f.metrics.registry);
  const ingress = new DeliveryIngress({
    store: front.store,
    profiles: p.profiles,
    sessions: p.sessions,
    chat,
    clock: f.clock,
    logger: f.logger,
    settings: f.settings.delivery,
    metrics: lanes.metrics,
    lanes: lanes.ingress,
  });
  return { lanes, ingress };
}

type DeliveryIngressParts = ReturnType<typeof deliveryIngress>;

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
  ingress: DeliveryIngress,
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
    ingress,
    tunnelHandlers,
    outcomeTimeoutMs: f.settings.delivery.peerTimeoutMs,
  });
}

/** What moves the outbox's mail (built last: it needs every transport, the relay's included). */
function deliveryService(
  f: Foundation,
  p: ProfileServices,
  chat: ChatService,
  front: DeliveryFront,
  target: DeliveryIngressParts,
  relay: RelayLink | undefined,
): DeliveryService {
  return new DeliveryService({
    ...front,
    ...target,
    profileDbs: f.profileDbs,
    profiles: p.profiles,
    sessions: p.sessions,
    chat,
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
  const front = deliveryFront(f, p, routes);
  const chat = turnEngine(f, p, front.outbox);
  const target = deliveryIngress(f, p, front, chat);
  const runs = peerRuns(f, p, chat);
  const { rooms, discussions, memberTurns, coordination, quorum } = roomServices(f, p, chat, routes);
  cleanup.push(() => void rooms.stop());
  const relay = routes ? relayLink(f, p, routes, target.ingress, { rooms, memberTurns }) : undefined;
  if (relay) cleanup.push(() => void relay.stop());
  const deliveries = deliveryService(f, p, chat, front, target, relay);
  const telegram = telegramBot(f, { ...p, chat });
  const botMode = botModeServices(f, p, chat);
  return { ...p, chat, deliveries, peerRuns: runs, rooms, discussions, memberTurns, relay, coordination, quorum, telegram, ...botMode };
}
