import { chmodSync, existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGatewayProcess as startDaemon, startRelayProcess } from "../../../test/support/daemons.js";
import { eventually } from "../../../test/support/eventually.js";
import { assertBuilt, cleanEnv, hermes, removeHome, startGatewayProcess, TEST_KEY, tempHome } from "./support/cli-harness.js";

/**
 * What another user on the machine, or another machine, could reach: listen addresses are checked by
 * what they resolve to, every API key follows one rule, and the files a gateway or relay writes
 * (databases with their -wal/-shm, config.yaml, .env, copies made by --clone-from) are 0600, with
 * a warning at start when the home itself is open to others.
 */

const homes: string[] = [];
function newHome(prefix?: string): string {
  const home = tempHome(prefix);
  homes.push(home);
  return home;
}

beforeAll(() => assertBuilt());
afterAll(() => {
  for (const h of homes) removeHome(h);
});

/** Waits (bounded) until `text` shows up on a daemon's stderr: the pipe may deliver it just after the ready line. */
async function stderrShows(daemon: { output(): { stderr: string } }, text: string): Promise<void> {
  await eventually(() => expect(daemon.output().stderr).toContain(text));
}

const mode = (path: string) => statSync(path).mode & 0o777;

/** The mode of each existing file, by its path relative to `dir`. */
function modes(dir: string, files: string[]): Record<string, string> {
  return Object.fromEntries(files.map((f) => [f, existsSync(join(dir, f)) ? mode(join(dir, f)).toString(8) : "missing"]));
}

describe("gateway start: the loopback guard resolves names", () => {
  it("`--grpc localhost:0` without a key binds the address localhost resolved to (the ready line shows it)", async () => {
    const named = await startDaemon(newHome(), {
      grpc: "localhost:0",
      http: "localhost:0",
      env: cleanEnv() as Record<string, string>,
      isolatedEnv: true,
    });
    try {
      expect(named.grpc).toMatch(/^(127\.0\.0\.1|\[::1\]):\d+$/);
      expect(named.http).toMatch(/^(127\.0\.0\.1|\[::1\]):\d+$/);
    } finally {
      await named.stop();
    }
  });

  it("a name standing for 0.0.0.0 (`0`) is refused without a key, and the message says what it resolves to", async () => {
    const home = newHome();
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "0:0"], { home, timeoutMs: 20_000 });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("refusing to listen on 0:0 (resolves to 0.0.0.0) without an API key");
    expect(existsSync(join(home, "gateway.sock"))).toBe(false);
  });

  it.each([
    ["API_SERVER_KEY=a", { API_SERVER_KEY: "a" }, "", /API_SERVER_KEY \(environment\) is 1 character long; at least 16/],
    ["a key with a space", { API_SERVER_KEY: "correct horse battery staple" }, "", /API_SERVER_KEY \(environment\) contains whitespace/],
    [
      "gateway.api_key with a space",
      {},
      'gateway:\n  api_key: "correct horse battery staple"\n',
      /gateway\.api_key: the key contains whitespace/,
    ],
  ])("%s is refused with exit 2 and one line, on loopback too", async (_what, env, config, message) => {
    const home = newHome();
    if (config) writeFileSync(join(home, "config.yaml"), config);
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], { home, env, timeoutMs: 20_000 });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).not.toContain("horse");
  });
});

describe("secrets and content are private to the user running hermes", () => {
  it("databases (+ -wal/-shm), config.yaml, .env and profile files are 0600; a home made with mkdir gets a warning", async () => {
    const home = newHome();
    chmodSync(home, 0o755); // what `mkdir DIR` gives
    // Written by the CLI with no gateway running: config.yaml (peer add), .env, a profile and its state.db.
    expect((await hermes(["peer", "add", "vps", "--url", "grpc://192.0.2.1:7440", "--key", TEST_KEY], { home })).code).toBe(0);
    expect((await hermes(["profile", "create", "alice"], { home })).code).toBe(0);
    expect(modes(home, ["config.yaml", ".env", "state.db", "profiles/alice/state.db", "profiles/alice/config.yaml"])).toEqual({
      "config.yaml": "600",
      ".env": "600",
      "state.db": "600",
      "profiles/alice/state.db": "600",
      "profiles/alice/config.yaml": "600",
    });

    const gw = await startGatewayProcess(home, { API_SERVER_KEY: TEST_KEY });
    try {
      const chat = await hermes(["-p", "alice", "chat", "-q", "hello"], { home });
      expect(chat.code).toBe(0);
      // While it runs, the WAL companions exist (created by SQLite after the start).
      expect(modes(home, ["state.db", "state.db-wal", "state.db-shm", "gateway_id", "profiles/alice/state.db-wal"])).toEqual({
        "state.db": "600",
        "state.db-wal": "600",
        "state.db-shm": "600",
        gateway_id: "600",
        "profiles/alice/state.db-wal": "600",
      });
      expect(mode(join(home, "gateway.sock"))).toBe(0o600);
      await stderrShows(gw, `HERMES_HOME ${home} is open to other users (mode 0755)`);
      expect(gw.output().stderr).toContain(`run: chmod 700 ${home}`);
    } finally {
      await gw.stop();
    }

    chmodSync(home, 0o700);
    const quiet = await startGatewayProcess(home, { API_SERVER_KEY: TEST_KEY });
    await quiet.stop();
    expect(quiet.output().stderr).not.toContain("open to other users");
  });

  it("profile create --clone-from writes the copied .env 0600, whatever the source's mode", async () => {
    const home = newHome();
    expect((await hermes(["profile", "create", "alice"], { home })).code).toBe(0);
    const sourceEnv = join(home, "profiles", "alice", ".env");
    writeFileSync(sourceEnv, "OPENAI_API_KEY=sk-secret\n");
    chmodSync(sourceEnv, 0o644);
    const r = await hermes(["profile", "create", "bob", "--clone-from", "alice"], { home });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(modes(join(home, "profiles", "bob"), [".env", "config.yaml"])).toEqual({ ".env": "600", "config.yaml": "600" });
  });

  it("the relay's relay.db (+ -wal/-shm) are 0600; a data folder open to others gets a warning", async () => {
    const dataDir = join(newHome("hrel-"), "relay");
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    const relay = await startRelayProcess(dataDir, { env: cleanEnv() as Record<string, string>, isolatedEnv: true });
    try {
      expect(modes(dataDir, ["relay.db", "relay.db-wal", "relay.db-shm", "relay.sock"])).toEqual({
        "relay.db": "600",
        "relay.db-wal": "600",
        "relay.db-shm": "600",
        "relay.sock": "600",
      });
      await stderrShows(relay, `the relay's data folder ${dataDir} is open to other users (mode 0755)`);
    } finally {
      await relay.stop();
    }
  });
});
