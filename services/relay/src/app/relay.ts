import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { type Metadata, ServerCredentials } from "@grpc/grpc-js";
import {
  adaptService,
  addReflection,
  BoundedGrpcServer,
  bearerToken,
  bindServer,
  type Clock,
  claimUnixSocket,
  createLogger,
  createMetrics,
  formatHostPort,
  GuardedServer,
  HealthRegistry,
  HermesError,
  type HostResolver,
  type HttpServer,
  isoTime,
  type Logger,
  type Metrics,
  resolveListenAddress,
  type Server,
  ServingStatus,
  sharedFolderWarning,
  shutdownServer,
  startHttpServer,
  systemClock,
} from "@hermes/common";
import { type ConnectionInfo, RelayAdminServiceService, type RelayStatus } from "@hermes/proto/hermes/v1/relay";
import { adminServiceHandlers } from "../api/admin-service.js";
import { relayServiceDefinition, relayServiceHandlers } from "../api/relay-service.js";
import { MAX_ENVELOPE_BYTES } from "../core/envelope.js";
import { hashKey, newConnectionKey } from "../core/keys.js";
import { assertConnectionName } from "../core/names.js";
import { RosterBook, type RosterBot } from "../core/roster.js";
import { RelayStore } from "../store/relay-store.js";
import { DeliveryBroker } from "./broker.js";
import { type RelayOverrides, type RelaySettings, resolveRelaySettings } from "./config.js";
import { RelayMetrics } from "./relay-metrics.js";
import type { GatewaySession } from "./sessions.js";
import { SessionTable } from "./sessions.js";
import { TunnelRouter } from "./tunnel-router.js";

export const RELAY_VERSION = "0.1.0";

export interface RelayOptions {
  dataDir: string;
  overrides?: RelayOverrides;
  logger?: Logger;
  clock?: Clock;
  env?: NodeJS.ProcessEnv;
  /** How listen addresses given as names are resolved (tests inject one). */
  resolver?: HostResolver;
}

/** The largest frame a gateway may send on its stream: tunnelled log pages go up to 2 MiB. */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;

export function relayDbPath(dataDir: string): string {
  return join(dataDir, "relay.db");
}

export function relayControlSocket(dataDir: string): string {
  return join(dataDir, "relay.sock");
}

/** Connection keys on a relay database: what both the running relay and `hermes relay key` (relay stopped) use. */
export class KeyAdmin {
  constructor(
    private readonly store: RelayStore,
    private readonly clock: Clock,
  ) {}

  add(connection: string): { connection: string; key: string; created_at: string } {
    assertConnectionName(connection);
    const key = newConnectionKey(randomBytes);
    const created_at = isoTime(this.clock.now());
    this.store.addKey(connection, hashKey(key), created_at);
    return { connection, key, created_at };
  }

  list(online: (connection: string) => boolean = () => false): ConnectionInfo[] {
    const roster = new Map(this.store.loadRoster().map((c) => [c.connection, c.bots.length]));
    return this.store.keys().map((k) => ({
      connection: k.connection,
      created_at: k.created_at,
      online: online(k.connection),
      gateway_id: k.gateway_id ?? "",
      last_seen_at: k.last_seen_at ?? "",
      bots: roster.get(k.connection) ?? 0,
    }));
  }
}

/**
 * A running relay: the SQLite queue, the roster, the Connect streams of the gateways, the
 * tunnel, gRPC (TCP for gateways, a control socket for key administration), HTTP health and metrics.
 */
export class Relay {
  readonly startedAt: number;
  private ready = false;
  /** What the operator should fix, logged at start (`relay start` also prints them on stderr). */
  startWarnings: string[] = [];
  private stopping: Promise<void> | undefined;
  /** Set first thing in stop(), before any stream is closed. */
  private closing = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private nextSessionId = 1;

  private constructor(
    readonly id: string,
    readonly settings: RelaySettings,
    readonly logger: Logger,
    readonly metrics: Metrics,
    readonly clock: Clock,
    readonly store: RelayStore,
    readonly roster: RosterBook,
    readonly sessions: SessionTable,
    readonly broker: DeliveryBroker,
    readonly tunnel: TunnelRouter,
    readonly relayMetrics: RelayMetrics,
    readonly keys: KeyAdmin,
    private readonly health: HealthRegistry,
    private readonly grpcServer: Server,
    private readonly controlServer: Server,
    private readonly http: HttpServer,
    readonly grpcAddress: string,
  ) {
    this.startedAt = clock.now();
  }

  static async start(options: RelayOptions): Promise<Relay> {
    mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    const settings = resolveRelaySettings(options.dataDir, options.overrides, options.env);
    // Resolved once: the relay binds exactly the addresses resolved here.
    const listenGrpc = await resolveListenAddress(settings.grpc, "--grpc", options.resolver);
    const listenHttp = await resolveListenAddress(settings.http, "--http", options.resolver);
    const clock = options.clock ?? systemClock;
    const store = new RelayStore(relayDbPath(options.dataDir));
    const cleanup: (() => void)[] = [() => store.close()];
    try {
      let id = store.meta("relay_id");
      if (!id) {
        id = `relay-${randomBytes(4).toString("hex")}`;
        store.setMeta("relay_id", id);
      }
      const logger = (options.logger ?? createLogger("relay")).child({ relay_id: id });
      const startWarnings = [sharedFolderWarning(options.dataDir, "the relay's data folder")].filter((w) => w !== undefined);
      for (const warning of startWarnings) logger.warn({ data: options.dataDir }, warning);
      const metrics = createMetrics({ relay_id: id });
      const roster = new RosterBook(store.rosterEpoch(), store.loadRoster());
      const sessions = new SessionTable();
      const ref: { broker?: DeliveryBroker } = {};
      const relayMetrics = new RelayMetrics(metrics.registry, {
        depth: () => ref.broker?.depth() ?? { queued: 0, in_flight: 0 },
        connections: () => sessions.size,
        epoch: () => roster.epoch,
      });
      const broker = new DeliveryBroker({
        store,
        sessions,
        clock,
        logger,
        metrics: relayMetrics,
        maxParallelTargets: settings.maxParallelTargets,
        retentionMs: settings.retentionMs,
      });
      ref.broker = broker;
      const tunnel = new TunnelRouter(sessions, relayMetrics, logger);
      const keys = new KeyAdmin(store, clock);
      const health = new HealthRegistry();

      const grpcLogger = logger.child({ module: "grpc" });
      const grpcServer = new BoundedGrpcServer(grpcLogger, {
        "grpc.max_receive_message_length": MAX_FRAME_BYTES,
        "grpc.max_send_message_length": MAX_FRAME_BYTES,
        // Gateways ping every ~20 s (even idle, to keep NAT mappings alive): allow it, and ping them too.
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.http2.min_ping_interval_without_data_ms": settings.minClientPingMs,
        "grpc.keepalive_time_ms": settings.keepaliveMs,
        "grpc.keepalive_timeout_ms": Math.min(20_000, settings.keepaliveMs),
      });
      const controlServer = new GuardedServer(grpcLogger);
      let relay: Relay | undefined;
      const core = () => relay!;
      grpcServer.addService(
        relayServiceDefinition,
        relayServiceHandlers({
          get relay() {
            return core();
          },
        }),
      );
      health.addToServer(grpcServer);
      await addReflection(grpcServer);
      controlServer.addService(
        RelayAdminServiceService,
        adaptService(
          RelayAdminServiceService,
          adminServiceHandlers(() => core()),
          { metrics, transport: "control" },
        ),
      );
      health.addToServer(controlServer);
      await addReflection(controlServer);

      const grpcPort = await grpcServer.listenTcp(formatHostPort(listenGrpc.bind));
      cleanup.push(() => grpcServer.forceShutdown());
      const grpcAddress = formatHostPort({ host: listenGrpc.bind.host, port: grpcPort });
      const socket = relayControlSocket(options.dataDir);
      await claimUnixSocket(socket, "another relay is already serving this data folder");
      await bindServer(controlServer, `unix:${socket}`, ServerCredentials.createInsecure());
      chmodSync(socket, 0o600);
      cleanup.push(() => {
        controlServer.forceShutdown();
        rmSync(socket, { force: true });
      });
      const http = await startHttpServer({
        listen: listenHttp.bind,
        registry: metrics.registry,
        ready: () => relay?.ready ?? false,
        metricsPublic: settings.metricsPublic,
      });
      relay = new Relay(
        id,
        settings,
        logger,
        metrics,
        clock,
        store,
        roster,
        sessions,
        broker,
        tunnel,
        relayMetrics,
        keys,
        health,
        grpcServer,
        controlServer,
        http,
        grpcAddress,
      );
      const recovered = broker.recover();
      relay.timers.push(setInterval(() => relay.sweep(), settings.sweepMs).unref());
      health.setAll(ServingStatus.SERVING);
      relay.startWarnings = startWarnings;
      relay.ready = true;
      logger.info({ grpc: grpcAddress, http: formatHostPort(http.address), recovered, roster_epoch: roster.epoch }, "relay ready");
      return relay;
    } catch (err) {
      for (const undo of cleanup.reverse()) undo();
      throw err;
    }
  }

  get httpAddress(): string {
    return formatHostPort(this.http.address);
  }

  get controlSocket(): string {
    return relayControlSocket(this.settings.dataDir);
  }

  get isReady(): boolean {
    return this.ready;
  }

  private sweep(): void {
    try {
      this.broker.sweep();
    } catch (err) {
      this.logger.error({ err }, "relay sweep failed");
    }
  }

  // -------------------------------------------------------------------------------------------
  // Streams

  /** The connection a presented key belongs to, or `unauthenticated` (nothing else happens). */
  authenticate(metadata: Metadata): string {
    const header = metadata.get("authorization")[0];
    const key = bearerToken(typeof header === "string" ? header : undefined);
    const connection = key ? this.store.connectionForKeyHash(hashKey(key)) : undefined;
    if (!connection) {
      throw new HermesError(
        "unauthenticated",
        "missing, unknown or revoked connection key: send `authorization: Bearer <key>` with a key from `hermes relay key add NAME`",
      );
    }
    return connection;
  }

  newSessionId(): number {
    return this.nextSessionId++;
  }

  /** A gateway's hello was accepted: its stream becomes the connection's, it gets its welcome and roster view. */
  attach(session: GatewaySession): void {
    if (this.closing) throw new HermesError("unavailable", "the relay is stopping; reconnect in a moment");
    const previous = this.sessions.attach(session);
    if (previous) {
      this.broker.connectionDown(previous.connection, previous.id, "replaced");
      this.tunnel.connectionDown(previous.connection);
      previous.close(new HermesError("refused", `a newer stream of connection ${session.connection} replaced this one`));
    }
    this.store.touchConnection(session.connection, session.gatewayId, isoTime(this.clock.now()));
    const changed = this.roster.connected(session.connection, session.gatewayId);
    if (changed) this.store.saveEpoch(this.roster.epoch);
    session.send({
      frame: {
        $case: "welcome",
        value: {
          connection: session.connection,
          relay_id: this.id,
          roster_epoch: this.roster.epoch,
          max_envelope_bytes: MAX_ENVELOPE_BYTES,
        },
      },
    });
    this.logger.info(
      { connection: session.connection, gateway_id: session.gatewayId, replaced: previous !== undefined },
      "gateway connected",
    );
    if (changed) this.broadcastRoster();
    else session.send(this.rosterFrame(session.connection));
    this.broker.connectionUp();
  }

  /** A stream ended (closed, broken, or cancelled). */
  detach(session: GatewaySession): void {
    if (!this.sessions.detach(session)) return;
    this.tunnel.connectionDown(session.connection);
    // Stopping: what the gateway held stays queued in the database and is forwarded again after the restart.
    if (this.closing) return;
    this.broker.connectionDown(session.connection, session.id, "lost");
    try {
      this.store.touchConnection(session.connection, session.gatewayId, isoTime(this.clock.now()));
      if (this.roster.disconnected(session.connection)) {
        this.store.saveEpoch(this.roster.epoch);
        this.broadcastRoster();
      }
    } catch (err) {
      this.logger.warn({ err, connection: session.connection }, "recording a disconnect failed");
    }
    this.logger.info({ connection: session.connection, gateway_id: session.gatewayId }, "gateway disconnected");
  }

  /** A gateway announced its bots. */
  announce(connection: string, bots: RosterBot[]): void {
    if (!this.roster.announce(connection, bots)) return;
    this.store.saveRoster(connection, bots, this.roster.epoch);
    this.logger.info({ connection, bots: bots.length, roster_epoch: this.roster.epoch }, "roster changed");
    this.broadcastRoster();
  }

  private rosterFrame(connection: string) {
    const view = this.roster.viewFor(connection);
    return { frame: { $case: "roster" as const, value: { epoch: view.epoch, bots: view.bots } } };
  }

  private broadcastRoster(): void {
    for (const s of this.sessions.all()) s.send(this.rosterFrame(s.connection));
  }

  // -------------------------------------------------------------------------------------------
  // Administration

  revokeKey(connection: string): { connection: string; disconnected: boolean } {
    assertConnectionName(connection);
    if (!this.store.revokeKey(connection)) {
      throw new HermesError("not_found", `no key for connection ${connection}; list them with: hermes relay key list`, {
        data: { connection },
      });
    }
    this.roster.remove(connection);
    this.store.saveEpoch(this.roster.epoch);
    const session = this.sessions.get(connection);
    if (session) {
      session.close(new HermesError("unauthenticated", `the key of connection ${connection} was revoked at the relay`));
      this.detach(session);
    }
    this.logger.warn({ connection, disconnected: session !== undefined }, "connection key revoked");
    this.broadcastRoster();
    return { connection, disconnected: session !== undefined };
  }

  status(): RelayStatus {
    const depth = this.broker.depth();
    return {
      relay_id: this.id,
      version: RELAY_VERSION,
      data_dir: this.settings.dataDir,
      grpc_address: this.grpcAddress,
      http_address: this.httpAddress,
      started_at: isoTime(this.startedAt),
      uptime_seconds: (this.clock.now() - this.startedAt) / 1000,
      connections_online: this.sessions.size,
      connections_known: this.store.keys().length,
      queued: depth.queued,
      in_flight: depth.in_flight,
      roster_epoch: this.roster.epoch,
    };
  }

  // -------------------------------------------------------------------------------------------
  // Lifecycle

  /**
   * Graceful stop (SIGTERM): not ready, streams ended (gateways reconnect with back-off), the queue
   * stays in the database (in-flight deliveries are forwarded again after the restart), DB closed.
   */
  stop(): Promise<void> {
    if (!this.closing) {
      // What was decided is made durable (and acked) while the streams are still open.
      try {
        this.broker.flush();
      } catch (err) {
        this.logger.error({ err }, "final relay commit failed");
      }
    }
    this.closing = true;
    this.stopping ??= (async () => {
      this.ready = false;
      this.health.setAll(ServingStatus.NOT_SERVING);
      for (const t of this.timers) clearInterval(t);
      for (const s of this.sessions.all()) s.close(new HermesError("unavailable", "the relay is stopping; reconnect in a moment"));
      await Promise.all([shutdownServer(this.grpcServer, this.settings.shutdownGraceMs), shutdownServer(this.controlServer, 1000)]);
      this.health.close();
      await this.http.close();
      this.store.close();
      rmSync(this.controlSocket, { force: true });
      this.logger.info("relay stopped");
      this.logger.flush?.();
    })();
    return this.stopping;
  }
}

export { resolveRelaySettings };
