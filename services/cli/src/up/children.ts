import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { fileURLToPath } from "node:url";
import { DAEMON_NODE_FLAGS, HermesError } from "@hermes/common/client";

/**
 * The daemons of `hermes up` as child processes of the same built CLI. Each runs in its own process
 * group (detached), so a Ctrl-C in the terminal reaches `hermes up` alone, which then stops the
 * gateways before the relay, each with SIGTERM (graceful) and SIGKILL after a grace period.
 */

/** bin/hermes.js of this package (from dist/up/ or src/up/ alike). */
export const HERMES_BIN = fileURLToPath(new URL("../../bin/hermes.js", import.meta.url));

/** Variables that would point a child at another home, gateway, relay or key than the one given. */
const INHERITED_OVERRIDES = [
  "HERMES_HOME",
  "HERMES_GATEWAY",
  "HERMES_KEY",
  "HERMES_GATEWAY_ID",
  "HERMES_GRPC",
  "HERMES_HTTP",
  "HERMES_RELAY_URL",
  "HERMES_RELAY_KEY",
  "HERMES_RELAY_DATA",
  "API_SERVER_KEY",
  "HERMES_COORDINATOR",
  "HERMES_ADVERTISE_URL",
  "HERMES_MESH_KEY",
];

export interface ChildSpec {
  name: string;
  /** Arguments after `hermes`. */
  args: string[];
  /** "gateway" or "relay": the ready line is `<kind> ready: k=v …`. */
  kind: "gateway" | "relay";
  /** stdout and stderr are appended here. */
  logFile: string;
  timeoutMs?: number;
}

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const TAIL_LINES = 40;

export class Child {
  readonly process: ChildProcess;
  readonly exited: Promise<ChildExit>;
  private readonly tailLines: string[] = [];
  private readonly log: WriteStream;
  private stdoutBuffer = "";

  constructor(readonly spec: ChildSpec) {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const name of INHERITED_OVERRIDES) delete env[name];
    this.log = createWriteStream(spec.logFile, { flags: "a", mode: 0o600 });
    this.log.write(`--- ${new Date().toISOString()} hermes ${spec.args.join(" ")}\n`);
    this.process = spawn(process.execPath, [...DAEMON_NODE_FLAGS, HERMES_BIN, ...spec.args], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    this.exited = new Promise((resolve) => this.process.once("exit", (code, signal) => resolve({ code, signal })));
    void this.exited.then(() => this.log.end());
    for (const stream of [this.process.stdout!, this.process.stderr!]) {
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        this.log.write(chunk);
        this.tailLines.push(...chunk.split("\n").filter((l) => l.length > 0));
        if (this.tailLines.length > TAIL_LINES) this.tailLines.splice(0, this.tailLines.length - TAIL_LINES);
      });
    }
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  get running(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  /** The last lines the child printed (for error messages). */
  tail(): string {
    return this.tailLines.join("\n");
  }

  /** Resolves with the fields of the ready line (`id`, `grpc`, `http`, …); rejects if it exits first. */
  ready(): Promise<Record<string, string>> {
    const pattern = new RegExp(`^${this.spec.kind} ready: (.*)$`, "m");
    const timeoutMs = this.spec.timeoutMs ?? 60_000;
    return new Promise((resolve, reject) => {
      const fail = (why: string) =>
        reject(
          new HermesError("unavailable", `${this.spec.name} ${why}; its last output (full log: ${this.spec.logFile}):\n${this.tail()}`, {
            data: { child: this.spec.name },
          }),
        );
      const timer = setTimeout(() => {
        this.kill("SIGKILL");
        fail(`was not ready within ${timeoutMs / 1000} s`);
      }, timeoutMs);
      const onData = (chunk: string) => {
        this.stdoutBuffer += chunk;
        const line = pattern.exec(this.stdoutBuffer);
        if (!line) return;
        clearTimeout(timer);
        this.process.stdout!.off("data", onData);
        resolve(Object.fromEntries(line[1]!.split(" ").map((kv) => kv.split("=", 2) as [string, string])));
      };
      this.process.stdout!.on("data", onData);
      void this.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        fail(`exited (code ${code}, signal ${signal}) before it was ready`);
      });
    });
  }

  kill(signal: NodeJS.Signals): void {
    if (this.running) this.process.kill(signal);
  }

  /** SIGTERM, then SIGKILL if it is still running after `graceMs`. */
  async stop(graceMs: number): Promise<ChildExit> {
    this.kill("SIGTERM");
    const killer = setTimeout(() => this.kill("SIGKILL"), graceMs);
    const exit = await this.exited;
    clearTimeout(killer);
    return exit;
  }
}

/** True when a child's output says its port was taken (worth another try with other ports). */
export function lostPortRace(err: unknown, child: Child): boolean {
  return /EADDRINUSE|address already in use/i.test(`${(err as Error)?.message ?? ""}\n${child.tail()}`);
}
