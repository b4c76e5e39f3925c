import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, createWriteStream, mkdirSync } from "node:fs";
import { delimiter, join } from "node:path";
import { HermesError } from "@hermes/common/client";

/**
 * The single-node etcd of `hermes up --coordinator`: the `etcd` binary (Debian's etcd-server, or
 * etcd.io's release) on 127.0.0.1, its data in DIR/etcd, its output in DIR/logs/etcd.log. It runs
 * in its own process group, is stopped after the gateways and killed when `hermes up` exits.
 */

export function findEtcd(env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of [...(env.PATH ?? "").split(delimiter).filter(Boolean), "/usr/bin", "/usr/local/bin"]) {
    const candidate = join(dir, "etcd");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export const ETCD_MISSING =
  "hermes up --coordinator needs the etcd binary, and none is on PATH: install it (Debian/Ubuntu: sudo apt-get install etcd-server, then sudo systemctl disable --now etcd; macOS: brew install etcd; or a release from https://github.com/etcd-io/etcd/releases), then run hermes up --coordinator again";

export class LocalEtcd {
  readonly endpoint: string;
  private readonly process: ChildProcess;
  readonly exited: Promise<void>;

  private constructor(binary: string, dataDir: string, logFile: string, ports: { client: number; peer: number }) {
    this.endpoint = `http://127.0.0.1:${ports.client}`;
    const peer = `http://127.0.0.1:${ports.peer}`;
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const log = createWriteStream(logFile, { flags: "a", mode: 0o600 });
    // argv, no shell: the paths may hold anything.
    this.process = spawn(
      binary,
      [
        "--name",
        "hermes-up",
        "--data-dir",
        dataDir,
        "--listen-client-urls",
        this.endpoint,
        "--advertise-client-urls",
        this.endpoint,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        `hermes-up=${peer}`,
      ],
      { stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    this.process.stdout!.pipe(log, { end: false });
    this.process.stderr!.pipe(log, { end: false });
    this.exited = new Promise((resolve) => this.process.once("exit", () => resolve()));
    void this.exited.then(() => log.end());
  }

  /** Starts etcd and waits until it reports healthy (20 s at most). */
  static async start(binary: string, dataDir: string, logFile: string, ports: { client: number; peer: number }): Promise<LocalEtcd> {
    const etcd = new LocalEtcd(binary, dataDir, logFile, ports);
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (etcd.process.exitCode !== null) throw new HermesError("unavailable", `etcd exited before it was healthy; see ${logFile}`);
      try {
        const res = await fetch(`${etcd.endpoint}/health`, { signal: AbortSignal.timeout(1000) });
        if (((await res.json()) as { health?: string }).health === "true") return etcd;
      } catch {
        // not up yet
      }
      if (Date.now() > deadline) {
        etcd.kill();
        throw new HermesError("unavailable", `etcd was not healthy within 20 s; see ${logFile}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs: number): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    this.process.kill("SIGTERM");
    const killer = setTimeout(() => this.kill(), graceMs);
    await this.exited;
    clearTimeout(killer);
  }

  kill(): void {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill("SIGKILL");
  }
}
