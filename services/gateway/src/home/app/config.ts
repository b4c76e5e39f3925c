import { join } from "node:path";
import {
  apiKeyProblem,
  assertApiKey,
  canonicalOrigin,
  describeListen,
  envValue,
  HermesError,
  type HostResolver,
  parseHostPort,
  parseMilliseconds,
  type ResolvedListen,
  readEnvFile,
  readYamlFile,
  resolveListenAddress,
  validateConfig,
} from "@hermes/common";
import { DEFAULT_PROFILE, DEFAULT_TTL_SECONDS, GATEWAY_ID_RULE, MAX_TTL_SECONDS, messageLength } from "@hermes/contract";
import { z } from "zod";
import { DESCRIPTION_MAX, TITLE_MAX } from "../../botmode/core/profile-meta.js";
import { telegramPlatformSchema } from "../../platforms/telegram/core/config.js";
import { DEFAULT_LINGER } from "../../rooms/core/commit-linger.js";
import type { HermesHome } from "../store/home.js";

/** The longest wait for a database lock the config accepts, ms. */
const MAX_DB_BUSY_TIMEOUT_MS = 60_000;
const MAX_COMMIT_LINGER_MS = 50;

const hostPort = z.string().refine((v) => {
  try {
    parseHostPort(v);
    return true;
  } catch {
    return false;
  }
}, "expected HOST:PORT such as 127.0.0.1:7440");

const ORIGIN_HINT = "an origin such as https://ops.example.com (scheme, host, optional port; no path)";

const origin = z.string().transform((v, ctx) => {
  const canonical = canonicalOrigin(v);
  if (canonical === undefined) {
    ctx.addIssue({ code: "custom", message: ORIGIN_HINT });
    return z.NEVER;
  }
  return canonical;
});

const channelOverride = z
  .object({ model: z.string().min(1).optional(), provider: z.string().min(1).optional(), system_prompt: z.string().optional() })
  .strict();

/** `platforms.<name>` in a profile's config.yaml: its channel overrides (a platform's own settings live in the gateway's). */
const platformSection = z
  .object({ channel_overrides: z.record(z.string(), channelOverride).optional(), enabled: z.boolean().optional() })
  .strict();

const providerEntry = z
  .object({
    base_url: z.url(),
    api_key_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name")
      .optional(),
    timeout_seconds: z.number().positive().max(3600).optional(),
  })
  .strict();

const envVarName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "an environment variable name");
const a2aName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "lower-case letters, digits, '_' or '-' (1-64)");

/** `a2a:` in HERMES_HOME/config.yaml. */
const a2aSectionSchema = z
  .object({
    /** Serve the cards and the JSON-RPC endpoints (default true). */
    enabled: z.boolean().optional(),
    /** The base URL the cards advertise (a proxy in front of the HTTP port), e.g. https://bots.example.com. */
    public_url: z
      .string()
      .regex(/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/, "http(s)://host[:port][/path], no query")
      .optional(),
    /** SSE comments sent on an idle stream, so proxies and clients do not drop it. */
    keep_alive_seconds: z.number().positive().max(300).optional(),
    /** Keys this gateway gave A2A callers: a call with one is attributed to its name. */
    callers: z.record(a2aName, z.object({ key_env: envVarName, note: z.string().max(500).optional() }).strict()).optional(),
    /** A2A agents this gateway calls (hermes peer add NAME --a2a URL): message_agent, hermes message and hermes peer dm reach them. */
    peers: z
      .record(
        a2aName,
        z
          .object({
            url: z.string().regex(/^https?:\/\/\S+$/, "an http(s):// URL"),
            key_env: envVarName.optional(),
            note: z.string().max(500).optional(),
          })
          .strict(),
      )
      .optional(),
  })
  .strict();

/** The model keys a profile's config.yaml holds; the gateway-wide config.yaml gives defaults. */
export const modelConfigSchema = z
  .object({
    // Counted in characters (code points), as profiles.update counts them (profile-meta.ts).
    title: z
      .string()
      .refine((v) => messageLength(v) <= TITLE_MAX, `at most ${TITLE_MAX} characters`)
      .optional(),
    description: z
      .string()
      .refine((v) => messageLength(v) <= DESCRIPTION_MAX, `at most ${DESCRIPTION_MAX} characters`)
      .optional(),
    model: z.string().min(1).optional(),
    provider: z.string().min(1).optional(),
    providers: z.record(z.string(), providerEntry).optional(),
    fallback_providers: z.array(z.string().min(1)).optional(),
    soul: z.string().max(64_000).optional(),
    /** A per-turn prompt for every chat; a channel override's system_prompt replaces it (never stored in history). */
    ephemeral_system_prompt: z.string().max(64_000).optional(),
    platforms: z.record(z.string(), platformSection).optional(),
  })
  .strict();

export type ModelConfig = z.infer<typeof modelConfigSchema>;

/** HERMES_HOME/config.yaml: the gateway section plus profile defaults. */
export const gatewayConfigSchema = modelConfigSchema
  .extend({
    /** The gateway runs the platforms' bots: `platforms.telegram` holds the bot's settings besides its channel overrides. */
    platforms: z.object({ telegram: telegramPlatformSchema.optional() }).catchall(platformSection).optional(),
    gateway: z
      .object({
        id: z.string().regex(new RegExp(GATEWAY_ID_RULE), "letters, digits, '.', '_' and '-' (1-64)").optional(),
        grpc: hostPort.optional(),
        http: hostPort.optional(),
        api_key: z
          .string()
          .superRefine((key, ctx) => {
            const problem = apiKeyProblem(key);
            if (problem) ctx.addIssue({ code: "custom", message: `the key ${problem}` });
          })
          .optional(),
        metrics_public: z.boolean().optional(),
        routing_persist_seconds: z.number().positive().max(3600).optional(),
        heartbeat_seconds: z.number().positive().max(3600).optional(),
        shutdown_grace_seconds: z.number().positive().max(300).optional(),
        db_busy_timeout_ms: z.number().int().min(0).max(MAX_DB_BUSY_TIMEOUT_MS).optional(),
      })
      .strict()
      .optional(),
    /** The HTTP port's WebSocket endpoint (/rpc). */
    http: z
      .object({
        /** Browser origins besides the gateway's own that may open /rpc (e.g. https://ops.example.com). */
        allowed_origins: z.array(origin).optional(),
        /** WebSocket connections served at once; more are refused with 503. */
        max_rpc_connections: z.number().int().min(1).max(100_000).optional(),
      })
      .strict()
      .optional(),
    relay: z
      .object({ url: z.string().min(1).optional(), key: z.string().optional(), connection: z.string().optional() })
      .strict()
      .optional(),
    bot_peers: z.record(z.string(), z.object({ url: z.string().min(1), note: z.string().optional() }).strict()).optional(),
    /** The warm-agent cache and the turn engine. */
    agents: z
      .object({
        max_warm: z.number().int().min(1).max(64).optional(),
        idle_seconds: z.number().positive().max(86_400).optional(),
        slot_wait_seconds: z.number().min(0).max(3600).optional(),
        max_tool_rounds: z.number().int().min(1).max(32).optional(),
      })
      .strict()
      .optional(),
    /** Replicated rooms. */
    rooms: z
      .object({
        /** Events per packed page a replica asks its authority for. */
        replication_page_limit: z.number().int().min(1).max(5000).optional(),
        /** Longest pause between a follower's reconnect attempts. */
        follow_max_backoff_seconds: z.number().positive().max(3600).optional(),
        /** Appends of one room per group commit (one transaction, one fsync). */
        max_appends_per_commit: z.number().int().min(1).max(1000).optional(),
        /** How long a small group commit may wait for more appends arriving one by one (0: never). */
        commit_linger_ms: z.number().int().min(0).max(MAX_COMMIT_LINGER_MS).optional(),
      })
      .strict()
      .optional(),
    /** The coordinated mesh (etcd): quorum rooms, leased authority, automatic failover. */
    coordinator: z
      .object({
        etcd: z
          .object({
            endpoints: z.array(z.string().min(1)).min(1),
            prefix: z.string().min(1).optional(),
            lease_ttl_seconds: z.number().int().min(1).max(3600).optional(),
          })
          .strict(),
        /** The part of the TTL an authority does not rely on (0.05-0.5). */
        safety_margin: z.number().min(0.05).max(0.5).optional(),
        /** A replica further behind than this leaves the in-sync set. */
        max_lag: z
          .object({ events: z.number().int().min(0).max(1_000_000).optional(), seconds: z.number().positive().max(3600).optional() })
          .strict()
          .optional(),
      })
      .strict()
      .optional(),
    /** How the other gateways of the coordinated mesh reach this one (grpc://host:port). */
    advertise_url: z
      .string()
      .regex(/^grpcs?:\/\/[^/\s]+$/, "grpc://host:port or grpcs://host:port")
      .optional(),
    /** A2A: every bot an agent A2A clients can call (cards, JSON-RPC on the HTTP port), and A2A agents as peers. */
    a2a: a2aSectionSchema.optional(),
    /** Bot-to-bot delivery. */
    delivery: z
      .object({
        max_parallel_targets: z.number().int().min(1).max(256).optional(),
        ttl_seconds: z.number().int().min(1).max(MAX_TTL_SECONDS).optional(),
        turn_timeout_seconds: z.number().positive().max(86_400).optional(),
        retry_delay_seconds: z.number().min(0).max(3600).optional(),
        peer_timeout_seconds: z.number().positive().max(86_400).optional(),
        sweep_seconds: z.number().positive().max(3600).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

export type GatewayConfigFile = z.infer<typeof gatewayConfigSchema>;

/** Everything a running gateway needs, after file, environment and flags are merged. */
export interface GatewaySettings {
  home: string;
  gatewayId?: string;
  grpc: string;
  http: string;
  apiKeys: string[];
  metricsPublic: boolean;
  /** Browser origins besides the gateway's own allowed on /rpc (canonical). */
  httpAllowedOrigins: string[];
  maxRpcConnections: number;
  routingPersistMs: number;
  heartbeatMs: number;
  shutdownGraceMs: number;
  dbBusyTimeoutMs: number;
  relay?: { url: string; key?: string; connection?: string };
  agents: AgentSettings;
  delivery: DeliverySettings;
  rooms: RoomsConfig;
  /** Set when a coordinator is configured (`coordinator.etcd`, HERMES_COORDINATOR, --coordinator). */
  coordinator?: CoordinatorSettings;
  /** The key gateways of the coordinated mesh call each other with (HERMES_MESH_KEY); also accepted like an API key. */
  meshKey?: string;
  a2a: A2aSettings;
  file: GatewayConfigFile;
}

/** A2A serving (`a2a:` in config.yaml; its callers and peers are read when used, so edits apply without a restart). */
export interface A2aSettings {
  enabled: boolean;
  /** The base URL cards advertise; without one, the address the caller reached. */
  publicUrl?: string;
  keepAliveMs: number;
}

export interface CoordinatorSettings {
  endpoints: string[];
  prefix: string;
  leaseTtlSeconds: number;
  safetyMargin: number;
  maxLag: { events: number; ms: number };
  /** From advertise_url / HERMES_ADVERTISE_URL / --advertise; else the gRPC listen address (when not a wildcard). */
  advertiseUrl?: string;
}

/** Rooms settings (`rooms:` in config.yaml). */
export interface RoomsConfig {
  replicationPageLimit: number;
  followMaxBackoffMs: number;
  maxAppendsPerCommit: number;
  /** rooms.commit_linger_ms, HERMES_COMMIT_LINGER_MS. */
  commitLingerMs: number;
}

export interface AgentSettings {
  maxWarm: number;
  idleMs: number;
  slotWaitMs: number;
  maxToolRounds: number;
}

export interface DeliverySettings {
  /** The global cap: delivery turns running at once across all targets (each target runs one at a time). */
  maxParallelTargets: number;
  ttlSeconds: number;
  turnTimeoutMs: number;
  /** Pause before the single retry (a rate-limited provider rarely recovers in 0 ms). */
  retryDelayMs: number;
  /** How long a peer's Deliver call may take before the sender calls it delivery_timeout. */
  peerTimeoutMs: number;
  /** How often queued deliveries past their TTL are expired. */
  sweepMs: number;
}

export interface SettingsOverrides {
  id?: string;
  grpc?: string;
  http?: string;
  relayUrl?: string;
  relayKey?: string;
  relayConnection?: string;
  /** `etcd://h1:2379,h2:2379` (or http:// URLs, comma-separated). */
  coordinator?: string;
  advertise?: string;
}

export const DEFAULT_GRPC = "127.0.0.1:7440";
export const DEFAULT_HTTP = "127.0.0.1:7441";
/** WebSocket connections a gateway serves at once unless `http.max_rpc_connections` says otherwise. */
export const DEFAULT_MAX_RPC_CONNECTIONS = 256;

/** How long a write waits for another connection's lock on a database (gateway.db_busy_timeout_ms). */
export const DEFAULT_DB_BUSY_TIMEOUT_MS = 5000;

/** A milliseconds variable (blank: undefined), held to the config file's bounds for it. */
function millisecondsFromEnv(value: string | undefined, name: string, max: number): number | undefined {
  return value === undefined ? undefined : parseMilliseconds(value, name, max);
}

/** HERMES_DB_BUSY_TIMEOUT_MS (blank: undefined), held to the config file's bounds. */
export function busyTimeoutFromEnv(value: string | undefined): number | undefined {
  return millisecondsFromEnv(value, "HERMES_DB_BUSY_TIMEOUT_MS", MAX_DB_BUSY_TIMEOUT_MS);
}

export function loadGatewayConfigFile(home: HermesHome): GatewayConfigFile {
  return validateConfig(gatewayConfigSchema, readYamlFile(home.configFile), home.configFile);
}

export function loadProfileConfig(home: HermesHome, profile: string): ModelConfig {
  if (profile === DEFAULT_PROFILE) {
    const {
      gateway: _g,
      http: _h,
      relay: _r,
      bot_peers: _p,
      agents: _a,
      delivery: _d,
      rooms: _rooms,
      coordinator: _c,
      advertise_url: _u,
      a2a: _a2a,
      ...model
    } = loadGatewayConfigFile(home);
    return model;
  }
  const file = join(home.profileDir(profile), "config.yaml");
  return validateConfig(modelConfigSchema, readYamlFile(file), file);
}

/** HERMES_HTTP_ALLOWED_ORIGINS: comma-separated origins (empty: none). */
function parseOriginList(value: string): string[] {
  return value
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v.length > 0)
    .map((v) => {
      const canonical = canonicalOrigin(v);
      if (canonical === undefined)
        throw new HermesError("invalid_config", `HERMES_HTTP_ALLOWED_ORIGINS: ${JSON.stringify(v)} is not ${ORIGIN_HINT}`);
      return canonical;
    });
}

/**
 * `etcd://h1:2379,h2:2379` → ["http://h1:2379", "http://h2:2379"]; a comma-separated list of
 * http(s):// URLs is taken as it is.
 */
export function parseCoordinatorUrl(value: string, where: string): string[] {
  const trimmed = value.trim();
  const parts = trimmed.startsWith("etcd://") ? trimmed.slice("etcd://".length).split(",") : trimmed.split(",");
  const endpoints = parts
    .map((p) => p.trim())
    .filter((p) => p.length > 0)
    .map((p) => (trimmed.startsWith("etcd://") ? `http://${p}` : p));
  if (endpoints.length === 0 || !endpoints.every((e) => /^https?:\/\/[^/\s]+$/.test(e))) {
    throw new HermesError(
      "invalid_config",
      `${where}: ${JSON.stringify(value)} is not etcd://host:port[,host:port…] (or http://host:port URLs, comma-separated)`,
    );
  }
  return endpoints;
}

/**
 * Merges config.yaml, environment (HERMES_GATEWAY_ID, HERMES_GRPC, HERMES_HTTP, API_SERVER_KEY,
 * HERMES_RELAY_URL, HERMES_RELAY_KEY, HERMES_RELAY_CONNECTION, HERMES_HTTP_ALLOWED_ORIGINS, also
 * read from HERMES_HOME/.env) and command-line flags, in that order of increasing precedence. Every
 * key source follows one rule (assertApiKey); an empty API_SERVER_KEY counts as unset.
 */
export function resolveGatewaySettings(home: HermesHome, overrides: SettingsOverrides = {}, env = process.env): GatewaySettings {
  const file = loadGatewayConfigFile(home);
  const dotenv = readEnvFile(home.envFile);
  // A blank variable is not set (HERMES_HTTP_ALLOWED_ORIGINS below is the exception: blank means none).
  const fromEnv = (name: string) => envValue(env, name) ?? envValue(dotenv, name);
  const g = file.gateway ?? {};
  const grpc = overrides.grpc ?? fromEnv("HERMES_GRPC") ?? g.grpc ?? DEFAULT_GRPC;
  const http = overrides.http ?? fromEnv("HERMES_HTTP") ?? g.http ?? DEFAULT_HTTP;
  const envKey = fromEnv("API_SERVER_KEY");
  if (envKey) assertApiKey(envKey, `API_SERVER_KEY (${env.API_SERVER_KEY !== undefined ? "environment" : home.envFile})`);
  const meshKey = fromEnv("HERMES_MESH_KEY");
  if (meshKey) assertApiKey(meshKey, `HERMES_MESH_KEY (${env.HERMES_MESH_KEY !== undefined ? "environment" : home.envFile})`);
  const apiKeys = [envKey, g.api_key, meshKey].filter((k): k is string => typeof k === "string" && k.length > 0);
  const coordinatorUrl = overrides.coordinator ?? fromEnv("HERMES_COORDINATOR");
  const endpoints = coordinatorUrl
    ? parseCoordinatorUrl(coordinatorUrl, overrides.coordinator ? "--coordinator" : "HERMES_COORDINATOR")
    : file.coordinator?.etcd.endpoints;
  const advertiseUrl = overrides.advertise ?? fromEnv("HERMES_ADVERTISE_URL") ?? file.advertise_url;
  if (advertiseUrl !== undefined && !/^grpcs?:\/\/[^/\s]+$/.test(advertiseUrl)) {
    throw new HermesError(
      "invalid_config",
      `the advertise URL ${JSON.stringify(advertiseUrl)} is not grpc://host:port or grpcs://host:port`,
    );
  }
  const relayUrl = overrides.relayUrl ?? fromEnv("HERMES_RELAY_URL") ?? file.relay?.url;
  const relayKey = overrides.relayKey ?? fromEnv("HERMES_RELAY_KEY") ?? file.relay?.key;
  const relayConnection = overrides.relayConnection ?? fromEnv("HERMES_RELAY_CONNECTION") ?? file.relay?.connection;
  const gatewayId = overrides.id ?? fromEnv("HERMES_GATEWAY_ID") ?? g.id;
  const originsFromEnv = env.HERMES_HTTP_ALLOWED_ORIGINS ?? dotenv.HERMES_HTTP_ALLOWED_ORIGINS;
  return {
    home: home.root,
    ...(gatewayId ? { gatewayId } : {}),
    grpc,
    http,
    apiKeys,
    metricsPublic: g.metrics_public ?? false,
    httpAllowedOrigins: originsFromEnv === undefined ? (file.http?.allowed_origins ?? []) : parseOriginList(originsFromEnv),
    maxRpcConnections: file.http?.max_rpc_connections ?? DEFAULT_MAX_RPC_CONNECTIONS,
    routingPersistMs: (g.routing_persist_seconds ?? 30) * 1000,
    heartbeatMs: (g.heartbeat_seconds ?? 30) * 1000,
    shutdownGraceMs: (g.shutdown_grace_seconds ?? 10) * 1000,
    dbBusyTimeoutMs: busyTimeoutFromEnv(fromEnv("HERMES_DB_BUSY_TIMEOUT_MS")) ?? g.db_busy_timeout_ms ?? DEFAULT_DB_BUSY_TIMEOUT_MS,
    ...(relayUrl
      ? {
          relay: {
            url: relayUrl,
            ...(relayKey ? { key: relayKey } : {}),
            ...(relayConnection ? { connection: relayConnection } : {}),
          },
        }
      : {}),
    agents: {
      maxWarm: file.agents?.max_warm ?? 32,
      idleMs: (file.agents?.idle_seconds ?? 600) * 1000,
      slotWaitMs: (file.agents?.slot_wait_seconds ?? 30) * 1000,
      maxToolRounds: file.agents?.max_tool_rounds ?? 4,
    },
    delivery: {
      maxParallelTargets: file.delivery?.max_parallel_targets ?? 8,
      ttlSeconds: file.delivery?.ttl_seconds ?? DEFAULT_TTL_SECONDS,
      turnTimeoutMs: (file.delivery?.turn_timeout_seconds ?? 600) * 1000,
      retryDelayMs: (file.delivery?.retry_delay_seconds ?? 1) * 1000,
      peerTimeoutMs: (file.delivery?.peer_timeout_seconds ?? 1800) * 1000,
      sweepMs: (file.delivery?.sweep_seconds ?? 5) * 1000,
    },
    rooms: {
      replicationPageLimit: file.rooms?.replication_page_limit ?? 5000,
      followMaxBackoffMs: (file.rooms?.follow_max_backoff_seconds ?? 30) * 1000,
      maxAppendsPerCommit: file.rooms?.max_appends_per_commit ?? 1000,
      commitLingerMs:
        millisecondsFromEnv(fromEnv("HERMES_COMMIT_LINGER_MS"), "HERMES_COMMIT_LINGER_MS", MAX_COMMIT_LINGER_MS) ??
        file.rooms?.commit_linger_ms ??
        DEFAULT_LINGER.maxMs,
    },
    ...(endpoints
      ? {
          coordinator: {
            endpoints,
            prefix: file.coordinator?.etcd.prefix ?? "/hermes",
            leaseTtlSeconds: file.coordinator?.etcd.lease_ttl_seconds ?? 10,
            safetyMargin: file.coordinator?.safety_margin ?? 0.2,
            maxLag: {
              events: file.coordinator?.max_lag?.events ?? 1000,
              ms: (file.coordinator?.max_lag?.seconds ?? 10) * 1000,
            },
            ...(advertiseUrl ? { advertiseUrl } : {}),
          },
        }
      : {}),
    ...(meshKey ? { meshKey } : {}),
    a2a: {
      enabled: file.a2a?.enabled ?? true,
      ...(file.a2a?.public_url ? { publicUrl: file.a2a.public_url.replace(/\/+$/, "") } : {}),
      keepAliveMs: (file.a2a?.keep_alive_seconds ?? 15) * 1000,
    },
    file,
  };
}

/**
 * Resolves the gRPC and HTTP listen addresses once (the gateway binds the addresses returned) and
 * refuses, without an API key, any that is not loopback: a name counts by the addresses it
 * resolves to, every one of which must be loopback, so `127.x.example` resolving to 0.0.0.0 is
 * refused like 0.0.0.0 itself.
 */
export async function resolveGatewayListen(
  home: HermesHome,
  settings: Pick<GatewaySettings, "grpc" | "http" | "apiKeys">,
  resolver?: HostResolver,
): Promise<{ grpc: ResolvedListen; http: ResolvedListen }> {
  const grpc = await resolveListenAddress(settings.grpc, "--grpc", resolver);
  const http = await resolveListenAddress(settings.http, "--http", resolver);
  const exposed = [grpc, http].filter((r) => !r.loopback);
  if (exposed.length > 0 && settings.apiKeys.length === 0) {
    throw new HermesError(
      "invalid_config",
      `refusing to listen on ${exposed.map(describeListen).join(" and ")} without an API key: set API_SERVER_KEY or gateway.api_key in ${home.configFile}, or bind to 127.0.0.1`,
    );
  }
  return { grpc, http };
}
