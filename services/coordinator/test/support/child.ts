import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { eventually } from "../../../../test/support/eventually.js";

const CHILD = fileURLToPath(new URL("./coordinator-child.mjs", import.meta.url));

export type ChildEvent = { event: string } & Record<string, unknown>;

export interface CoordinatorChild {
  process: ChildProcess;
  events: ChildEvent[];
  /** The first event (from the start) matching `match`, waited for. */
  next(match: (e: ChildEvent) => boolean, what: string, timeoutMs?: number): Promise<ChildEvent>;
  send(command: string): void;
  kill9(): Promise<void>;
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/** A separate node process holding its own Coordinator (test/support/coordinator-child.mjs, on the built package). */
export async function startCoordinatorChild(
  endpoints: string[],
  prefix: string,
  gatewayId: string,
  ttlSeconds = 2,
): Promise<CoordinatorChild> {
  const child = spawn(process.execPath, [CHILD, endpoints.join(","), prefix, gatewayId, String(ttlSeconds)], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  const events: ChildEvent[] = [];
  let stderr = "";
  let buffered = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  child.stdout!.setEncoding("utf8").on("data", (d: string) => {
    buffered += d;
    for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
      events.push(JSON.parse(buffered.slice(0, nl)) as ChildEvent);
      buffered = buffered.slice(nl + 1);
    }
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;
  const handle: CoordinatorChild = {
    process: child,
    events,
    async next(match, what, timeoutMs = 15_000) {
      await eventually(() => events.some(match) || !running(), { timeoutMs, what });
      const found = events.find(match);
      if (!found) throw new Error(`${gatewayId} exited before ${what}; stderr: ${stderr}`);
      return found;
    },
    send: (command) => child.stdin!.write(`${command}\n`),
    async kill9() {
      if (running()) child.kill("SIGKILL");
      await exited;
    },
    pause: () => child.kill("SIGSTOP"),
    resume: () => child.kill("SIGCONT"),
    async stop() {
      if (!running()) return;
      child.kill("SIGCONT");
      child.stdin!.end();
      const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(killer);
    },
  };
  await handle.next((e) => e.event === "ready", `${gatewayId} ready`);
  return handle;
}
