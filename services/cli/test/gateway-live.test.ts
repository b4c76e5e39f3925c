import { existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import {
  assertBuilt,
  type GatewayProcess,
  hermes,
  holdWriteLock,
  removeHome,
  rowsMentioning,
  startGatewayProcess,
  TEST_KEY,
  tempHome,
  withDb,
} from "./support/cli-harness.js";

/**
 * The CLI against ONE gateway running as a subprocess (`hermes gateway start`), shared by every
 * test in this file in order: its API key is set (so TCP calls need it) and its SQLite busy timeout
 * is short (so a held lock fails fast). The last test stops it with SIGTERM.
 */

let home: string;
let gw: GatewayProcess;
let stateDb: string;
/** The home a `--gateway` client runs with: unused by design, so it must stay empty. */
let clientHome: string;

beforeAll(async () => {
  assertBuilt();
  home = tempHome();
  clientHome = tempHome("hcli-client-");
  stateDb = join(home, "state.db");
  // Heartbeats only at start and stop: a periodic one landing between a failed rename and its retry
  // trips the gateway_heartbeats rekey bug that migration-recovery.test.ts covers on purpose.
  writeFileSync(join(home, "config.yaml"), "gateway:\n  heartbeat_seconds: 3600\n");
  gw = await startGatewayProcess(home, { API_SERVER_KEY: TEST_KEY, HERMES_DB_BUSY_TIMEOUT_MS: "200" });
});

afterAll(async () => {
  await gw?.stop();
  if (home) removeHome(home);
  if (clientHome) removeHome(clientHome);
});

/** `hermes` against the shared gateway through its control socket (no key needed there). */
const cli = (args: string[]) => hermes(args, { home });
/** `hermes --gateway grpc://…` over TCP, with the given key (undefined: none). */
const tcp = (args: string[], key?: string) =>
  hermes(["--gateway", `grpc://${gw.grpc}`, ...(key === undefined ? [] : ["--key", key]), ...args], { home: clientHome });

async function createOk(name: string): Promise<{ bot_chat_session_id: string }> {
  const r = await cli(["--json", "profile", "create", name]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as { bot_chat_session_id: string };
}

/**
 * One turn; returns the reply. The `local` provider answers in the profile's persona and echoes the
 * message, so the reply names `persona` and contains `text` (its exact wording is the provider's own).
 */
async function chatOk(profile: string, text: string, persona = profile): Promise<string> {
  const r = await cli(["-p", profile, "chat", "-q", text]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect(r.stdout.endsWith("\n")).toBe(true);
  const reply = r.stdout.slice(0, -1);
  expect(reply).toContain(persona);
  expect(reply).toContain(text);
  return reply;
}

function routingKeys(): string[] {
  return withDb(stateDb, (db) =>
    (db.prepare("SELECT routing_key FROM gateway_routing ORDER BY routing_key").all() as { routing_key: string }[]).map(
      (r) => r.routing_key,
    ),
  );
}

/** The user and assistant messages of a session, from the profile's own state.db. */
function transcript(profile: string, sessionId: string): { role: string; content: string }[] {
  return withDb(join(home, "profiles", profile, "state.db"), (db) =>
    db.prepare("SELECT role, content FROM messages WHERE session_id = ? AND role IN ('user', 'assistant') ORDER BY seq").all(sessionId),
  ) as { role: string; content: string }[];
}

describe("a gateway started as a subprocess", () => {
  it("prints its ready line with the bound addresses; the control socket is 0600", () => {
    expect(gw.grpc).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(gw.grpc).not.toBe("127.0.0.1:0");
    expect(gw.http).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(gw.control).toBe(join(home, "gateway.sock"));
    expect(statSync(gw.control).mode & 0o777).toBe(0o600);
  });

  it("gateway status (human and --json) reports id, addresses and profiles", async () => {
    const r = await cli(["--json", "gateway", "status"]);
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(s).toMatchObject({ gateway_id: gw.id, grpc_address: gw.grpc, http_address: gw.http, control_socket: gw.control, home });
    expect(s.profiles).toBeGreaterThanOrEqual(1);
    expect(s.uptime_seconds).toBeGreaterThanOrEqual(0);
    const human = await cli(["gateway", "status"]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(new RegExp(`^id\\s+${gw.id}$`, "m"));
    expect(human.stdout).toMatch(new RegExp(`^grpc\\s+${gw.grpc}$`, "m"));
  });

  it("HTTP: /livez and /readyz answer 200; /metrics has hermes_ metrics", async () => {
    for (const path of ["/livez", "/readyz"]) {
      const res = await fetch(`http://${gw.http}${path}`);
      expect(res.status, path).toBe(200);
      await res.text();
    }
    const metrics = await fetch(`http://${gw.http}/metrics`);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).toMatch(/^hermes_\w+/m);
    // The calls made so far were measured.
    expect(text).toMatch(/^hermes_rpc_duration_seconds_count\{[^}]*\} [1-9]/m);
  });

  it("a second gateway on the same home is refused with exit 2", async () => {
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], { home, timeoutMs: 15_000 });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("already serving this home");
    expect(existsSync(gw.control)).toBe(true);
    expect((await cli(["gateway", "status"])).code).toBe(0);
  });

  it("-p NAME chat -q TEXT returns the reply and stores the transcript and the obligation", async () => {
    const alice = await createOk("alice");
    const first = await chatOk("alice", "hello there");
    const second = await chatOk("alice", "second turn");
    expect(transcript("alice", alice.bot_chat_session_id)).toEqual([
      { role: "user", content: "hello there" },
      { role: "assistant", content: first },
      { role: "user", content: "second turn" },
      { role: "assistant", content: second },
    ]);
    const obligations = withDb(stateDb, (db) =>
      db.prepare("SELECT session_key, kind, state FROM delivery_obligations WHERE adapter_profile = 'alice'").all(),
    );
    expect(obligations).toEqual([
      { session_key: "agent:alice:bot:dm:bot-chat", kind: "turn_reply", state: "delivered" },
      { session_key: "agent:alice:bot:dm:bot-chat", kind: "turn_reply", state: "delivered" },
    ]);
    const json = await cli(["--json", "-p", "alice", "chat", "-q", "json please"]);
    expect(json.code).toBe(0);
    const turn = JSON.parse(json.stdout) as { profile: string; session_id: string; reply: string };
    expect(turn).toMatchObject({ profile: "alice", session_id: alice.bot_chat_session_id });
    expect(transcript("alice", alice.bot_chat_session_id).at(-1)).toEqual({ role: "assistant", content: turn.reply });

    const unknown = await cli(["-p", "ghost", "chat", "-q", "hi"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("unknown profile ghost");
    const invalid = await cli(["-p", "../x", "chat", "-q", "hi"]);
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toContain("^[a-z0-9][a-z0-9_-]{0,63}$");
  });

  describe("--gateway grpc://… with API_SERVER_KEY set on the gateway", () => {
    it("without a key: UNAUTHENTICATED, exit 2, nothing done", async () => {
      const r = await tcp(["profile", "create", "mallory"]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/API key/);
      const j = await tcp(["--json", "profile", "create", "mallory"]);
      expect(j.code).toBe(2);
      expect(JSON.parse(j.stderr).error.reason).toBe("unauthenticated");
      expect((await tcp(["-p", "alice", "chat", "-q", "sneaky"])).code).toBe(2);
      expect(existsSync(join(home, "profiles", "mallory"))).toBe(false);
      expect(rowsMentioning(stateDb, "mallory")).toEqual({});
      expect(JSON.stringify(transcript("alice", (await createShown("alice")).bot_chat_session_id))).not.toContain("sneaky");
    });

    it("with a wrong key: UNAUTHENTICATED, exit 2, nothing done", async () => {
      for (const key of ["wrong-key-0123456789abcdef", `${TEST_KEY}x`, TEST_KEY.slice(0, -1)]) {
        const r = await tcp(["--json", "profile", "create", "mallory"], key);
        expect(r.code, key).toBe(2);
        expect(JSON.parse(r.stderr).error.reason).toBe("unauthenticated");
      }
      const del = await tcp(["profile", "delete", "--yes", "alice"], "wrong-key-0123456789abcdef");
      expect(del.code).toBe(2);
      expect(existsSync(join(home, "profiles", "mallory"))).toBe(false);
      expect(existsSync(join(home, "profiles", "alice", "config.yaml"))).toBe(true);
    });

    it("with the right key (--key or HERMES_KEY): works", async () => {
      const created = await tcp(["--json", "profile", "create", "remote"], TEST_KEY);
      expect(created.code).toBe(0);
      expect(JSON.parse(created.stdout).name).toBe("remote");
      expect(existsSync(join(home, "profiles", "remote", "config.yaml"))).toBe(true);
      const viaEnv = await hermes(["--gateway", `grpc://${gw.grpc}`, "-p", "remote", "chat", "-q", "over tcp"], {
        home: clientHome,
        env: { HERMES_KEY: TEST_KEY },
      });
      expect(viaEnv.code).toBe(0);
      expect(viaEnv.stdout).toContain("over tcp");
      const status = await tcp(["--json", "gateway", "status"], TEST_KEY);
      expect(status.code).toBe(0);
      expect(JSON.parse(status.stdout).gateway_id).toBe(gw.id);
    });
  });

  it("rename while the gateway runs goes through it: directory, rows and live index move; migrate-identity again is a no-op", async () => {
    const before = await createOk("mybot");
    const remembered = await chatOk("mybot", "hello from before");
    const r = await cli(["profile", "rename", "mybot", "assistant"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("renamed mybot → assistant; identity migrated");
    expect(existsSync(join(home, "profiles", "mybot"))).toBe(false);
    expect(existsSync(join(home, "profiles", "assistant", "config.yaml"))).toBe(true);
    expect(rowsMentioning(stateDb, "mybot")).toEqual({});

    // The old name keeps resolving; a turn through it lands in the same session, now keyed by the new name.
    // The persona follows too: the reply comes from "assistant".
    const still = await chatOk("mybot", "hello after the rename", "assistant");
    expect(transcript("assistant", before.bot_chat_session_id).map((m) => m.content)).toEqual([
      "hello from before",
      remembered,
      "hello after the rename",
      still,
    ]);
    // The gateway persists its (rekeyed) in-memory index after the turn: the old name must not come back.
    await eventually(() => {
      const updated = withDb(stateDb, (db) =>
        db
          .prepare(
            "SELECT json_extract(entry_json, '$.updated_at') AS at FROM gateway_routing WHERE routing_key = 'agent:assistant:bot:dm:bot-chat'",
          )
          .get(),
      ) as { at: string } | undefined;
      const session = withDb(stateDb, (db) =>
        db.prepare("SELECT updated_at FROM sessions WHERE session_id = ?").get(before.bot_chat_session_id),
      ) as {
        updated_at: string;
      };
      expect(updated?.at).toBe(session.updated_at);
    });
    expect(routingKeys().filter((k) => k.startsWith("agent:mybot:"))).toEqual([]);
    expect(rowsMentioning(stateDb, "mybot")).toEqual({});

    const again = await cli(["--json", "profile", "migrate-identity", "mybot", "assistant"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ ok: true, counts: {}, routing_in_memory: 0 });
    const human = await cli(["profile", "migrate-identity", "mybot", "assistant"]);
    expect(human.stdout).toContain("identity migrated: mybot → assistant (nothing to rewrite)");
  });

  it("migrate-identity onto a profile that does not exist fails with a message", async () => {
    const r = await cli(["profile", "migrate-identity", "alice", "nobody"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("nobody does not exist");
    expect(rowsMentioning(stateDb, "alice").sessions).toBe(1);
  });

  it("migrate-identity is refused over --gateway TCP (it belongs to the control socket)", async () => {
    const r = await tcp(["profile", "migrate-identity", "mybot", "assistant"], TEST_KEY);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("control socket");
  });

  it("a failed live migration (state.db locked): rename exits 0 with the warning and the retry command; the retry completes it", async () => {
    const carol = await createOk("carol");
    await chatOk("carol", "before the lock");
    const lock = holdWriteLock(stateDb);
    let r: Awaited<ReturnType<typeof cli>>;
    try {
      r = await cli(["profile", "rename", "carol", "dave"]);
    } finally {
      lock.release();
    }
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("renamed carol → dave");
    expect(r.stderr).toContain(`identity migration failed in ${stateDb}`);
    expect(r.stderr).toMatch(/locked/);
    expect(r.stderr).toContain("hermes profile migrate-identity carol dave");
    expect(existsSync(join(home, "profiles", "carol"))).toBe(false);
    expect(existsSync(join(home, "profiles", "dave", "config.yaml"))).toBe(true);
    // Nothing was rewritten: the rows still carry the old name.
    expect(rowsMentioning(stateDb, "carol")).toMatchObject({ sessions: 1, gateway_routing: 1, delivery_obligations: 1 });
    expect(rowsMentioning(stateDb, "dave")).toEqual({});

    const m = await cli(["--json", "profile", "migrate-identity", "carol", "dave"]);
    expect(m.stderr).toBe("");
    expect(m.code).toBe(0);
    expect(JSON.parse(m.stdout)).toMatchObject({
      ok: true,
      counts: { sessions: 1, gateway_routing: 1, delivery_obligations: 1 },
      routing_in_memory: 1,
    });
    expect(rowsMentioning(stateDb, "carol")).toEqual({});
    expect(rowsMentioning(stateDb, "dave")).toMatchObject({ sessions: 1, gateway_routing: 1 });

    const again = await cli(["--json", "profile", "migrate-identity", "carol", "dave"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ ok: true, counts: {}, routing_in_memory: 0 });

    // The live index moved too: a turn on dave persists dave's key, and carol's does not come back.
    const after = await chatOk("dave", "after");
    expect(transcript("dave", carol.bot_chat_session_id).map((m) => m.content)).toContain(after);
    await eventually(() => expect(routingKeys()).toContain("agent:dave:bot:dm:bot-chat"));
    expect(routingKeys().filter((k) => k.startsWith("agent:carol:"))).toEqual([]);
    const show = JSON.parse((await cli(["--json", "profile", "show", "carol"])).stdout) as { name: string; aliases: string[] };
    expect(show).toMatchObject({ name: "dave", aliases: ["carol"] });
  });

  it("delete through the gateway: refused without --yes; with --yes the profile, its rows and its live routing go; re-create works", async () => {
    await createOk("dora");
    await chatOk("dora", "soon gone");
    const refused = await cli(["profile", "delete", "dora"]);
    expect(refused.code).toBe(2);
    expect(existsSync(join(home, "profiles", "dora", "config.yaml"))).toBe(true);

    const r = await cli(["--json", "profile", "delete", "--yes", "dora"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      name: "dora",
      tombstone: join(home, "profiles", ".deleted", "dora"),
      // gateway_routing is not among the counts: the live index dropped and persisted those rows first.
      purged: { sessions: 1 },
    });
    expect(existsSync(join(home, "profiles", "dora"))).toBe(false);
    expect(existsSync(join(home, "profiles", ".deleted", "dora"))).toBe(true);
    // The chat turn's obligation was delivered before the delete and stays so (only open ones are abandoned).
    expect(rowsMentioning(stateDb, "dora")).toEqual({ delivery_obligations: 1 });
    expect(
      withDb(stateDb, (db) => db.prepare("SELECT DISTINCT state FROM delivery_obligations WHERE adapter_profile = 'dora'").all()),
    ).toEqual([{ state: "delivered" }]);
    const chat = await cli(["-p", "dora", "chat", "-q", "anyone?"]);
    expect(chat.code).toBe(1);
    expect(chat.stderr).toContain("was deleted");
    expect(existsSync(join(home, "profiles", "dora"))).toBe(false);

    const def = await cli(["profile", "delete", "--yes", "default"]);
    expect(def.code).toBe(2);

    await createOk("dora");
    expect(existsSync(join(home, "profiles", ".deleted", "dora"))).toBe(false);
    await chatOk("dora", "back again");
  });

  it("profile list through the gateway shows the names after all of the above", async () => {
    const r = await cli(["--json", "profile", "list"]);
    expect(r.code).toBe(0);
    const names = (JSON.parse(r.stdout) as { profiles: { name: string }[] }).profiles.map((p) => p.name);
    expect(names).toEqual(["default", "alice", "assistant", "dave", "dora", "remote"]);
  });

  it("SIGTERM: exits 0 and removes the control socket; the CLI then works on the home directly", async () => {
    const result = await gw.stop();
    expect(result).toEqual({ code: 0, signal: null });
    expect(existsSync(gw.control)).toBe(false);
    expect(gw.output().stderr).not.toMatch(/internal error/);
    const status = await cli(["gateway", "status"]);
    expect(status.code).toBe(1);
    expect(status.stderr).toContain("gateway start");
    const list = await cli(["--json", "profile", "list"]);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as { profiles: unknown[] }).profiles).toHaveLength(6);
    // The stop wrote every hosted profile's heartbeat as stopped.
    const beats = withDb(stateDb, (db) => db.prepare("SELECT profile, state FROM gateway_heartbeats ORDER BY profile").all());
    expect(beats).toEqual(["alice", "assistant", "dave", "default", "dora", "remote"].map((profile) => ({ profile, state: "stopped" })));
  });
});

async function createShown(name: string): Promise<{ bot_chat_session_id: string }> {
  const r = await cli(["--json", "profile", "show", name]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as { bot_chat_session_id: string };
}
