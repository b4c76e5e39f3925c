import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, readFileSync, rmSync } from "node:fs";
import { ServerCredentials, type ServiceDefinition } from "@grpc/grpc-js";
import {
  adaptService,
  addReflection,
  BoundedGrpcServer,
  bindServer,
  type Clock,
  claimUnixSocket,
  createLogger,
  createMetrics,
  type Db,
  formatHostPort,
  GuardedServer,
  HealthRegistry,
  HermesError,
  type HostResolver,
  type HttpServer,
  isoTime,
  KeyRing,
  type Logger,
  type Metrics,
  type Server,
  type ServiceHandlers,
  ServingStatus,
  sharedFolderWarning,
  shutdownServer,
  startHttpServer,
  statement,
  systemClock,
  writeFileAtomic,
} from "@hermes/common";
import { DeliveryServiceService } from "@hermes/proto/hermes/v1/delivery";
import { ControlServiceService, GatewayServiceService, type GatewayStatus } from "@hermes/proto/hermes/v1/gateway";
import { PeerServiceService } from "@hermes/proto/hermes/v1/peers";
import { RoomMemberServiceService, RoomServiceService } from "@hermes/proto/hermes/v1/rooms";
import { deliveryServiceHandlers } from "../api/grpc/delivery-service.js";
import { controlServiceHandlers, gatewayServiceHandlers } from "../api/grpc/gateway-service.js";
import { memberTurnServiceHandlers } from "../api/grpc/member-turn-service.js";
import { peerServiceHandlers } from "../api/grpc/peer-service.js";
import { roomServiceHandlers } from "../api/grpc/room-service.js";
import { apiPlatformRoute } from "../api/http/api-platform.js";
import { roomMethods } from "../api/rpc/room-methods.js";
import { createRpcServer, type RpcServer } from "../api/rpc/rpc-server.js";
import { registerMemberTurnTunnel, registerRoomTunnel } from "../api/tunnel/room-tunnel.js";
import { RoutingIndex } from "../core/identity/routing-index.js";
import { DeliveriesStore } from "../store/deliveries-store.js";
import { getMeta, openGatewayDb, ProfileDatabases, setMeta } from "../store/gateway-store.js";
import { loadRoutingEntries, persistRoutingChanges } from "../store/routing-store.js";
import { RunsStore } from "../store/runs-store.js";
import { ChatService } from "./chat.js";
import { type GatewaySettings, resolveGatewayListen, resolveGatewaySettings, type SettingsOverrides } from "./config.js";
import { DeliveryService } from "./delivery/delivery-service.js";
import { HermesHome } from "./home.js";
import { peerDirectory, peerLinks } from "./peers/peer-directory.js";
import { PeerRuns } from "./peers/peer-runs.js";
import { ProfileService } from "./profiles.js";
import { RelayLink, relayConnectionName } from "./relay/relay-link.js";
import { DiscussionDriver } from "./rooms/discussion-driver.js";
import { MemberTurnRouter } from "./rooms/member-turn-routes.js";
import { LocalMemberTurns, MemberTurnServer } from "./rooms/member-turns.js";
import { RoomsService } from "./rooms/rooms-service.js";
import { type RoutingAccess, SessionService } from "./sessions.js";

export const VERSION = "0.1.0";

export interface GatewayOptions {
  home: string;
  overrides?: SettingsOverrides;
  logger?: Logger;
  clock?: Clock;
  env?: NodeJS.ProcessEnv;
  /** How listen addresses given as names are resolved (tests inject one). */
  resolver?: HostResolver;
}

const GATEWAY_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * The gateway id is persisted on first start (HERMES_HOME/gateway_id) and never changes: rooms
 * name their authority by it. A different --id for an existing home is refused.
 */
function resolveGatewayId(home: HermesHome, db: Db, wanted: string | undefined): string {
  const stored = existsSync(home.gatewayIdFile) ? readFileSync(home.gatewayIdFile, "utf8").trim() : getMeta(db, "gateway_id");
  if (stored && wanted && stored !== wanted) {
    throw new HermesError(
      "invalid_config",
      `this home (${home.root}) belongs to gateway ${stored}, but --id ${wanted} was given; gateway ids never change (rooms name their authority by it). Drop --id, or use another --home`,
    );
  }
  const id = stored || wanted || `gw-${randomBytes(4).toString("hex")}`;
  if (!GATEWAY_ID_RE.test(id))
    throw new HermesError("invalid_config", `invalid gateway id ${JSON.stringify(id)}: letters, digits, '.', '_' and '-' (1-64)`);
  if (!stored) {
    writeFileAtomic(home.gatewayIdFile, `${id}\n`);
    setMeta(db, "gateway_id", id);
  }
  return id;
}

/** A running gateway: stores, services, gRPC (TCP + control socket), HTTP and timers. */
export class Gateway {
  readonly startedAt: number;
  private ready = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private stopping: Promise<void> | undefined;
  /** Bot-to-bot delivery (outbox, ingress, receipts). */
  deliveries!: DeliveryService;
  /** Turns other gateways run here (`hermes peer dm/run`). */
  peerRuns!: PeerRuns;
  /** Replicated rooms (store, group commit, replication, authority). */
  rooms!: RoomsService;
  /** The discussion driver of the rooms led here. */
  discussions!: DiscussionDriver;
  /** The dial-out link to the relay, when relay.url is configured. */
  relay: RelayLink | undefined;
  /** JSON-RPC over WebSocket at /rpc on the HTTP port. */
  private rpc: RpcServer | undefined;
  /** What the operator should fix, logged at start (`gateway start` also prints them on stderr). */
  startWarnings: string[] = [];

  private constructor(
    readonly id: string,
    readonly home: HermesHome,
    readonly settings: GatewaySettings,
    readonly logger: Logger,
    readonly metrics: Metrics,
    readonly clock: Clock,
    readonly db: Db,
    readonly profileDbs: ProfileDatabases,
    readonly routing: RoutingIndex,
    readonly sessions: SessionService,
    readonly profiles: ProfileService,
    readonly chat: ChatService,
    private readonly health: HealthRegistry,
    private readonly grpcServer: Server,
    private readonly controlServer: Server,
    private readonly http: HttpServer,
    readonly grpcAddress: string,
  ) {
    this.startedAt = clock.now();
  }

  static async start(options: GatewayOptions): Promise<Gateway> {
    const home = new HermesHome(options.home);
    home.ensureRoot();
    const settings = resolveGatewaySettings(home, options.overrides, options.env);
    const listen = await resolveGatewayListen(home, settings, options.resolver);
    const clock = options.clock ?? systemClock;
    const db = openGatewayDb(home, settings.dbBusyTimeoutMs);
    const cleanup: (() => void)[] = [() => db.close()];
    try {
      const id = resolveGatewayId(home, db, settings.gatewayId);
      const logger = (options.logger ?? createLogger("gateway")).child({ gateway_id: id });
      const startWarnings = [sharedFolderWarning(home.root, "HERMES_HOME")].filter((w) => w !== undefined);
      for (const warning of startWarnings) logger.warn({ home: home.root }, warning);
      const metrics = createMetrics({ gateway_id: id });
      const profileDbs = new ProfileDatabases(home, db, settings.dbBusyTimeoutMs);
      cleanup.push(() => profileDbs.closeAll());
      const routing = RoutingIndex.from(loadRoutingEntries(db));
      const persistRouting = () => {
        if (!routing.hasChanges) return;
        const changes = routing.takeChanges();
        try {
          persistRoutingChanges(db, changes);
        } catch (err) {
          routing.restoreChanges(changes);
          logger.error({ err }, "persisting the routing index failed; will retry");
        }
      };
      let flushScheduled = false;
      const routingAccess: RoutingAccess = {
        upsert: (entry) => {
          routing.upsert(entry);
          if (!flushScheduled) {
            flushScheduled = true;
            setImmediate(() => {
              flushScheduled = false;
              persistRouting();
            });
          }
        },
        collisions: (o, n) => routing.collisions(o, n),
        rekeyProfile: (o, n) => routing.rekeyProfile(o, n, { persisted: true }),
        removeProfile: (n) => routing.removeProfile(n),
        flush: persistRouting,
      };
      const sessions = new SessionService(db, routingAccess, clock);
      const gatewayRef: { current?: Gateway } = {};
      const profiles = new ProfileService(home, db, profileDbs, sessions, routingAccess, clock, {
        stopProfile: (name) => {
          gatewayRef.current?.deliveries.profileStopping(name);
          gatewayRef.current?.chat.stopProfile(name);
        },
        profileRenamed: (oldName, newName) => gatewayRef.current?.deliveries.profileRenamed(oldName, newName),
        profilesChanged: () => {
          gatewayRef.current?.deliveries.rosterChanged();
          gatewayRef.current?.relay?.rosterChanged();
        },
      });
      profiles.ensureDefault();
      const chat = new ChatService({
        home,
        db,
        profileDbs,
        profiles,
        sessions,
        clock,
        logger,
        gatewayId: id,
        env: options.env ?? process.env,
        agents: settings.agents,
        registry: metrics.registry,
      });
      const deliveries = new DeliveryService({
        store: new DeliveriesStore(db),
        profileDbs,
        profiles,
        sessions,
        chat,
        clock,
        logger,
        gatewayId: id,
        settings: settings.delivery,
        registry: metrics.registry,
        relayConnection: settings.relay ? relayConnectionName(settings.relay, id) : undefined,
      });
      chat.attachMessaging(deliveries);
      const peerRuns = new PeerRuns({
        store: new RunsStore(db),
        profiles,
        sessions,
        chat,
        clock,
        logger: logger.child({ module: "peers" }),
        registry: metrics.registry,
        settings: { turnTimeoutMs: settings.delivery.turnTimeoutMs },
      });
      const relay = settings.relay
        ? new RelayLink({
            settings: settings.relay,
            gatewayId: id,
            version: VERSION,
            logger: logger.child({ module: "relay" }),
            clock,
            profiles,
            chat,
            deliveries,
            outcomeTimeoutMs: settings.delivery.peerTimeoutMs,
          })
        : undefined;
      cleanup.push(() => void relay?.stop());
      const rooms = new RoomsService({
        db,
        gatewayId: id,
        clock,
        logger: logger.child({ module: "rooms" }),
        registry: metrics.registry,
        peers: peerDirectory(chat.modelConfig),
        settings: settings.rooms,
        ...(relay ? { sources: relay.roomSources() } : {}),
      });
      if (relay) registerRoomTunnel(relay.tunnelHandlers, rooms);
      cleanup.push(() => void rooms.stop());
      // Discussions: member turns run here (local profiles, and for other gateways' rooms) or
      // on the member's gateway (a peer named after it, else the relay); the driver runs on rooms led here.
      const localTurns = new LocalMemberTurns({
        chat,
        profiles,
        sessions,
        profileDbs,
        clock,
        logger: logger.child({ module: "discussions" }),
      });
      const memberTurns = new MemberTurnServer({
        local: localTurns,
        gatewayId: id,
        observe: (roomId, authority) => rooms.observe(roomId, authority),
        logger: logger.child({ module: "discussions" }),
      });
      if (relay) registerMemberTurnTunnel(relay.tunnelHandlers, memberTurns);
      const discussions = new DiscussionDriver({
        rooms,
        members: new MemberTurnRouter({
          gatewayId: id,
          local: localTurns,
          peers: peerDirectory(chat.modelConfig),
          tunnel: () => relay?.tunnel,
        }),
        gatewayId: id,
        clock,
        logger: logger.child({ module: "discussions" }),
        registry: metrics.registry,
        settings: { turnTimeoutMs: settings.delivery.turnTimeoutMs },
      });
      rooms.attachDriver(discussions);
      const health = new HealthRegistry();
      const keys = new KeyRing(settings.apiKeys);

      const grpcLogger = logger.child({ module: "grpc" });
      const grpcServer = new BoundedGrpcServer(grpcLogger, { "grpc.max_receive_message_length": 8 * 1024 * 1024 });
      const controlServer = new GuardedServer(grpcLogger);
      let gatewayForStatus: Gateway | undefined;
      const statusSource = { status: () => gatewayForStatus!.status() };
      /** One service on one server: the TCP port checks the key, the control socket does not. */
      const serve = <S>(server: Server, transport: "tcp" | "control", definition: ServiceDefinition, handlers: ServiceHandlers<S>) =>
        server.addService(
          definition,
          adaptService(definition, handlers, { ...(transport === "tcp" ? { auth: keys } : {}), metrics, transport }),
        );
      for (const [server, transport] of [
        [grpcServer, "tcp"],
        [controlServer, "control"],
      ] as const) {
        serve(server, transport, GatewayServiceService, gatewayServiceHandlers({ profiles, chat, status: statusSource }));
        serve(server, transport, DeliveryServiceService, deliveryServiceHandlers({ deliveries, keyRequired: keys.required, transport }));
        serve(server, transport, PeerServiceService, peerServiceHandlers({ runs: peerRuns, keyRequired: keys.required, transport }));
        serve(server, transport, RoomServiceService, roomServiceHandlers(rooms));
        serve(
          server,
          transport,
          RoomMemberServiceService,
          memberTurnServiceHandlers({ server: memberTurns, keyRequired: keys.required, transport }),
        );
        health.addToServer(server);
      }
      serve(controlServer, "control", ControlServiceService, controlServiceHandlers({ profiles }));
      await addReflection(grpcServer);
      await addReflection(controlServer);

      const grpcPort = await grpcServer.listenTcp(formatHostPort(listen.grpc.bind));
      cleanup.push(() => grpcServer.forceShutdown());
      const grpcAddress = formatHostPort({ host: listen.grpc.bind.host, port: grpcPort });
      await claimUnixSocket(home.controlSocket, "another gateway is already serving this home");
      await bindServer(controlServer, `unix:${home.controlSocket}`, ServerCredentials.createInsecure());
      chmodSync(home.controlSocket, 0o600);
      cleanup.push(() => {
        controlServer.forceShutdown();
        rmSync(home.controlSocket, { force: true });
      });
      let gateway: Gateway | undefined;
      const rpc = createRpcServer({
        keys,
        methods: roomMethods(rooms),
        logger: logger.child({ module: "rpc" }),
        allowedOrigins: settings.httpAllowedOrigins,
        maxConnections: settings.maxRpcConnections,
      });
      cleanup.push(() => rpc.close());
      const http = await startHttpServer({
        listen: listen.http.bind,
        registry: metrics.registry,
        // Not ready while writes fail for a full disk; ready again once one commits.
        ready: () => (gateway?.ready ?? false) && profileDbs.writeFailure() === undefined,
        metricsPublic: settings.metricsPublic,
        routes: [apiPlatformRoute({ chat, keys, logger })],
        upgrades: [rpc.upgrade],
      });
      gateway = new Gateway(
        id,
        home,
        settings,
        logger,
        metrics,
        clock,
        db,
        profileDbs,
        routing,
        sessions,
        profiles,
        chat,
        health,
        grpcServer,
        controlServer,
        http,
        grpcAddress,
      );
      gatewayForStatus = gateway;
      gateway.startWarnings = startWarnings;
      gateway.deliveries = deliveries;
      gateway.peerRuns = peerRuns;
      gateway.rooms = rooms;
      gateway.discussions = discussions;
      gateway.relay = relay;
      gateway.rpc = rpc;
      gatewayRef.current = gateway;
      gateway.timers.push(setInterval(persistRouting, settings.routingPersistMs).unref());
      gateway.timers.push(setInterval(() => gateway.writeHeartbeats("running"), settings.heartbeatMs).unref());
      chat.recoverInterruptedTurns();
      peerRuns.start();
      deliveries.start();
      rooms.start();
      discussions.start();
      relay?.start();
      gateway.writeHeartbeats("running");
      health.setAll(ServingStatus.SERVING);
      gateway.ready = true;
      logger.info({ grpc: grpcAddress, http: formatHostPort(http.address), control: home.controlSocket }, "gateway ready");
      return gateway;
    } catch (err) {
      for (const undo of cleanup.reverse()) undo();
      throw err;
    }
  }

  get httpAddress(): string {
    return formatHostPort(this.http.address);
  }

  status(): GatewayStatus {
    const now = this.clock.now();
    return {
      gateway_id: this.id,
      version: VERSION,
      home: this.home.root,
      grpc_address: this.grpcAddress,
      http_address: this.httpAddress,
      control_socket: this.home.controlSocket,
      started_at: isoTime(this.startedAt),
      uptime_seconds: (now - this.startedAt) / 1000,
      profiles: this.profiles.names().length,
      rooms: this.rooms.count(),
      peers: peerLinks(this.chat.modelConfig),
      relay: this.relay?.status() ?? { url: "", connection: "", state: "disabled", roster_epoch: 0 },
    };
  }

  /** Heartbeat rows for every hosted profile (identity-keyed: they follow renames, go with deletes). */
  writeHeartbeats(state: "running" | "stopped"): void {
    const now = isoTime(this.clock.now());
    const upsert = statement(
      this.db,
      `INSERT INTO gateway_heartbeats (profile, gateway_id, pid, state, last_seen_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(profile) DO UPDATE SET gateway_id = excluded.gateway_id, pid = excluded.pid, state = excluded.state, last_seen_at = excluded.last_seen_at`,
    );
    try {
      this.db.transaction(() => {
        for (const name of this.profiles.names()) upsert.run(name, this.id, process.pid, state, now);
      })();
    } catch (err) {
      this.logger.warn({ err }, "writing heartbeats failed");
    }
  }

  /** Graceful stop (SIGTERM): not ready, stop accepting, let in-flight calls finish, persist, close. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.ready = false;
      this.health.setAll(ServingStatus.NOT_SERVING);
      for (const t of this.timers) clearInterval(t);
      const grace = this.settings.shutdownGraceMs;
      // Deliveries first: queued mail stays queued for the next start, waiting callers are answered.
      this.deliveries.beginStop();
      // Peer runs too: waiting dm callers are answered; queued runs stay queued, running ones end interrupted.
      this.peerRuns.beginStop();
      const roomsStopping = this.rooms.beginStop();
      // Running member turns get the grace period; their ends are logged while appends still work.
      const discussionsStopping = this.discussions.stop(grace);
      // The relay link next: running relayed deliveries were just answered runtime_offline (they stay queued here).
      await this.relay?.stop();
      await Promise.all([shutdownServer(this.grpcServer, grace), shutdownServer(this.controlServer, grace)]);
      this.health.close();
      this.rpc?.close();
      await this.http.close();
      await roomsStopping;
      await discussionsStopping;
      await this.rooms.stop();
      await this.chat.stop(grace);
      await this.deliveries.stop();
      this.routingFlush();
      this.writeHeartbeats("stopped");
      this.profileDbs.closeAll();
      this.db.close();
      rmSync(this.home.controlSocket, { force: true });
      this.logger.info("gateway stopped");
      this.logger.flush?.();
    })();
    return this.stopping;
  }

  private routingFlush(): void {
    const changes = this.routing.takeChanges();
    persistRoutingChanges(this.db, changes);
  }
}
