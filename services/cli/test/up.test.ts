import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import { assertBuilt, cleanEnv, HERMES_BIN, removeHome, tempHome } from "./support/cli-harness.js";

/**
 * `hermes up` as a newcomer runs it (the built CLI as a subprocess, in a folder of its own): it
 * starts a relay and three gateways, prints where they are and what to try; the printed commands
 * work as printed; SIGINT stops every child; a second run on the same folder reuses it (same
 * ports, keys, bots and room) and a concurrent one is refused.
 */

interface Up {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

let workDir: string;
const running: Up[] = [];

beforeAll(() => {
  assertBuilt();
  workDir = tempHome("hup-");
  mkdirSync(workDir, { recursive: true });
});

afterAll(async () => {
  for (const u of running) {
    if (u.child.exitCode === null) {
      u.child.kill("SIGINT");
      await u.exited;
    }
  }
  if (workDir) removeHome(workDir);
});

/** `hermes up --dir mesh` started from workDir, so the printed homes are relative to it ("mesh/gw-1"). */
function startUp(args: string[] = []): Up {
  const child = spawn(process.execPath, [HERMES_BIN, "up", "--dir", "mesh", ...args], {
    cwd: workDir,
    env: cleanEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const up = { child, output: () => out, exited };
  running.push(up);
  return up;
}

async function ready(up: Up, timeoutMs = 90_000): Promise<string> {
  await printed(up, /^mesh ready: /m, timeoutMs);
  return up.output();
}

/** Splits a printed command line into argv (words; "double quoted" words keep their spaces). */
function argv(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

/** The printed "what to try" commands, as argv after `npx hermes`. */
function printedCommands(output: string): string[][] {
  return output
    .split("\n")
    .filter((l) => l.startsWith("  npx hermes "))
    .map((l) => argv(l.trim()).slice(2));
}

/** Runs a printed command the way a user would from workDir (no shell: argv as printed). */
function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HERMES_BIN, ...args], { cwd: workDir, env: cleanEnv(), timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The table rows: NAME GRPC HTTP HOME BOTS… PID. */
function table(output: string): Map<string, { grpc: string; pid: number }> {
  const rows = new Map<string, { grpc: string; pid: number }>();
  for (const line of output.split("\n")) {
    const m = /^(relay|gw-\d)\s+(127\.0\.0\.1:\d+)\s+127\.0\.0\.1:\d+\s+.*\s(\d+)$/.exec(line);
    if (m) rows.set(m[1]!, { grpc: m[2]!, pid: Number(m[3]) });
  }
  return rows;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits until the output matches (a line hermes up prints when something happens), returning the match. */
async function printed(up: Up, pattern: RegExp, timeoutMs = 60_000): Promise<RegExpExecArray> {
  await eventually(
    () => {
      if (up.child.exitCode !== null) return; // it never prints it now: said below
      expect(up.output()).toMatch(pattern);
    },
    { timeoutMs, intervalMs: 100, what: `hermes up to print ${pattern}` },
  );
  const m = pattern.exec(up.output());
  if (!m) throw new Error(`hermes up exited ${up.child.exitCode} before printing ${pattern}:\n${up.output()}`);
  return m;
}

async function profileNames(home: string): Promise<string[]> {
  const r = await run(["--home", home, "--json", "profile", "list"]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { profiles: { name: string }[] }).profiles.map((p) => p.name).sort();
}

async function stopWithSigint(up: Up): Promise<number | null> {
  up.child.kill("SIGINT");
  return up.exited;
}

describe("hermes up", () => {
  let firstTable: Map<string, { grpc: string; pid: number }>;

  it("starts a relay and three gateways with demo bots and a replicated room; the printed commands work", async () => {
    const up = startUp();
    const out = await ready(up);
    firstTable = table(out);
    expect([...firstTable.keys()]).toEqual(["relay", "gw-1", "gw-2", "gw-3"]);
    // Each bot with its model; the stand-in is named as such, with the one command that replaces it.
    expect(out).toMatch(/gw-1 .*alice \(Researcher, local\), bob \(Writer, local\)/);
    expect(out).toContain("model `local`: the built-in stand-in, deterministic canned replies with no model and no network");
    expect(printedCommands(out)).toContainEqual(
      "--home mesh/gw-1 profile set alice --provider openai --base-url http://127.0.0.1:11434/v1 --model llama3.2".split(" "),
    );
    expect(out).toMatch(/room lobby: authority gw-1@1, replicas following on gw-2, gw-3/);
    // Each gateway's web console, with a one-time login link that logs in once.
    for (const gw of ["gw-1", "gw-2", "gw-3"]) {
      expect(out).toMatch(
        new RegExp(`^  ${gw}: http://127\\.0\\.0\\.1:(\\d+)/    login: http://127\\.0\\.0\\.1:\\1/login\\?token=[\\w-]{43}$`, "m"),
      );
    }
    const link = new URL(/^ {2}gw-2: \S+ {4}login: (\S+)$/m.exec(out)![1]!);
    const logIn = () =>
      fetch(new URL("/login", link), {
        method: "POST",
        redirect: "manual",
        headers: { origin: link.origin, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: link.searchParams.get("token")! }),
      });
    const first = await logIn();
    expect(first.status).toBe(303);
    expect(first.headers.get("set-cookie")).toMatch(/^hermes_console_gw-2=/);
    expect((await logIn()).status).toBe(401);
    expect(readdirSync(join(workDir, "mesh")).sort()).toEqual(["demo.json", "gw-1", "gw-2", "gw-3", "logs", "relay", "up.json"]);

    const commands = printedCommands(out);
    expect(commands.length).toBeGreaterThanOrEqual(8);
    const find = (pattern: RegExp) => {
      const c = commands.find((args) => pattern.test(args.join(" ")));
      if (!c) throw new Error(`no printed command matches ${pattern}:\n${out}`);
      return c;
    };
    expect(find(/ chat -q /)).toEqual(["--home", "mesh/gw-1", "-p", "alice", "chat", "-q", "hello, who are you?"]);

    const chat = await run(find(/ chat -q /));
    expect(chat.stderr).toBe("");
    expect(chat.stdout).toMatch(/alice \(Researcher\)/);

    // Across gateways, through the relay.
    const message = await run(find(/ message carol@gw-2 /));
    expect(message.code, message.stderr).toBe(0);
    expect(message.stdout).toMatch(/carol \(Reviewer\) here/);

    // The room: send on the authority, read on a replica (it follows).
    const send = await run(find(/groups send lobby/));
    expect(send.code, send.stderr).toBe(0);
    const seq = Number(/sent: seq (\d+)/.exec(send.stdout)?.[1]);
    await eventually(
      async () =>
        expect((await run(find(/gw-2 groups log lobby/))).stdout).toMatch(
          new RegExp(`^${seq}\\s+1\\s+message\\.user\\s+user\\s+hello @all`, "m"),
        ),
      { timeoutMs: 30_000, intervalMs: 200, what: "the replica on gw-2 to show the message" },
    );

    // A second `hermes up` on the same folder while this one runs is refused (exit 2).
    const second = await run(["up", "--dir", "mesh"]);
    expect(second.code).toBe(2);
    expect(second.stderr).toMatch(/already running \(pid \d+\)/);

    // Ctrl-C: every child stops, gracefully, and so does hermes up.
    expect(await stopWithSigint(up)).toBe(0);
    // Graceful: every child ended by itself after SIGTERM (none needed the SIGKILL).
    expect(up.output()).toMatch(/hermes up: stopped gw-1 \(exit 0\), gw-2 \(exit 0\), gw-3 \(exit 0\), relay \(exit 0\)/);
    for (const [name, row] of firstTable) expect(alive(row.pid), `${name} (pid ${row.pid}) still runs`).toBe(false);
  }, 150_000);

  it("reuses the folder on a second run: same ports, bots and room, nothing created twice", async () => {
    const up = startUp();
    const out = await ready(up);
    const again = table(out);
    for (const name of ["relay", "gw-1", "gw-2", "gw-3"]) expect(again.get(name)?.grpc).toBe(firstTable.get(name)?.grpc);
    expect(out).toMatch(/room lobby: authority gw-1@1, replicas following on gw-2, gw-3/);

    const profiles = await run(["--home", "mesh/gw-2", "--json", "profile", "list"]);
    expect((JSON.parse(profiles.stdout) as { profiles: { name: string }[] }).profiles.map((p) => p.name).sort()).toEqual([
      "carol",
      "dave",
      "default",
    ]);
    const rooms = await run(["--home", "mesh/gw-1", "--json", "groups", "list"]);
    expect((JSON.parse(rooms.stdout) as { rooms: { room_id: string }[] }).rooms.map((r) => r.room_id)).toEqual(["lobby"]);
    const log = await run(["--home", "mesh/gw-1", "--json", "groups", "log", "lobby", "--limit", "500"]);
    const welcomes = (JSON.parse(log.stdout) as { events: { event_id: string }[] }).events.filter(
      (e) => e.event_id === "hermes-up-welcome",
    );
    expect(welcomes).toHaveLength(1);
    // The replica resumed following on its own after the restart (a registered peer).
    const state = await run(["--home", "mesh/gw-3", "--json", "groups", "replica-state", "lobby"]);
    expect(JSON.parse(state.stdout)).toMatchObject({ following: { state: "following", source: expect.stringContaining("gw-1") } });

    up.child.kill("SIGTERM");
    expect(await up.exited).toBe(0);
    expect(up.output()).toMatch(/hermes up: SIGTERM, stopping the mesh/);
    expect(up.output()).toMatch(/hermes up: stopped gw-1 \(exit 0\), gw-2 \(exit 0\), gw-3 \(exit 0\), relay \(exit 0\)/);
    for (const [name, row] of again) expect(alive(row.pid), `${name} (pid ${row.pid}) still runs`).toBe(false);
  }, 150_000);

  it("applies the demo plan once: a rename survives a restart (robert stays, bob is not created again, the alias stays)", async () => {
    const up = startUp();
    await ready(up);
    const renamed = await run(["--home", "mesh/gw-1", "profile", "rename", "bob", "robert"]);
    expect(renamed.code, renamed.stderr).toBe(0);
    expect(await stopWithSigint(up)).toBe(0);

    const again = startUp();
    const out = await ready(again);
    expect(await profileNames("mesh/gw-1")).toEqual(["alice", "default", "robert"]);
    const robert = await run(["--home", "mesh/gw-1", "--json", "profile", "show", "robert"]);
    expect(JSON.parse(robert.stdout)).toMatchObject({ name: "robert", aliases: ["bob"] });
    // The summary shows the bots as they are now.
    expect(out).toMatch(/^gw-1 .*alice \(Researcher, local\), robert \(Writer, local\)/m);
  }, 150_000);

  it("a gateway killed with SIGTERM is reported and restarted; the rest of the mesh keeps serving; Ctrl-C still stops all", async () => {
    const up = running.at(-1)!;
    const before = table(await ready(up));
    const victim = before.get("gw-2")!.pid;
    process.kill(victim, "SIGTERM");
    await printed(
      up,
      new RegExp(`hermes up: gw-2 \\(pid ${victim}\\) exited with code 0; the rest of the mesh keeps running; restarting gw-2 in 5 s`),
    );
    // While gw-2 is down, hermes up runs on and the other gateways answer.
    expect(up.child.exitCode).toBeNull();
    expect(await profileNames("mesh/gw-1")).toEqual(["alice", "default", "robert"]);
    expect(await profileNames("mesh/gw-3")).toEqual(["default", "erin", "frank"]);
    const back = Number((await printed(up, /hermes up: gw-2 is back \(pid (\d+)\)/))[1]);
    expect(back).not.toBe(victim);
    expect(alive(back)).toBe(true);
    expect(await profileNames("mesh/gw-2")).toEqual(["carol", "dave", "default"]);

    expect(await stopWithSigint(up)).toBe(0);
    expect(up.output()).toMatch(/hermes up: stopped gw-1 \(exit 0\), gw-2 \(exit 0\), gw-3 \(exit 0\), relay \(exit 0\)/);
    expect(alive(back)).toBe(false);
    for (const [name, row] of before) expect(alive(row.pid), `${name} (pid ${row.pid}) still runs`).toBe(false);
  }, 150_000);
});
