import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestGateway, TEST_KEY, type TestGateway } from "./gateway-harness.js";

/**
 * Gateways of one coordinated mesh on a real etcd (test/support/etcd.ts), in this process
 * (`startQuorumGateway`; quorum-processes.ts starts them as processes). Short leases (4 s) and a
 * short max_lag (1 s) keep every test bounded.
 */

export const MESH_KEY = "mesh-key-0123456789abcdef";
/** Three gateways share this process's event loop on a busy machine: a stall of a second or two must not cost the lease. */
export const TTL_SECONDS = 4;
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

export const MEMBERS = [
  { member_id: "ann", profile: "ann" },
  { member_id: "bob", profile: "bob" },
];
