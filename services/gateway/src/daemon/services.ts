import { type Cleanup, isoTime } from "@hermes/common";
import { a2aPeerDirectory } from "../a2a/app/a2a-peer-client.js";
import { A2aTasks } from "../a2a/app/a2a-tasks.js";
import { A2aPeerTransport } from "../a2a/app/a2a-transport.js";
import { A2aTasksStore } from "../a2a/store/tasks-store.js";
import { ChatService } from "../agents/app/chat.js";
import { ModelConfigSource } from "../agents/app/model-config.js";
import { BotMetadata } from "../botmode/app/bot-metadata.js";
import { DeliveryService } from "../delivery/app/delivery-service.js";
import { DeliveryWorker } from "../delivery/app/delivery-worker.js";
import { DeliveryRoster } from "../delivery/app/roster.js";
import { DeliveriesStore } from "../delivery/store/deliveries-store.js";
import { ProfileService } from "../identity/app/profiles.js";
import { SessionService } from "../identity/app/sessions.js";
import { type PeerDirectory, peerDirectory } from "../peers/app/peer-directory.js";
import { PeerRuns } from "../peers/app/peer-runs.js";
import { RunsStore } from "../peers/store/runs-store.js";
import type { TelegramBot } from "../platforms/telegram/app/telegram-bot.js";
import { RelayLink, RelayRoutes } from "../relay-link/app/relay-link.js";
import { TunnelHandlers } from "../relay-link/app/tunnel-handlers.js";
import { registerMemberTurnTunnel, registerRoomTunnel } from "../rooms/api/room-tunnel.js";
import { DiscussionDriver } from "../rooms/app/discussion-driver.js";
import { MemberTurnRouter } from "../rooms/app/member-turn-routes.js";
import { LocalMemberTurns, MemberTurnServer } from "../rooms/app/member-turns.js";
import { CoordinatedRooms } from "../rooms/app/quorum/coordinated-rooms.js";
import { QuorumAcks } from "../rooms/app/quorum/quorum-acks.js";
import { Replicator } from "../rooms/app/replicator.js";
import { RoomLog } from "../rooms/app/room-log.js";
import { GrpcRoomSourceFactory } from "../rooms/app/room-source.js";
import { RoomsService } from "../rooms/app/rooms-service.js";
import { localTimeZone, RoutineService } from "../routines/app/routine-service.js";
import { RoutinesStore } from "../routines/store/routines-store.js";
import type { Foundation } from "./foundation.js";
import { telegramBot } from "./platforms.js";
import { VERSION } from "./version.js";

/**
 * The services of a gateway, built in the order they depend on each other (each one complete when
 * it is built; later ones subscribe to the events of earlier ones):
 *
 *   profiles → relay routes → deliveries (roster, machines, group commit) → turn engine → peer runs, A2A tasks
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
  /** Tasks A2A callers start in Bot Chats here. */
  a2aTasks: A2aTasks;
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

/** A2A tasks: messages of A2A callers as turns in canonical Bot Chats (no approvals service yet: never input-required). */
function a2aTasks(f: Foundation, p: ProfileServices, chat: ChatService): A2aTasks {
  return new A2aTasks({
    store: new A2aTasksStore(f.db),
    profiles: p.profiles,
    sessions: p.sessions,
    chat,
    clock: f.clock,
    logger: f.logger.child({ module: "a2a" }),
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

/** What does the deliveries' work: turns in the engine, the transports (the relay's and A2A agents' included), notifications. */
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
    a2a: new A2aPeerTransport(a2aPeerDirectory(p.config), f.settings.delivery.peerTimeoutMs, f.clock),
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
  const tasks = a2aTasks(f, p, chat);
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
    a2aTasks: tasks,
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
