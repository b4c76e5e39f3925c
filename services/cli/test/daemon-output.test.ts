import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HERMES_BIN } from "../../../test/support/daemons.js";
import { eventually } from "../../../test/support/eventually.js";
import { assertBuilt, cleanEnv, hermes, removeHome, tempHome } from "./support/cli-harness.js";

/**
 * A daemon whose output goes away keeps serving: `hermes gateway start | head -1`, or a log
 * collector that died. Its writes to the closed pipes fail (EPIPE) and are dropped; before, the
 * ready line's write ended the process.
 */

const homes: string[] = [];
beforeAll(() => assertBuilt());
afterAll(() => {
  for (const home of homes) removeHome(home);
});

function newHome(prefix?: string): string {
  const home = tempHome(prefix);
  homes.push(home);
  return home;
}

/** `hermes ARGS…` with stdout and stderr pipes whose read ends are closed at once, before the ready line. */
function startWithClosedOutput(args: string[]): { child: ChildProcess; exited: Promise<{ code: number | null; signal: string | null }> } {
  const child = spawn(process.execPath, [HERMES_BIN, ...args], {
    env: cleanEnv({ HERMES_LOG_LEVEL: "debug" }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.destroy();
  child.stderr!.destroy();
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, exited };
}

async function stop(daemon: ReturnType<typeof startWithClosedOutput>, signal: NodeJS.Signals = "SIGTERM") {
  daemon.child.kill(signal);
  const killer = setTimeout(() => daemon.child.kill("SIGKILL"), 10_000);
  const exit = await daemon.exited;
  clearTimeout(killer);
  return exit;
}

describe("daemons with closed stdout and stderr", () => {
  it("a gateway becomes ready, answers, logs, and stops with exit 0", async () => {
    const home = newHome();
    const gw = startWithClosedOutput(["--home", home, "gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
    try {
      await eventually(async () => expect((await hermes(["gateway", "status"], { home })).code).toBe(0), {
        what: "the gateway answering on its control socket",
        timeoutMs: 30_000,
        intervalMs: 200,
      });
      expect((await hermes(["profile", "create", "bob"], { home })).code).toBe(0);
      for (let i = 0; i < 3; i++) {
        const chat = await hermes(["-p", "bob", "chat", "-q", `héllo ${i} 😀`], { home });
        expect(chat.code, chat.stderr).toBe(0);
        expect(chat.stdout).toContain(`héllo ${i} 😀`);
      }
    } finally {
      expect(await stop(gw)).toEqual({ code: 0, signal: null });
    }
  });

  it("hermes up keeps supervising its mesh and, on Ctrl-C, stops it and exits 0", async () => {
    const dir = join(newHome("hup-"), "mesh");
    const up = startWithClosedOutput(["up", "--dir", dir, "--gateways", "1"]);
    try {
      await eventually(async () => expect((await hermes(["gateway", "status"], { home: join(dir, "gw-1") })).code).toBe(0), {
        what: "gw-1 of the mesh answering",
        timeoutMs: 60_000,
        intervalMs: 250,
      });
      const chat = await hermes(["-p", "alice", "chat", "-q", "héllo"], { home: join(dir, "gw-1") });
      expect(chat.code, chat.stderr).toBe(0);
    } finally {
      expect(await stop(up, "SIGINT")).toEqual({ code: 0, signal: null });
    }
    expect((await hermes(["gateway", "status"], { home: join(dir, "gw-1") })).code).toBe(1);
  });

  it("so does a relay", async () => {
    const data = newHome("hrelay-");
    const relay = startWithClosedOutput(["relay", "start", "--data", data, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
    try {
      await eventually(async () => expect((await hermes(["relay", "status", "--data", data])).code).toBe(0), {
        what: "the relay answering on its control socket",
        timeoutMs: 30_000,
        intervalMs: 200,
      });
      expect((await hermes(["relay", "key", "add", "laptop", "--data", data])).code).toBe(0);
    } finally {
      expect(await stop(relay)).toEqual({ code: 0, signal: null });
    }
  });
});
