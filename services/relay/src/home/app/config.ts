import { join } from "node:path";
import { envValue, parseHostPort, readYamlFile, validateConfig } from "@hermes/common";
import { z } from "zod";

export const DEFAULT_RELAY_GRPC = "127.0.0.1:7450";
export const DEFAULT_RELAY_HTTP = "127.0.0.1:7451";

const hostPort = z.string().refine((v) => {
  try {
    parseHostPort(v);
    return true;
  } catch {
    return false;
  }
}, "expected HOST:PORT such as 127.0.0.1:7450");

/** DATA/relay.yaml (optional): everything has a default. */
export const relayConfigSchema = z
  .object({
    grpc: hostPort.optional(),
    http: hostPort.optional(),
    metrics_public: z.boolean().optional(),
    /** Targets (bots) receiving a delivery at the same time; each target still gets one at a time. */
    max_parallel_targets: z.number().int().min(1).max(4096).optional(),
    /** How long ended deliveries are remembered (a repeat within it gets the stored outcome). */
    retention_hours: z
      .number()
      .positive()
      .max(24 * 365)
      .optional(),
    sweep_seconds: z.number().positive().max(3600).optional(),
    /** Server keepalive pings to gateways (detects dead NAT paths from this side too). */
    keepalive_seconds: z.number().positive().max(3600).optional(),
    /** The shortest client ping interval tolerated without data (gateways ping every 20 s by default). */
    min_client_ping_seconds: z.number().positive().max(3600).optional(),
    tunnel_timeout_seconds: z.number().positive().max(3600).optional(),
    shutdown_grace_seconds: z.number().positive().max(300).optional(),
  })
  .strict();

export type RelayConfigFile = z.infer<typeof relayConfigSchema>;

export interface RelaySettings {
  dataDir: string;
  grpc: string;
  http: string;
  metricsPublic: boolean;
  maxParallelTargets: number;
  retentionMs: number;
  sweepMs: number;
  keepaliveMs: number;
  minClientPingMs: number;
  /** How long a gateway has to send its hello after opening the stream. */
  helloTimeoutMs: number;
  tunnelTimeoutMs: number;
  shutdownGraceMs: number;
}

export interface RelayOverrides {
  grpc?: string | undefined;
  http?: string | undefined;
  /** Test and bench knobs; operators use relay.yaml. */
  settings?: Partial<Omit<RelaySettings, "dataDir" | "grpc" | "http">>;
}

export function relayConfigFile(dataDir: string): string {
  return join(dataDir, "relay.yaml");
}

/** relay.yaml, then the environment (HERMES_RELAY_GRPC, HERMES_RELAY_HTTP; blank: not set), then flags. */
export function resolveRelaySettings(dataDir: string, overrides: RelayOverrides = {}, env = process.env): RelaySettings {
  const file = relayConfigFile(dataDir);
  const cfg = validateConfig(relayConfigSchema, readYamlFile(file), file);
  const grpc = overrides.grpc ?? envValue(env, "HERMES_RELAY_GRPC") ?? cfg.grpc ?? DEFAULT_RELAY_GRPC;
  const http = overrides.http ?? envValue(env, "HERMES_RELAY_HTTP") ?? cfg.http ?? DEFAULT_RELAY_HTTP;
  return {
    dataDir,
    grpc,
    http,
    metricsPublic: cfg.metrics_public ?? false,
    maxParallelTargets: cfg.max_parallel_targets ?? 64,
    retentionMs: (cfg.retention_hours ?? 24) * 3_600_000,
    sweepMs: (cfg.sweep_seconds ?? 1) * 1000,
    keepaliveMs: (cfg.keepalive_seconds ?? 30) * 1000,
    minClientPingMs: (cfg.min_client_ping_seconds ?? 5) * 1000,
    helloTimeoutMs: 10_000,
    tunnelTimeoutMs: (cfg.tunnel_timeout_seconds ?? 60) * 1000,
    shutdownGraceMs: (cfg.shutdown_grace_seconds ?? 5) * 1000,
    ...overrides.settings,
  };
}
