import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import Database from "better-sqlite3";
import { type Command, CommanderError } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram } from "../src/main.js";
import { assertBuilt, fileHash, hermes, removeHome, tempHome } from "./support/cli-harness.js";

/** Usage errors, help, configuration refusals and damaged databases: exit codes and messages. */

const homes: string[] = [];
function newHome(): string {
  const home = tempHome();
  homes.push(home);
  return home;
}

beforeAll(() => assertBuilt());
// Tests run concurrently (each has its own home), so homes are removed once all are done.
afterAll(() => {
  for (const h of homes) removeHome(h);
  homes.length = 0;
});

/** A loopback port nothing listens on (bound by the OS, then released). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Subcommand names listed under "Commands:" in a help text (without the implicit `help`): the
 * section ends at its first blank line, so text after it (the exit codes) is never read as commands.
 */
function subcommands(help: string): string[] {
  const section = help.split(/^Commands:\n/m)[1]?.split(/\n\n/)[0];
  if (!section) return [];
  return section
    .split("\n")
    .map((line) => /^ {2}([a-z][a-z0-9-]*)\b/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined && name !== "help");
}

/** Every command path of the CLI, from its command tree in this process (no subprocess per command). */
function commandPaths(c: Command = buildProgram({ code: 0 }), path: string[] = []): string[][] {
  return [path, ...c.commands.flatMap((s) => commandPaths(s, [...path, s.name()]))];
}

/** `hermes PATH --help` run in this process: exit code and what it wrote to stdout and stderr. */
async function helpInProcess(path: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const program = buildProgram({ code: 0 });
  let stdout = "";
  let stderr = "";
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
  for (const c of all(program)) {
    c.exitOverride().configureOutput({ writeOut: (s) => (stdout += s), writeErr: (s) => (stderr += s) });
  }
  try {
    await program.parseAsync(["node", "hermes", ...path, "--help"]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (err instanceof CommanderError) return { code: err.exitCode, stdout, stderr };
    throw err;
  }
}

describe.concurrent("help and usage errors", () => {
  it("--help on every command exits 0, prints usage and lists exactly the command's subcommands", async () => {
    // The paths come from the command tree, not from help output read back: a help text that
    // looks like it names a command (the exit codes once did) cannot make the walk recurse.
    const paths = commandPaths();
    for (const path of paths) {
      const r = await helpInProcess(path);
      const what = `hermes ${path.join(" ")} --help`;
      expect(r.code, what).toBe(0);
      expect(r.stdout, what).toMatch(/^Usage: hermes/);
      expect(r.stderr, what).toBe("");
      const children = paths.filter((p) => p.length === path.length + 1 && path.every((w, i) => p[i] === w)).map((p) => p.at(-1));
      expect(subcommands(r.stdout), what).toEqual(children.filter((c) => c !== "help"));
    }
    // The commands of the foundation must be among them (the tree names later ones by itself).
    expect(paths.map((p) => p.join(" "))).toEqual(
      expect.arrayContaining([
        "",
        "gateway",
        "gateway start",
        "gateway status",
        "profile",
        "profile list",
        "profile show",
        "profile create",
        "profile rename",
        "profile migrate-identity",
        "profile delete",
        "chat",
      ]),
    );
    // The built command answers the same, in one process each for the top and a nested command.
    for (const path of [[], ["groups", "promote"]]) {
      const r = await hermes([...path, "--help"]);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe((await helpInProcess(path)).stdout);
    }
  });

  it("--help states what the exit codes 0, 1 and 2 mean", async () => {
    const r = await hermes(["--help"]);
    expect(r.code).toBe(0);
    const section = r.stdout.split("Exit codes (every command):\n")[1];
    expect(section).toBeDefined();
    expect(section).toMatch(/^ {2}0 {2}success$/m);
    expect(section).toMatch(/^ {2}1 {2}runtime, peer or transport failure:.*(\n {5}.*)*refuses the key we hold for it/m);
    expect(section).toMatch(/^ {2}2 {2}usage error or refusal:/m);
  });

  it("`help CMD` and --version exit 0", async () => {
    const help = await hermes(["help", "profile"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("migrate-identity");
    const version = await hermes(["--version"]);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it.each([
    ["an unknown command", ["frobnicate"], /unknown command 'frobnicate'/],
    ["an unknown subcommand", ["profile", "frobnicate"], /unknown command 'frobnicate'/],
    ["an unknown option", ["profile", "list", "--frobnicate"], /unknown option '--frobnicate'/],
    ["an unknown global option", ["--frobnicate", "profile", "list"], /unknown option '--frobnicate'/],
    ["a missing argument", ["profile", "show"], /missing required argument 'name'/],
    ["an extra argument", ["profile", "show", "a", "b"], /too many arguments/],
    ["a missing required option", ["chat"], /required option '-q, --query <text>'/],
    ["a missing subcommand", ["profile"], /Usage: hermes profile/],
    ["no command at all", [], /Usage: hermes/],
  ])("%s exits 2 with a message on stderr", async (_what, args, message) => {
    const home = newHome();
    const r = await hermes(args, { home });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(readdirSync(home)).toEqual([]);
  });

  it("chat without -p asks which profile, exit 2", async () => {
    const r = await hermes(["chat", "-q", "hi"], { home: newHome() });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("pass -p NAME");
  });

  it("gateway status with no gateway running fails with exit 1 and says how to start one, in one line without grpc-js's wording", async () => {
    const home = newHome();
    const r = await hermes(["gateway", "status"], { home });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `hermes: cannot reach the gateway serving ${home}: no socket at ${join(home, "gateway.sock")}; start one with: hermes --home ${home} gateway start\n`,
    );
  });

  it("an unreachable --gateway is one line: what failed and what to do", async () => {
    const port = await closedPort();
    const r = await hermes(["--gateway", `grpc://127.0.0.1:${port}`, "gateway", "status"], { home: newHome() });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`hermes: cannot reach grpc://127.0.0.1:${port}: connection refused; check the URL and that the gateway runs\n`);
  });
});

describe("gateway start refusals", () => {
  it.each([
    ["--grpc", ["--grpc", "0.0.0.0:0", "--http", "127.0.0.1:0"], "0.0.0.0:0"],
    ["--http", ["--grpc", "127.0.0.1:0", "--http", "0.0.0.0:0"], "0.0.0.0:0"],
  ])("a non-loopback %s without a key exits 2 and says to set API_SERVER_KEY", async (_flag, flags, address) => {
    const home = newHome();
    const r = await hermes(["gateway", "start", ...flags], { home, timeoutMs: 60_000 });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("API_SERVER_KEY");
    expect(r.stderr).toContain(address);
    expect(r.stdout).not.toContain("gateway ready");
    expect(existsSync(join(home, "gateway.sock"))).toBe(false);
  });

  it("a config.yaml with an unknown key exits 2 with one message naming it", async () => {
    const home = newHome();
    writeFileSync(join(home, "config.yaml"), "gatway:\n  grpc: 127.0.0.1:0\n");
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], { home, timeoutMs: 60_000 });
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('"gatway"');
    expect(lines[0]).toContain(join(home, "config.yaml"));
    expect(r.stdout).not.toContain("gateway ready");
  });

  it("a config.yaml with a bad value names the key path", async () => {
    const home = newHome();
    writeFileSync(join(home, "config.yaml"), "gateway:\n  grpc: not-an-address\n");
    const r = await hermes(["gateway", "start", "--http", "127.0.0.1:0"], { home, timeoutMs: 60_000 });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain("gateway.grpc");
  });

  it("a config.yaml that is not YAML exits 2 naming the file", async () => {
    const home = newHome();
    writeFileSync(join(home, "config.yaml"), "gateway: [unclosed\n");
    const r = await hermes(["profile", "list"], { home });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(join(home, "config.yaml"));
  });
});

describe("blank settings", () => {
  it("a blank HERMES_HOME is not set: the home is ~/.hermes, and nothing is written where the command runs", async () => {
    const cwd = newHome();
    const user = newHome();
    const r = await hermes(["profile", "list"], { cwd, env: { HERMES_HOME: "", HOME: user } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("default");
    expect(readdirSync(cwd)).toEqual([]);
    expect(existsSync(join(user, ".hermes", "state.db"))).toBe(true);
  });

  it("a blank --home, --data or --dir is refused with exit 2 before anything is written", async () => {
    const cwd = newHome();
    for (const args of [
      ["--home", "", "profile", "list"],
      ["--home", " ", "--json", "profile", "list"],
    ]) {
      const r = await hermes(args, { cwd });
      expect(r.code).toBe(2);
      expect(r.stdout + r.stderr).toContain("--home is blank");
    }
    const relay = await hermes(["relay", "start", "--data", ""], { cwd, home: newHome() });
    expect(relay.code).toBe(2);
    expect(relay.stderr).toContain("--data is blank");
    const up = await hermes(["up", "--dir", " "], { cwd });
    expect(up.code).toBe(2);
    expect(up.stderr).toContain("--dir is blank");
    expect(readdirSync(cwd)).toEqual([]);
  });

  it.each([
    ["HERMES_LOG_LEVEL", "verbose", "is not a log level: use one of fatal, error, warn, info, debug, trace, silent"],
    ["HERMES_DB_BUSY_TIMEOUT_MS", "abc", "is not a whole number of milliseconds from 0 to 60000"],
    ["HERMES_DB_BUSY_TIMEOUT_MS", "99999", "is not a whole number of milliseconds from 0 to 60000"],
  ])("%s=%s stops gateway start with exit 2 and one line naming the variable", async (name, value, message) => {
    const home = newHome();
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], {
      home,
      env: { [name]: value },
      timeoutMs: 60_000,
    });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toEqual([`hermes: ${name}=${JSON.stringify(value)} ${message}`]);
    expect(r.stdout).not.toContain("gateway ready");
  });

  it("a bad HERMES_DB_BUSY_TIMEOUT_MS stops a direct command too; a blank one is not set", async () => {
    const home = newHome();
    const bad = await hermes(["profile", "list"], { home, env: { HERMES_DB_BUSY_TIMEOUT_MS: "-1" } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("HERMES_DB_BUSY_TIMEOUT_MS");
    const blank = await hermes(["profile", "list"], { home, env: { HERMES_DB_BUSY_TIMEOUT_MS: "", HERMES_LOG_LEVEL: "" } });
    expect(blank.code, blank.stderr).toBe(0);
  });
});

describe("damaged or unknown state.db is refused, never reset", () => {
  function garbageHome(): { home: string; stateDb: string; hash: string } {
    const home = newHome();
    const stateDb = join(home, "state.db");
    // Deterministic garbage, long enough to look like pages.
    const bytes = Buffer.alloc(16 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) % 251;
    writeFileSync(stateDb, bytes);
    return { home, stateDb, hash: fileHash(stateDb) };
  }

  it.each([
    ["profile list", ["profile", "list"]],
    ["profile create", ["profile", "create", "alice"]],
    ["gateway start", ["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"]],
  ])("garbage bytes: %s exits 1 with a clear message and leaves the file as it was", async (_what, args) => {
    const { home, stateDb, hash } = garbageHome();
    const r = await hermes(args, { home, timeoutMs: 60_000 });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(stateDb);
    expect(r.stderr).toContain("not a readable SQLite database");
    expect(r.stderr).toMatch(/backup/);
    expect(fileHash(stateDb)).toBe(hash);
    expect(existsSync(join(home, "profiles", "alice"))).toBe(false);
    expect(existsSync(join(home, "gateway.sock"))).toBe(false);
  });

  /** A state.db stamped with a schema version this build does not know, as a newer hermes would leave it. */
  function newerHome(journal: "wal" | "delete"): { home: string; stateDb: string; hash: string } {
    const home = newHome();
    mkdirSync(join(home, "profiles"));
    const stateDb = join(home, "state.db");
    const db = new Database(stateDb);
    db.pragma(`journal_mode = ${journal}`);
    db.exec("CREATE TABLE from_the_future (x TEXT); INSERT INTO from_the_future VALUES ('keep me');");
    db.pragma("user_version = 99");
    db.close();
    return { home, stateDb, hash: fileHash(stateDb) };
  }

  it.each(["wal", "delete"] as const)(
    "a newer PRAGMA user_version (journal_mode %s): exit 1, names both versions, file untouched",
    async (journal) => {
      const { home, stateDb, hash } = newerHome(journal);
      for (const args of [
        ["profile", "list"],
        ["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"],
      ]) {
        const r = await hermes(args, { home, timeoutMs: 60_000 });
        expect(r.code, args.join(" ")).toBe(1);
        expect(r.stderr).toContain(stateDb);
        expect(r.stderr).toContain("schema version 99");
        // Names this build's version too (whatever it is by now: later modules append migrations).
        const known = /versions up to (\d+)\b/.exec(r.stderr);
        expect(known, r.stderr).not.toBeNull();
        expect(Number(known![1])).toBeLessThan(99);
        expect(r.stderr).toMatch(/Upgrade hermes/i);
        expect(fileHash(stateDb), `${args.join(" ")} changed the bytes of ${stateDb}`).toBe(hash);
      }
      const db = new Database(stateDb, { readonly: true });
      try {
        expect(db.pragma("user_version", { simple: true })).toBe(99);
        expect(db.prepare("SELECT x FROM from_the_future").all()).toEqual([{ x: "keep me" }]);
      } finally {
        db.close();
      }
    },
  );
});
