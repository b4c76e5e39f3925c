import { execFile, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import {
  assertBuilt,
  cleanEnv,
  type GatewayProcess,
  HERMES_BIN,
  hermes,
  removeHome,
  startGatewayProcess,
  TEST_KEY,
  tempHome,
} from "./support/cli-harness.js";

/**
 * The operator commands against two gateway processes (a room led by A, followed by B, each the
 * other's peer): `hermes status`, `hermes wait room` met and timed out, `hermes check` with each
 * Nagios exit code, `hermes completion`, `hermes console link`.
 */

let homeA: string;
let homeB: string;
let a: GatewayProcess;
let b: GatewayProcess;

const onA = (args: string[]) => hermes(args, { home: homeA });
const onB = (args: string[]) => hermes(args, { home: homeB });
const json = <T = Record<string, unknown>>(r: { stdout: string }) => JSON.parse(r.stdout) as T;
/** The disk of a test machine may be nearly full; the disk check is graded by its own test. */
const ANY_DISK = ["--disk-warning", "0", "--disk-critical", "0"];

beforeAll(async () => {
  assertBuilt();
  homeA = tempHome("hops-a-");
  homeB = tempHome("hops-b-");
  [a, b] = await Promise.all([
    startGatewayProcess(homeA, { API_SERVER_KEY: TEST_KEY }),
    startGatewayProcess(homeB, { API_SERVER_KEY: TEST_KEY }),
  ]);
  for (const [home, other, peer] of [
    [homeA, b, "gwb"],
    [homeB, a, "gwa"],
  ] as const) {
    const added = await hermes(["peer", "add", peer, "--url", `grpc://${other.grpc}`, "--key", TEST_KEY], { home });
    expect(added.code).toBe(0);
  }
  expect((await onA(["profile", "create", "alice"])).code).toBe(0);
  expect((await onA(["profile", "create", "bob", "--provider", "not-configured"])).code).toBe(0);
  expect((await onA(["groups", "create", "--name", "Ops", "--members", "alice,bob", "--id", "ops"])).code).toBe(0);
  expect((await onB(["groups", "replicate", "ops", "--from", "gwa", "--follow"])).code).toBe(0);
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  for (const h of [homeA, homeB]) if (h) removeHome(h);
});

describe("hermes status", () => {
  it("shows the mesh as the gateway sees it: gateways, relay, coordinator, each room's copies and lag", async () => {
    const r = await onA(["--json", "status"]);
    expect(r.code).toBe(0);
    const s = json<{
      self: string;
      gateways: { gateway_id: string; reachable: boolean; version: string; url: string }[];
      relay: unknown;
      coordinator: unknown;
      rooms: {
        room_id: string;
        authority: { gateway_id: string; epoch: number };
        copies: { gateway_id: string; role: string; lag: number; following: string | null }[];
      }[];
    }>(r);
    expect(s.self).toBe(a.id);
    expect(s.gateways.map((g) => [g.gateway_id, g.reachable, g.version])).toEqual([
      [a.id, true, "0.1.0"],
      [b.id, true, "0.1.0"],
    ]);
    expect(s.relay).toBeNull();
    expect(s.coordinator).toBeNull();
    expect(s.rooms[0]).toMatchObject({ room_id: "ops", authority: { gateway_id: a.id, epoch: 1 } });
    // B's follower is seen from A too (asked of B), not only on B itself.
    expect(s.rooms[0]!.copies.map((c) => [c.gateway_id, c.role, c.lag, c.following])).toEqual([
      [a.id, "authority", 0, null],
      [b.id, "replica", 0, "following"],
    ]);
    const human = await onB(["status"]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(new RegExp(`${b.id} \\(this\\)`));
    expect(human.stdout).toMatch(/relay: none\ncoordinator: none/);
    expect(human.stdout).toMatch(new RegExp(`ops\\s+${b.id}\\s+replica\\s+1\\s+\\d+\\s+0\\s+passive`));
    // The A2A cards this gateway serves (no tasks yet).
    expect(human.stdout).toMatch(
      /a2a: \d+ bot card\(s\), index http:\/\/127\.0\.0\.1:\d+\/\.well-known\/agent-card\.json; 0 task\(s\) running/,
    );
    const a2a = json<{ a2a: { cards: { profile: string; card_url: string }[]; tasks: unknown[] } }>(r).a2a;
    expect(a2a.cards.map((c) => c.profile)).toContain("default");
    expect(a2a.cards[0]!.card_url).toMatch(/\/a2a\/[a-z0-9_-]+\/\.well-known\/agent-card\.json$/);
    expect(a2a.tasks).toEqual([]);
  });

  it("--watch --json prints one document per line until Ctrl-C, then exits 0", async () => {
    const child = spawn(process.execPath, [HERMES_BIN, "--json", "status", "--watch"], {
      env: cleanEnv({ HERMES_HOME: homeA }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    try {
      // Two redraws: the second document comes from the loop, not the first call.
      const lines = await eventually(() => {
        const complete = out.split("\n").slice(0, -1);
        return complete.length >= 2 && complete;
      });
      for (const line of lines) expect(JSON.parse(line)).toMatchObject({ self: a.id });
      child.kill("SIGINT");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("reports a peer that does not answer as unreachable, and an unreachable gateway exits 1", async () => {
    expect((await onA(["peer", "add", "ghost", "--url", "grpc://127.0.0.1:1", "--key", TEST_KEY])).code).toBe(0);
    const s = json<{ gateways: { gateway_id: string; reachable: boolean; error: string }[] }>(await onA(["--json", "status"]));
    expect(s.gateways.find((g) => g.gateway_id === "ghost")).toMatchObject({
      reachable: false,
      error: expect.stringMatching(/cannot reach peer ghost/),
    });
    expect((await onA(["peer", "remove", "ghost"])).code).toBe(0);
    const down = await hermes(["status"], { home: tempHome("hops-none-") });
    expect(down.code).toBe(1);
  });
});

describe("hermes wait room", () => {
  it("exits 0 once the condition holds", async () => {
    const caughtUp = await onB(["wait", "room", "ops", "--for", "caught-up", "--timeout", "30"]);
    expect(caughtUp.code).toBe(0);
    expect(caughtUp.stdout).toMatch(/ops: caught-up/);
    expect((await onA(["wait", "room", "ops", "--for", "authority", "--timeout", "5"])).code).toBe(0);
    expect((await onB(["--json", "wait", "room", "ops", "--for", "passive"])).code).toBe(0);
  });

  it("exits 1 when it times out, saying where the room is; bad usage exits 2", async () => {
    const timedOut = await onB(["wait", "room", "ops", "--for", "authority", "--timeout", "0.5"]);
    expect(timedOut.code).toBe(1);
    expect(timedOut.stderr).toMatch(/ops did not become authority within 0.5 s \(now: replica, authority .*@1\)/);
    const missing = await onB(["wait", "room", "nowhere", "--for", "caught-up", "--timeout", "0.3"]);
    expect(missing.code).toBe(1);
    expect((await onB(["wait", "room", "ops", "--for", "ready"])).code).toBe(2);
  });
});

describe("hermes check", () => {
  it("exits 0 when every check is ok, and prints the Prometheus format", async () => {
    const ok = await onA(["check", ...ANY_DISK]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(new RegExp(`^HERMES OK - ${a.id}: all checks ok`));
    for (const name of ["fsync", "disk", "replica_lag", "rooms", "relay", "deliveries"]) expect(ok.stdout).toContain(name);
    const prom = await onB(["check", "--prometheus", ...ANY_DISK]);
    expect(prom.code).toBe(0);
    expect(prom.stdout).toContain(`hermes_check_status{gateway="${b.id}",check="overall"} 0`);
    expect(prom.stdout).toContain(`hermes_check_value{gateway="${b.id}",check="replica_lag"} 0`);
  });

  it("exits 2 (critical) for a check past its critical limit and for a gateway that does not answer", async () => {
    const slow = await onA(["--json", "check", ...ANY_DISK, "--fsync-warning", "0.000001", "--fsync-critical", "0.000001"]);
    expect(slow.code).toBe(2);
    expect(json<{ state: string; checks: { name: string; state: string }[] }>(slow)).toMatchObject({
      state: "critical",
      checks: expect.arrayContaining([{ name: "fsync", state: "critical", summary: expect.any(String), value: expect.any(Number) }]),
    });
    const down = await hermes(["check"], { home: tempHome("hops-none-") });
    expect(down.code).toBe(2);
    expect(down.stderr).toMatch(/^HERMES CRITICAL - /);
  });

  it("exits 3 (unknown) for arguments it cannot use", async () => {
    const bad = await onA(["check", "--lag-warning", "lots"]);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toMatch(/HERMES UNKNOWN - --lag-warning must be a number/);
    expect((await onA(["check", "--no-such-option"])).code).toBe(3);
    expect((await onA(["check", "--lag-warning", "10", "--lag-critical", "5"])).code).toBe(3);
  });

  it("exits 1 (warning) after a delivery failed", async () => {
    const sent = await hermes(["-p", "alice", "message", "bob", "please review", "--wait"], { home: homeA });
    expect(sent.code).toBe(1);
    const warned = await onA(["check", ...ANY_DISK]);
    expect(warned.code).toBe(1);
    expect(warned.stdout).toMatch(/^HERMES WARNING - .*deliveries warning/);
    expect(warned.stdout).toMatch(/WARNING\s+deliveries\s+1 failed in the last 15 min; latest dlv_\w+ to bob: failed \[missing_config\]/);
    // One failure is below a warning limit of two.
    expect((await onA(["check", ...ANY_DISK, "--failures-warning", "2"])).code).toBe(0);
  });
});

describe("hermes completion and console link", () => {
  /** What bash completes for `words` with the script in `scriptFile` sourced: one bash, no hermes process. */
  function bashComplete(scriptFile: string, words: string[]): Promise<string[]> {
    const script = `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _hermes; printf '%s\\n' "\${COMPREPLY[@]}"`;
    return new Promise((resolve, reject) =>
      execFile("bash", ["-c", script, "bash", scriptFile, ...words], { env: {} }, (err, stdout) =>
        err ? reject(err) : resolve(stdout.split("\n").filter(Boolean)),
      ),
    );
  }

  it("generates bash and zsh completion from the command tree, in one hermes process each", async () => {
    const bash = await hermes(["completion", "bash"]);
    expect(bash.code).toBe(0);
    // The script is data: completing runs only shell functions, never hermes again.
    expect(bash.stdout).not.toMatch(/\$\(\s*hermes|`hermes/);
    const scriptFile = join(homeA, "hermes.bash");
    writeFileSync(scriptFile, bash.stdout);
    expect(await bashComplete(scriptFile, ["hermes", "gro"])).toEqual(["groups"]);
    expect(await bashComplete(scriptFile, ["hermes", "groups", "pro"])).toEqual(["promote"]);
    expect(await bashComplete(scriptFile, ["hermes", "--home", "x", "groups", "promote", "--a"])).toEqual(["--allow-incomplete"]);
    expect(await bashComplete(scriptFile, ["hermes", "wait", ""])).toEqual(["room"]);
    expect(await bashComplete(scriptFile, ["hermes", "check", "--pro"])).toEqual(["--prometheus", "--profile"]);
    // After -p / --profile: the profiles of the home the words name, not subcommands.
    expect(await bashComplete(scriptFile, ["hermes", "--home", homeA, "-p", ""])).toEqual(["alice", "bob"]);
    expect(await bashComplete(scriptFile, ["hermes", "--home", homeA, "chat", "--profile", "al"])).toEqual(["alice"]);
    expect(await bashComplete(scriptFile, ["hermes", "--home", join(homeA, "nowhere"), "-p", ""])).toEqual([]);
    const zsh = await hermes(["completion", "zsh"]);
    expect(zsh.code).toBe(0);
    expect(zsh.stdout).toMatch(/^#compdef hermes/);
    expect(zsh.stdout).toContain('"groups") echo "list create send');
    expect(zsh.stdout).not.toMatch(/\$\(\s*hermes|`hermes/);
    expect((await hermes(["completion", "fish"])).code).toBe(2);
  });

  it("prints a one-time login link to the console", async () => {
    const r = await onA(["--json", "console", "link"]);
    expect(r.code).toBe(0);
    expect(json<{ url: string }>(r).url).toMatch(new RegExp(`^http://${a.http.replace(/\./g, "\\.")}/login\\?token=[\\w-]{43}$`));
  });
});
