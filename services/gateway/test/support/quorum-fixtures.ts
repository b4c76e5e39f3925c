import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "./gateway-harness.js";

/**
 * Gateways of one coordinated mesh on a real etcd (test/support/etcd.ts): in-process
 * (`startQuorumGateway`) or as processes of the built CLI (`startQuorumProcess`, for kill -9 and
 * SIGSTOP). Short leases (2 s) and a short max_lag (1 s) keep every test bounded.
 */

export const MESH_KEY = "mesh-key-0123456789abcdef";
export const TTL_SECONDS = 2;
export const MAX_LAG_SECONDS = 1;

let prefixes = 0;

/** A prefix of its own per test: tests share one etcd without seeing each other. */
export function freshPrefix(): string {
  prefixes += 1;
  return `/qt-${process.pid}-${prefixes}`;
}

export interface MeshConfig {
  endpoint: string;
  prefix: string;
  ttlSeconds?: number;
  maxLagSeconds?: number;
}

/** A new home whose config.yaml names the mesh's etcd. */
export function quorumHome(config: MeshConfig): string {
  const home = mkdtempSync(join(tmpdir(), "hermes-quorum-"));
  writeFileSync(
    join(home, "config.yaml"),
    [
      "coordinator:",
      "  etcd:",
      `    endpoints: ["${config.endpoint}"]`,
      `    prefix: ${config.prefix}`,
      `    lease_ttl_seconds: ${config.ttlSeconds ?? TTL_SECONDS}`,
      "  max_lag:",
      "    events: 1000",
      `    seconds: ${config.maxLagSeconds ?? MAX_LAG_SECONDS}`,
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  return home;
}

export function removeHome(home: string): void {
  rmSync(home, { recursive: true, force: true });
}

/** An in-process gateway of the mesh (`home` reused for a restart). */
export function startQuorumGateway(id: string, config: MeshConfig, home = quorumHome(config)): Promise<TestGateway> {
  return startTestGateway({ home, overrides: { id }, env: { API_SERVER_KEY: TEST_KEY, HERMES_MESH_KEY: MESH_KEY } });
}

/** A gateway of the mesh as a process of the built CLI. */
export function startQuorumProcess(id: string, home: string, extraEnv: Record<string, string> = {}): Promise<DaemonProcess> {
  return startGatewayProcess(home, {
    args: ["--id", id],
    env: { API_SERVER_KEY: TEST_KEY, HERMES_MESH_KEY: MESH_KEY, ...extraEnv },
  });
}

export const MEMBERS = [
  { member_id: "ann", profile: "ann" },
  { member_id: "bob", profile: "bob" },
];
