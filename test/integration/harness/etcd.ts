// An etcd cluster in containers (the image of Debian's etcd-server built by the global setup), on
// the mesh's networks like the gateways, so the same faults apply to its members: crash() (kill -9
// of the container, the data volume stays) + restart(), pause()/resume() (SIGSTOP/SIGCONT), and
// mesh.cut(member, gateway) / mesh.cutAll(...) partitions with nft inside the containers.
//
//   const etcd = await mesh.etcdCluster({ networks: [lan] });     // etcd-0..2, healthy
//   mesh.gateway({ ..., args: ["--coordinator", etcd.coordinatorUrl] });
//   await etcd.members[0].crash(); ...; await etcd.members[0].restart(); await etcd.waitHealthy();
//   const record = await etcd.get("/hermes/rooms/ops/authority");   // from the test process
//
// Timing flags are etcd's defaults (heartbeat 100 ms, election 1 s): shorter ones cause spurious
// elections on a loaded 2-core machine, and a lease's TTL only needs to exceed 1.5 elections.
import { Wait } from "testcontainers";
import { type MeshNetwork, MeshNode } from "./node.js";
import { eventually } from "./wait.js";

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;
/** Printed once the member's peer listener serves, before it has a quorum (a lone restarted member prints it too). */
const STARTED_LINE = /"msg":"serving peer traffic"/;

export interface EtcdClusterOptions {
  /** Member names are `<name>-0`, `<name>-1`, …; default "etcd". */
  name?: string;
  networks: MeshNetwork[];
  /** Default 3. */
  members?: number;
}

export class EtcdNode extends MeshNode {
  /** http://<alias>:2379, for containers on a shared network. */
  get clientUrl(): string {
    return `http://${this.name}:${ETCD_CLIENT_PORT}`;
  }

  /** http://localhost:<mapped>, for the test process (changes across restarts). */
  get hostClientUrl(): string {
    return this.hostUrl(ETCD_CLIENT_PORT);
  }

  /** True when the member answers /health with a leader (false when down, paused, or without a quorum). */
  async healthy(timeoutMs = 1_000): Promise<boolean> {
    if (!this.running) return false;
    try {
      const res = await fetch(`${this.hostClientUrl}/health`, { signal: AbortSignal.timeout(timeoutMs) });
      return ((await res.json()) as { health?: string }).health === "true";
    } catch {
      return false;
    }
  }
}

export class EtcdCluster {
  constructor(readonly members: EtcdNode[]) {}

  /** Client URLs inside the networks (what `coordinator.etcd.endpoints` lists). */
  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /** What `--coordinator` / HERMES_COORDINATOR takes: etcd://etcd-0:2379,etcd-1:2379,etcd-2:2379. */
  get coordinatorUrl(): string {
    return `etcd://${this.members.map((m) => `${m.name}:${ETCD_CLIENT_PORT}`).join(",")}`;
  }

  /** A majority of the members (2 of 3): stopping these takes the quorum away. */
  majority(): EtcdNode[] {
    return this.members.slice(0, Math.floor(this.members.length / 2) + 1);
  }

  /** Waits until every running member (or the given ones) reports a leader. */
  async waitHealthy(members: EtcdNode[] = this.members.filter((m) => m.running), timeoutMs = 30_000): Promise<void> {
    await eventually(async () => (await Promise.all(members.map((m) => m.healthy()))).every(Boolean), {
      what: `etcd members ${members.map((m) => m.name).join(", ")} healthy`,
      timeoutMs,
      intervalMs: 200,
    });
  }

  /** True while some running member has a leader (i.e. the cluster has a quorum). */
  async hasQuorum(): Promise<boolean> {
    return (await Promise.all(this.members.map((m) => m.healthy()))).some(Boolean);
  }

  /** The value of one key (linearizable read), or null when absent. Throws when no member answers. */
  async get(key: string): Promise<string | null> {
    const body = (await this.call("/v3/kv/range", { key: b64(key) })) as { kvs?: Array<{ value?: string }> };
    const value = body.kvs?.[0]?.value;
    return value === undefined ? null : Buffer.from(value, "base64").toString("utf8");
  }

  /** Writes one key (e.g. a hand edit of a record). Throws when no member answers. */
  async put(key: string, value: string): Promise<void> {
    await this.call("/v3/kv/put", { key: b64(key), value: b64(value) });
  }

  /** etcd's JSON gateway from the test process, on the first running member that answers. */
  private async call(path: string, request: unknown): Promise<unknown> {
    const problems: string[] = [];
    for (const m of this.members.filter((n) => n.running && !n.paused)) {
      try {
        const res = await fetch(`${m.hostClientUrl}${path}`, {
          method: "POST",
          body: JSON.stringify(request),
          signal: AbortSignal.timeout(2_000),
        });
        if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
        return await res.json();
      } catch (err) {
        problems.push(`${m.name}: ${(err as Error).message}`);
      }
    }
    throw new Error(`no etcd member answered ${path}: ${problems.join("; ") || "none running"}`);
  }
}

const b64 = (text: string) => Buffer.from(text).toString("base64");

/** `etcd` arguments of member `name` of a cluster of `names` (token: unique per cluster). */
export function etcdMemberCommand(name: string, names: string[], token: string): string[] {
  return [
    "--name",
    name,
    "--data-dir",
    "/data/etcd",
    "--listen-client-urls",
    `http://0.0.0.0:${ETCD_CLIENT_PORT}`,
    "--advertise-client-urls",
    `http://${name}:${ETCD_CLIENT_PORT}`,
    "--listen-peer-urls",
    `http://0.0.0.0:${ETCD_PEER_PORT}`,
    "--initial-advertise-peer-urls",
    `http://${name}:${ETCD_PEER_PORT}`,
    "--initial-cluster",
    names.map((n) => `${n}=http://${n}:${ETCD_PEER_PORT}`).join(","),
    // Ignored once the data folder exists (a restart rejoins with what is on its volume).
    "--initial-cluster-state",
    "new",
    "--initial-cluster-token",
    token,
    "--logger",
    "zap",
  ];
}

/** A fresh wait strategy per start: the peer listener serves (no quorum needed). */
export const etcdStarted = () => Wait.forLogMessage(STARTED_LINE);
