import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * Gateways and relays as real processes of the BUILT `hermes` command, for tests that kill -9,
 * restart or drive them from outside. The process project's global setup (build-once.ts) runs
 * `tsc -b` first, so the build always matches the sources under test.
 */
export const HERMES_BIN = fileURLToPath(new URL("../../services/cli/bin/hermes.js", import.meta.url));

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface DaemonProcess {
  child: ChildProcess;
  grpc: string;
  http: string;
  /** Every field of the ready line (`id`, `grpc`, `http`, `control`, `data`, …). */
  ready: Record<string, string>;
  output(): { stdout: string; stderr: string };
  exited: Promise<Exit>;
  /** SIGKILL: no shutdown code runs, exactly like a crash. */
  kill9(): Promise<void>;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<Exit>;
}

export interface DaemonOptions {
  /** Extra arguments after `gateway start` / `relay start`. */
  args?: string[];
  /** Added to the environment (logs are silenced unless HERMES_LOG_LEVEL is given). */
  env?: Record<string, string>;
  /** Replace the environment instead of adding to the test process's own. */
  isolatedEnv?: boolean;
  grpc?: string;
  http?: string;
  timeoutMs?: number;
}

function startDaemon(kind: "gateway" | "relay", args: string[], options: DaemonOptions): Promise<DaemonProcess> {
  const base = options.isolatedEnv ? { PATH: process.env.PATH ?? "" } : process.env;
  const child = spawn(process.execPath, [HERMES_BIN, ...args], {
    env: { ...base, HERMES_LOG_LEVEL: "silent", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = new Promise<Exit>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const running = () => child.exitCode === null && child.signalCode === null;
  const timeoutMs = options.timeoutMs ?? 30_000;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${kind} not ready within ${timeoutMs} ms; stdout: ${stdout}; stderr: ${stderr}`));
    }, timeoutMs);
    const onData = () => {
      const line = new RegExp(`^${kind} ready: (.*)$`, "m").exec(stdout);
      if (!line) return;
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      const ready = Object.fromEntries(line[1]!.split(" ").map((kv) => kv.split("=", 2) as [string, string]));
      resolve({
        child,
        grpc: ready.grpc!,
        http: ready.http!,
        ready,
        output: () => ({ stdout, stderr }),
        exited,
        async kill9() {
          if (running()) child.kill("SIGKILL");
          await exited;
        },
        async stop(graceMs = 10_000) {
          if (!running()) return exited;
          child.kill("SIGTERM");
          const killer = setTimeout(() => child.kill("SIGKILL"), graceMs);
          const result = await exited;
          clearTimeout(killer);
          return result;
        },
      });
    };
    child.stdout!.on("data", onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${kind} exited (code ${code}, signal ${signal}) before it was ready; stdout: ${stdout}; stderr: ${stderr}`));
    });
  });
}

/** `hermes --home HOME gateway start` on ephemeral loopback ports unless given. */
export function startGatewayProcess(home: string, options: DaemonOptions = {}): Promise<DaemonProcess> {
  const args = [
    "--home",
    home,
    "gateway",
    "start",
    "--grpc",
    options.grpc ?? "127.0.0.1:0",
    "--http",
    options.http ?? "127.0.0.1:0",
    ...(options.args ?? []),
  ];
  return startDaemon("gateway", args, options);
}

/** `hermes relay start --data DIR` on ephemeral loopback ports unless given. */
export function startRelayProcess(dataDir: string, options: DaemonOptions = {}): Promise<DaemonProcess> {
  const args = [
    "relay",
    "start",
    "--data",
    dataDir,
    "--grpc",
    options.grpc ?? "127.0.0.1:0",
    "--http",
    options.http ?? "127.0.0.1:0",
    ...(options.args ?? []),
  ];
  return startDaemon("relay", args, options);
}
