import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { eventually } from "./eventually.js";

/**
 * Real etcd processes for tests: the `etcd` binary of Debian's `etcd-server` package (on PATH or at
 * /usr/bin/etcd; `scripts/ensure-etcd.sh` installs it), on random free loopback ports, with a
 * temporary data folder removed at stop. Each process is watched by a small shell loop that kills it
 * if the test process dies first, so no etcd outlives a crashed test run.
 */

export function findEtcdBinary(): string | null {
  const dirs = [...(process.env.PATH ?? "").split(delimiter).filter(Boolean), "/usr/bin"];
  for (const dir of dirs) {
    const candidate = join(dir, "etcd");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export interface EtcdMember {
  name: string;
  /** The client URL, e.g. http://127.0.0.1:41234. */
  endpoint: string;
  peerUrl: string;
  dataDir: string;
  pid(): number;
  running(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL: like a crash. */
  kill9(): Promise<void>;
  /** SIGSTOP / SIGCONT: a frozen process (its ports stay bound, nothing answers). */
  pause(): void;
  resume(): void;
  /** Start it again on the same ports and data folder, after a stop or kill. */
  restart(): Promise<void>;
  output(): string;
}

export interface EtcdCluster {
  members: EtcdMember[];
  endpoints: string[];
  /** Stops every member and removes the data folders. */
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

interface MemberPlan {
  name: string;
  clientPort: number;
  peerPort: number;
  dataDir: string;
}

function etcdArgs(plan: MemberPlan, cluster: MemberPlan[], token: string, state: "new" | "existing"): string[] {
  const client = `http://127.0.0.1:${plan.clientPort}`;
  const peer = `http://127.0.0.1:${plan.peerPort}`;
  return [
    "--name",
    plan.name,
    "--data-dir",
    plan.dataDir,
    "--listen-client-urls",
    client,
    "--advertise-client-urls",
    client,
    "--listen-peer-urls",
    peer,
    "--initial-advertise-peer-urls",
    peer,
    "--initial-cluster",
    cluster.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(","),
    "--initial-cluster-token",
    token,
    "--initial-cluster-state",
    state,
    // Short heartbeats so elections (and the shortest lease TTL etcd grants, about 1 s) suit tests.
    "--heartbeat-interval",
    "50",
    "--election-timeout",
    "500",
    "--logger",
    "zap",
    "--log-level",
    "error",
  ];
}

class EtcdProcess implements EtcdMember {
  readonly name: string;
  readonly endpoint: string;
  readonly peerUrl: string;
  readonly dataDir: string;
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private log = "";
  private started = false;

  constructor(
    private readonly binary: string,
    private readonly plan: MemberPlan,
    private readonly cluster: MemberPlan[],
    private readonly token: string,
  ) {
    this.name = plan.name;
    this.endpoint = `http://127.0.0.1:${plan.clientPort}`;
    this.peerUrl = `http://127.0.0.1:${plan.peerPort}`;
    this.dataDir = plan.dataDir;
  }

  spawn(): void {
    const state = this.started ? "existing" : "new";
    this.started = true;
    const child = spawn(this.binary, etcdArgs(this.plan, this.cluster, this.token, state), { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    const keep = (d: Buffer) => {
      this.log = (this.log + d.toString("utf8")).slice(-20_000);
    };
    child.stdout!.on("data", keep);
    child.stderr!.on("data", keep);
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    // The watchdog: kill etcd when this test process is gone (pids as arguments, no interpolation).
    const watchdog = spawn(
      "sh",
      [
        "-c",
        'while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done; kill -9 "$2" 2>/dev/null',
        "watchdog",
        String(process.pid),
        String(child.pid),
      ],
      { stdio: "ignore", detached: true },
    );
    watchdog.unref();
  }

  pid(): number {
    return this.child?.pid ?? -1;
  }

  running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  async stop(graceMs = 5000): Promise<void> {
    if (!this.running()) return;
    this.child!.kill("SIGCONT");
    this.child!.kill("SIGTERM");
    const killer = setTimeout(() => this.child?.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(killer);
  }

  async kill9(): Promise<void> {
    if (this.running()) this.child!.kill("SIGKILL");
    await this.exited;
  }

  pause(): void {
    if (this.running()) this.child!.kill("SIGSTOP");
  }

  resume(): void {
    if (this.running()) this.child!.kill("SIGCONT");
  }

  async restart(): Promise<void> {
    await this.stop();
    this.spawn();
    await waitHealthy([this], 20_000);
  }

  output(): string {
    return this.log;
  }
}

/** Polls /health on each member until every one reports healthy (a cluster needs its leader). */
async function waitHealthy(members: EtcdProcess[], timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (const member of members) {
    await eventually(
      async () => {
        if (!member.running()) return; // never healthy now: said below
        const res = await fetch(`${member.endpoint}/health`, { signal: AbortSignal.timeout(1000) });
        const body = (await res.json()) as { health?: string };
        if (body.health !== "true") throw new Error(`not healthy yet:\n${member.output()}`);
      },
      { timeoutMs: Math.max(0, deadline - performance.now()), intervalMs: 50, what: `etcd ${member.name} to be healthy` },
    );
    if (!member.running()) throw new Error(`etcd ${member.name} exited before it was healthy:\n${member.output()}`);
  }
}

/**
 * A cluster of `size` members (1 for a single node). A port taken between choosing and binding
 * makes etcd exit; the whole start is retried then, a few times.
 */
export async function startEtcdCluster(size = 3, options: { timeoutMs?: number } = {}): Promise<EtcdCluster> {
  const binary = findEtcdBinary();
  if (!binary) throw new Error("no etcd binary on PATH or at /usr/bin/etcd: run scripts/ensure-etcd.sh (Debian package etcd-server)");
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const plans: MemberPlan[] = [];
    for (let i = 0; i < size; i++) {
      plans.push({
        name: `m${i}`,
        clientPort: await freePort(),
        peerPort: await freePort(),
        dataDir: mkdtempSync(join(tmpdir(), "hermes-etcd-")),
      });
    }
    const token = `hermes-test-${process.pid}-${Date.now()}-${attempt}`;
    const members = plans.map((plan) => new EtcdProcess(binary, plan, plans, token));
    for (const member of members) member.spawn();
    const cluster: EtcdCluster = {
      members,
      endpoints: members.map((m) => m.endpoint),
      async stop() {
        await Promise.all(members.map((m) => m.stop()));
        for (const plan of plans) rmSync(plan.dataDir, { recursive: true, force: true });
      },
    };
    try {
      await waitHealthy(members, options.timeoutMs ?? 20_000);
      return cluster;
    } catch (err) {
      lastError = err;
      await cluster.stop();
    }
  }
  throw lastError;
}

/** One etcd member. */
export async function startEtcd(): Promise<EtcdMember & { stopAll(): Promise<void> }> {
  const cluster = await startEtcdCluster(1);
  return Object.assign(cluster.members[0]!, { stopAll: () => cluster.stop() });
}

/** A loopback URL on which nothing listens (for "etcd down at start"). */
export async function deadEndpoint(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}
