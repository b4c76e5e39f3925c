import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import {
  type Cleanup,
  type Clock,
  createLogger,
  createMetrics,
  type Db,
  HermesError,
  type HostResolver,
  type Logger,
  type Metrics,
  migrationMessage,
  type ResolvedListen,
  sharedFolderWarning,
  systemClock,
  WalCheckpointer,
  writeFileAtomic,
} from "@hermes/common";
import { isValidGatewayId } from "@hermes/contract";
import { Coordinator } from "@hermes/coordinator";
import { Histogram } from "prom-client";
import { type GatewaySettings, resolveGatewayListen, resolveGatewaySettings, type SettingsOverrides } from "../home/app/config.js";
import { getMeta, openGatewayDb, ProfileDatabases, type SyncFile, setMeta } from "../home/store/gateway-store.js";
import { HermesHome } from "../home/store/home.js";
import { LiveRouting } from "../identity/app/sessions.js";
import { coordinatorSingletons, type SingletonCoordinator } from "../platforms/telegram/adapters/poller.js";

export interface GatewayOptions {
  home: string;
  overrides?: SettingsOverrides;
  logger?: Logger;
  clock?: Clock;
  env?: NodeJS.ProcessEnv;
  /** How listen addresses given as names are resolved (tests inject one). */
  resolver?: HostResolver;
  /** How profile databases flush their -wal files (tests inject one that they hold). */
  syncFile?: SyncFile;
}

/** The first phase of a start: settings, the root database and what is keyed by the gateway's identity. */
export interface Foundation {
  home: HermesHome;
  settings: GatewaySettings;
  listen: { grpc: ResolvedListen; http: ResolvedListen };
  env: NodeJS.ProcessEnv;
  clock: Clock;
  db: Db;
  /** Checkpoints state.db's WAL off the event loop; stopped before the database closes. */
  checkpointer: WalCheckpointer;
  id: string;
  logger: Logger;
  metrics: Metrics;
  /** What the operator should fix, logged at start (`gateway start` also prints them on stderr). */
  startWarnings: string[];
  profileDbs: ProfileDatabases;
  routing: LiveRouting;
  /** The coordinated mesh's etcd client (lease held), when a coordinator is configured. */
  coordinator: Coordinator | undefined;
  /** Named singletons (one Telegram poller per bot token): the coordinator's, when there is one. */
  singletons: SingletonCoordinator | undefined;
}

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
  if (!isValidGatewayId(id))
    throw new HermesError("invalid_config", `invalid gateway id ${JSON.stringify(id)}: letters, digits, '.', '_' and '-' (1-64)`);
  if (!stored) {
    writeFileAtomic(home.gatewayIdFile, `${id}\n`);
    setMeta(db, "gateway_id", id);
  }
  return id;
}

/**
 * Settings (config.yaml, then the environment and HERMES_HOME/.env, then flags), the listen
 * addresses (resolved once), `HERMES_HOME/state.db`, the gateway id, logging and metrics, the
 * profile databases and the live routing index.
 */
export async function openFoundation(options: GatewayOptions, cleanup: Cleanup): Promise<Foundation> {
  const home = new HermesHome(options.home);
  home.ensureRoot();
  const env = options.env ?? process.env;
  const settings = resolveGatewaySettings(home, options.overrides, options.env);
  const listen = await resolveGatewayListen(home, settings, options.resolver);
  const clock = options.clock ?? systemClock;
  const baseLogger = options.logger ?? createLogger("gateway");
  const db = openGatewayDb(home, settings.dbBusyTimeoutMs, (step) =>
    baseLogger.info({ database: step.path, version: step.version, migration: step.name, ms: step.ms }, migrationMessage(step)),
  );
  cleanup.push(() => db.close());
  const id = resolveGatewayId(home, db, settings.gatewayId);
  const logger = baseLogger.child({ gateway_id: id });
  const startWarnings = [sharedFolderWarning(home.root, "HERMES_HOME")].filter((w) => w !== undefined);
  for (const warning of startWarnings) logger.warn({ home: home.root }, warning);
  const metrics = createMetrics({ gateway_id: id });
  const checkpointer = startCheckpointer(db, logger, metrics);
  cleanup.push(() => void checkpointer.stop());
  const profileDbs = new ProfileDatabases(home, db, settings.dbBusyTimeoutMs, options.syncFile);
  cleanup.push(() => profileDbs.closeAll());
  const routing = new LiveRouting(db, logger);
  const coordinator = await connectCoordinator(settings, id, logger, metrics);
  if (coordinator) cleanup.push(() => void coordinator.close());
  // Without a coordinator, Telegram's own 409 is the guard against two pollers of one token.
  const singletons = coordinator ? coordinatorSingletons(coordinator) : undefined;
  return {
    home,
    settings,
    listen,
    env,
    clock,
    db,
    checkpointer,
    id,
    logger,
    metrics,
    startWarnings,
    profileDbs,
    routing,
    coordinator,
    singletons,
  };
}

/** state.db's checkpoints on a worker thread (the commits of rooms, deliveries and sessions no longer pay them). */
function startCheckpointer(db: Db, logger: Logger, metrics: Metrics): WalCheckpointer {
  const seconds = new Histogram({
    name: "hermes_state_db_checkpoint_seconds",
    help: "Checkpoints of state.db's WAL into the database file, run off the event loop",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [metrics.registry],
  });
  return new WalCheckpointer(db, {
    onCheckpoint: (report) => seconds.observe(report.seconds),
    onFailure: (message) => logger.warn({ database: db.name }, `state.db checkpoint: ${message}`),
  });
}

/**
 * Connects to etcd and takes the gateway's lease. Unreachable: `coordinator_unavailable` (the CLI
 * exits 2 with what to check), before any port is bound.
 */
async function connectCoordinator(
  settings: GatewaySettings,
  id: string,
  logger: Logger,
  metrics: Metrics,
): Promise<Coordinator | undefined> {
  const c = settings.coordinator;
  if (!c) return undefined;
  const renewals = new Histogram({
    name: "hermes_coordinator_lease_renew_seconds",
    help: "Round trips of this gateway's coordinator lease keep-alives (past the lease's safe deadline the gateway self-fences)",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [metrics.registry],
  });
  const coordinator = await Coordinator.connect({
    endpoints: c.endpoints,
    prefix: c.prefix,
    gatewayId: id,
    leaseTtlSeconds: c.leaseTtlSeconds,
    safetyMargin: c.safetyMargin,
    onLeaseRenewed: (seconds) => renewals.observe(seconds),
    onBackgroundError: (err) => logger.warn({ reason: err.reason, err: err.message }, "coordinator"),
  });
  coordinator.onLeaseChange((change) => logger.info({ lease: change }, `coordinator lease ${change.phase}`));
  logger.info({ endpoints: c.endpoints, prefix: c.prefix, lease_ttl_seconds: c.leaseTtlSeconds }, "connected to the coordinator");
  return coordinator;
}
