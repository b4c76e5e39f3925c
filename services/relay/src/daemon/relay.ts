import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ServerCredentials } from "@grpc/grpc-js";
import {
  adaptService,
  addReflection,
  BoundedGrpcServer,
  bindServer,
  type Cleanup,
  type Clock,
  claimUnixSocket,
  createLogger,
  createMetrics,
  DaemonState,
  formatHostPort,
  GuardedServer,
  HealthRegistry,
  type HostResolver,
  isoTime,
  type Logger,
  type Metrics,
  type ResolvedListen,
  resolveListenAddress,
  ServingStatus,
  sharedFolderWarning,
  shutdownServer,
  startHttpServer,
  startInPhases,
  systemClock,
} from "@hermes/common";
import { RelayAdminServiceService, type RelayStatus } from "@hermes/proto/hermes/v1/relay";
import { relayServiceDefinition, relayServiceHandlers } from "../api/relay-service.js";
import { RelayHub } from "../connections/app/relay-hub.js";
import { SessionTable } from "../connections/app/sessions.js";
import { DeliveryBroker } from "../deliveries/app/broker.js";
import { type RelayOverrides, type RelaySettings, resolveRelaySettings } from "../home/app/config.js";
import { RelayMetrics, registerRelayGauges } from "../home/app/relay-metrics.js";
import { RelayStore } from "../home/store/relay-store.js";
import { adminServiceHandlers, type RelayStatusSource } from "../keys/api/admin-service.js";
import { KeyAdmin } from "../keys/app/key-admin.js";
import { RosterBook } from "../roster/core/roster.js";
import { TunnelRouter } from "../tunnel/app/tunnel-router.js";

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
const MAX_FRAME_BYTES = 8 * 1024 * 1024;

export function relayDbPath(dataDir: string): string {
  return join(dataDir, "relay.db");
}

export function relayControlSocket(dataDir: string): string {
  return join(dataDir, "relay.sock");
}

/** Settings, listen addresses (resolved once: the relay binds exactly these), the database, the relay id, logging and metrics. */
async function openFoundation(options: RelayOptions, cleanup: Cleanup) {
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const settings = resolveRelaySettings(options.dataDir, options.overrides, options.env);
  const listen: { grpc: ResolvedListen; http: ResolvedListen } = {
    grpc: await resolveListenAddress(settings.grpc, "--grpc", options.resolver),
    http: await resolveListenAddress(settings.http, "--http", options.resolver),
  };
  const clock = options.clock ?? systemClock;
  const store = new RelayStore(relayDbPath(options.dataDir));
  cleanup.push(() => store.close());
  let id = store.meta("relay_id");
  if (!id) {
    id = `relay-${randomBytes(4).toString("hex")}`;
    store.setMeta("relay_id", id);
  }
  const logger = (options.logger ?? createLogger("relay")).child({ relay_id: id });
  const startWarnings = [sharedFolderWarning(options.dataDir, "the relay's data folder")].filter((w) => w !== undefined);
  for (const warning of startWarnings) logger.warn({ data: options.dataDir }, warning);
  const metrics = createMetrics({ relay_id: id });
  return { settings, listen, clock, store, id, logger, startWarnings, metrics };
}

type Foundation = Awaited<ReturnType<typeof openFoundation>>;

/** What the relay's services are built on (the scenario scripts build them over their own store and clock). */
export type ServicesFoundation = Pick<Foundation, "id" | "settings" | "clock" | "store" | "logger" | "metrics">;

/** The roster, the streams, the queue (broker) and the tunnel behind them, the keys. */
export function buildServices(f: ServicesFoundation) {
  const roster = new RosterBook(f.store.rosterEpoch(), f.store.loadRoster());
  const sessions = new SessionTable();
  const relayMetrics = new RelayMetrics(f.metrics.registry);
  const broker = new DeliveryBroker({
    store: f.store,
    sessions,
    clock: f.clock,
    logger: f.logger,
    metrics: relayMetrics,
    maxParallelTargets: f.settings.maxParallelTargets,
    retentionMs: f.settings.retentionMs,
  });
  registerRelayGauges(f.metrics.registry, {
    depth: () => broker.depth(),
    connections: () => sessions.size,
    epoch: () => roster.epoch,
  });
  const tunnel = new TunnelRouter(sessions, relayMetrics, f.logger);
  const hub = new RelayHub({
    id: f.id,
    settings: f.settings,
    logger: f.logger,
    metrics: f.metrics,
    relayMetrics,
    clock: f.clock,
    store: f.store,
    roster,
    sessions,
    broker,
    tunnel,
  });
  return { roster, sessions, relayMetrics, broker, tunnel, hub, keys: new KeyAdmin(f.store, f.clock) };
}

type Services = ReturnType<typeof buildServices>;

/** The running relay's state (DaemonState), and its status from it. */
class RelayState extends DaemonState implements RelayStatusSource {
  constructor(
    private readonly f: Foundation,
    private readonly s: Services,
  ) {
    super(f.clock);
  }

  status(): RelayStatus {
    const depth = this.s.broker.depth();
    return {
      relay_id: this.f.id,
      version: RELAY_VERSION,
      data_dir: this.f.settings.dataDir,
      grpc_address: this.grpcAddress,
      http_address: this.httpAddress,
      started_at: isoTime(this.startedAt),
      uptime_seconds: this.uptimeSeconds,
      connections_online: this.s.sessions.size,
      connections_known: this.f.store.keys().length,
      queued: depth.queued,
      in_flight: depth.in_flight,
      roster_epoch: this.s.roster.epoch,
    };
  }
}

/**
 * gRPC on TCP (RelayService: each call authenticates its own connection key) and on the control
 * socket (RelayAdminService), both with health and reflection; the HTTP port. Listening when this
 * returns.
 */
async function startServers(f: Foundation, s: Services, state: RelayState, cleanup: Cleanup) {
  const health = new HealthRegistry();
  const grpcLogger = f.logger.child({ module: "grpc" });
  const grpc = new BoundedGrpcServer(grpcLogger, {
    "grpc.max_receive_message_length": MAX_FRAME_BYTES,
    "grpc.max_send_message_length": MAX_FRAME_BYTES,
    // Gateways ping every ~20 s (even idle, to keep NAT mappings alive): allow it, and ping them too.
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": f.settings.minClientPingMs,
    "grpc.keepalive_time_ms": f.settings.keepaliveMs,
    "grpc.keepalive_timeout_ms": Math.min(20_000, f.settings.keepaliveMs),
  });
  const control = new GuardedServer(grpcLogger);
  grpc.addService(relayServiceDefinition, relayServiceHandlers(s.hub));
  health.addToServer(grpc);
  await addReflection(grpc);
  control.addService(
    RelayAdminServiceService,
    adaptService(RelayAdminServiceService, adminServiceHandlers({ hub: s.hub, keys: s.keys, status: state }), {
      metrics: f.metrics,
      transport: "control",
    }),
  );
  health.addToServer(control);
  await addReflection(control);

  const grpcPort = await grpc.listenTcp(formatHostPort(f.listen.grpc.bind));
  cleanup.push(() => grpc.forceShutdown());
  const grpcAddress = formatHostPort({ host: f.listen.grpc.bind.host, port: grpcPort });
  const socket = relayControlSocket(f.settings.dataDir);
  await claimUnixSocket(socket, "another relay is already serving this data folder");
  await bindServer(control, `unix:${socket}`, ServerCredentials.createInsecure());
  chmodSync(socket, 0o600);
  cleanup.push(() => {
    control.forceShutdown();
    rmSync(socket, { force: true });
  });
  const http = await startHttpServer({
    listen: f.listen.http.bind,
    registry: f.metrics.registry,
    ready: () => state.ready,
    metricsPublic: f.settings.metricsPublic,
  });
  state.listening = { grpc: grpcAddress, http: formatHostPort(http.address) };
  return { health, grpc, control, http };
}

type Servers = Awaited<ReturnType<typeof startServers>>;

/**
 * A running relay: the SQLite queue, the roster, the Connect streams of the gateways, the
 * tunnel, gRPC (TCP for gateways, a control socket for key administration), HTTP health and
 * metrics. `start` builds it in dependency order (foundation → services → servers), then starts it.
 */
export class Relay {
  readonly id: string;
  readonly settings: RelaySettings;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly clock: Clock;
  readonly store: RelayStore;
  readonly roster: RosterBook;
  readonly sessions: SessionTable;
  readonly broker: DeliveryBroker;
  readonly tunnel: TunnelRouter;
  readonly relayMetrics: RelayMetrics;
  readonly keys: KeyAdmin;
  /** What the operator should fix, logged at start (`relay start` also prints them on stderr). */
  readonly startWarnings: string[];
  private readonly hub: RelayHub;
  private readonly timers: NodeJS.Timeout[] = [];
  private stopping: Promise<void> | undefined;

  private constructor(
    f: Foundation,
    s: Services,
    private readonly servers: Servers,
    private readonly state: RelayState,
  ) {
    this.id = f.id;
    this.settings = f.settings;
    this.logger = f.logger;
    this.metrics = f.metrics;
    this.clock = f.clock;
    this.store = f.store;
    this.startWarnings = f.startWarnings;
    this.roster = s.roster;
    this.sessions = s.sessions;
    this.broker = s.broker;
    this.tunnel = s.tunnel;
    this.relayMetrics = s.relayMetrics;
    this.keys = s.keys;
    this.hub = s.hub;
  }

  static start(options: RelayOptions): Promise<Relay> {
    return startInPhases(async (cleanup) => {
      const f = await openFoundation(options, cleanup);
      const services = buildServices(f);
      const state = new RelayState(f, services);
      return new Relay(f, services, await startServers(f, services, state, cleanup), state).run();
    });
  }

  /** Start-up, once the servers listen: the queue is recovered, the sweeper runs, then ready. */
  private run(): this {
    const recovered = this.broker.recover();
    this.timers.push(setInterval(() => this.sweep(), this.settings.sweepMs).unref());
    this.servers.health.setAll(ServingStatus.SERVING);
    this.state.ready = true;
    this.logger.info({ grpc: this.grpcAddress, http: this.httpAddress, recovered, roster_epoch: this.roster.epoch }, "relay ready");
    return this;
  }

  get startedAt(): number {
    return this.state.startedAt;
  }

  get grpcAddress(): string {
    return this.state.grpcAddress;
  }

  get httpAddress(): string {
    return this.state.httpAddress;
  }

  get controlSocket(): string {
    return relayControlSocket(this.settings.dataDir);
  }

  get isReady(): boolean {
    return this.state.ready;
  }

  private sweep(): void {
    try {
      this.broker.sweep();
    } catch (err) {
      this.logger.error({ err }, "relay sweep failed");
    }
  }

  revokeKey(connection: string): { connection: string; disconnected: boolean } {
    return this.hub.revokeKey(connection);
  }

  status(): RelayStatus {
    return this.state.status();
  }

  /**
   * Graceful stop (SIGTERM): not ready, streams ended (gateways reconnect with back-off), the queue
   * stays in the database (in-flight deliveries are forwarded again after the restart), DB closed.
   */
  stop(): Promise<void> {
    this.hub.close();
    this.stopping ??= (async () => {
      const { health, grpc, control, http } = this.servers;
      this.state.ready = false;
      health.setAll(ServingStatus.NOT_SERVING);
      for (const t of this.timers) clearInterval(t);
      this.hub.endStreams();
      await Promise.all([shutdownServer(grpc, this.settings.shutdownGraceMs), shutdownServer(control, 1000)]);
      health.close();
      await http.close();
      this.store.close();
      rmSync(this.controlSocket, { force: true });
      this.logger.info("relay stopped");
      this.logger.flush?.();
    })();
    return this.stopping;
  }
}
