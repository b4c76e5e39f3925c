import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { openVersion9, v9Sessions, writeV9Sessions } from "../../gateway/test/support/version9-identity.js";
import {
  assertBuilt,
  hermes,
  holdWriteLock,
  identityRows,
  NAME_RULE,
  removeHome,
  rowsMentioning,
  tempHome,
  treeSnapshot,
  withDb,
} from "./support/cli-harness.js";

/**
 * `hermes profile …` with no gateway running: the CLI works directly on HERMES_HOME.
 * Each test gets its own temporary home.
 */

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

interface ProfileJson {
  name: string;
  display_name: string;
  title: string;
  description: string;
  model: string;
  provider: string;
  path: string;
  aliases: string[];
  bot_chat_session_id: string;
  is_default: boolean;
}

async function createOk(home: string, name: string, ...flags: string[]): Promise<ProfileJson> {
  const r = await hermes(["--json", "profile", "create", name, ...flags], { home });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as ProfileJson;
}

describe("an older state.db", () => {
  it("is upgraded in place by the first command, which says so on stderr (stdout stays data); the next command is silent", async () => {
    const home = newHome();
    const old = openVersion9(join(home, "state.db"));
    writeV9Sessions(old, v9Sessions("default", 3));
    old.close();
    const first = await hermes(["--json", "profile", "list"], { home });
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(/^hermes: upgrading gateway state\.db at .* to schema version 10 \(profile-ids\): once/m);
    expect(first.stderr).toMatch(/^hermes: upgraded gateway state\.db at .* to schema version 10 \(profile-ids\) in \d+\.\d s$/m);
    expect((JSON.parse(first.stdout) as { profiles: ProfileJson[] }).profiles.map((p) => p.name)).toContain("default");
    const second = await hermes(["--json", "profile", "list"], { home });
    expect(second.code).toBe(0);
    expect(second.stderr).toBe("");
  });
});

describe.concurrent("profile names", () => {
  const invalid: [string, string][] = [
    ["path traversal", "../x"],
    ["empty", ""],
    ["upper case", "Alice"],
    ["65 characters", "a".repeat(65)],
  ];

  it.each(invalid)("create refuses %s with exit 2, states the rule and creates nothing", async (_what, name) => {
    const home = newHome();
    const r = await hermes(["profile", "create", name], { home });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(NAME_RULE);
    expect(r.stderr).toContain(JSON.stringify(name));
    expect(r.stdout).toBe("");
    expect(Object.keys(treeSnapshot(join(home, "profiles")))).toEqual([]);
    expect(existsSync(join(home, "x"))).toBe(false);
  });

  it("64 characters is the longest name accepted", async () => {
    const home = newHome();
    const p = await createOk(home, "a".repeat(64));
    expect(p.name).toBe("a".repeat(64));
  });

  it("show, rename and delete refuse invalid names the same way", async () => {
    const home = newHome();
    await createOk(home, "alice");
    for (const args of [
      ["profile", "show", "../x"],
      ["profile", "rename", "alice", "../x"],
      ["profile", "rename", "Alice", "bob"],
      ["profile", "delete", "--yes", "../x"],
      ["profile", "migrate-identity", "alice", "A"],
    ]) {
      const r = await hermes(args, { home });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toContain(NAME_RULE);
    }
    expect(existsSync(join(home, "profiles", "alice", "config.yaml"))).toBe(true);
  });
});

describe.concurrent("create, list, show", () => {
  it("create stores title, description, model and provider; list and show report them", async () => {
    const home = newHome();
    const created = await createOk(
      home,
      "alice",
      "--title",
      "Researcher",
      "--description",
      "reads papers",
      "--model",
      "m-large",
      "--provider",
      "local",
    );
    expect(created).toMatchObject({
      name: "alice",
      display_name: "alice",
      title: "Researcher",
      description: "reads papers",
      model: "m-large",
      provider: "local",
      path: join(home, "profiles", "alice"),
      is_default: false,
    });
    expect(created.bot_chat_session_id).toMatch(/^ses_/);
    const config = parseYaml(readFileSync(join(home, "profiles", "alice", "config.yaml"), "utf8"));
    expect(config).toMatchObject({ title: "Researcher", description: "reads papers", model: "m-large", provider: "local" });

    // Human output names the profile and what to try next.
    const human = await hermes(["profile", "create", "bob"], { home });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain("created profile bob");
    expect(human.stdout).toContain("hermes -p bob chat");

    const list = await hermes(["profile", "list"], { home });
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+DISPLAY NAME\s+TITLE\s+MODEL\s+PROVIDER\s+SECTION\s+HIDDEN$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(["default", "alice", "bob"]);
    expect(lines.find((l) => l.startsWith("alice"))).toMatch(/^alice\s+alice\s+Researcher\s+m-large\s+local\s+-\s+-$/);

    const json = await hermes(["--json", "profile", "list"], { home });
    expect(json.code).toBe(0);
    const { profiles } = JSON.parse(json.stdout) as { profiles: ProfileJson[] };
    expect(profiles.map((p) => p.name)).toEqual(["default", "alice", "bob"]);
    expect(profiles[0]).toMatchObject({ name: "default", is_default: true, path: home });
    expect(profiles[1]).toEqual(created);

    const show = await hermes(["profile", "show", "alice"], { home });
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/name:\s+alice\n/);
    expect(show.stdout).toMatch(/title:\s+Researcher\n/);
    expect(show.stdout).toMatch(/model:\s+m-large \(provider local\)/);

    // Each profile got its canonical Bot Chat session and routing entry.
    const rows = identityRows(join(home, "state.db"));
    const keys = (rows.sessions as { session_key: string }[]).map((s) => s.session_key).sort();
    expect(keys).toEqual(["agent:alice:bot:dm:bot-chat", "agent:bob:bot:dm:bot-chat", "agent:default:bot:dm:bot-chat"]);
    expect((rows.gateway_routing as { routing_key: string }[]).map((r) => r.routing_key).sort()).toEqual(keys);
  });

  it("--clone-from copies config, SOUL.md and .env but not sessions; flags override the cloned config", async () => {
    const home = newHome();
    await createOk(home, "base", "--title", "Base", "--description", "the template", "--model", "m-base");
    writeFileSync(join(home, "profiles", "base", "SOUL.md"), "You are terse.\n");
    writeFileSync(join(home, "profiles", "base", ".env"), "SECRET=1\n", { mode: 0o600 });
    const clone = await createOk(home, "copy", "--clone-from", "base", "--title", "Copy");
    expect(clone).toMatchObject({ name: "copy", title: "Copy", description: "the template", model: "m-base" });
    expect(readFileSync(join(home, "profiles", "copy", "SOUL.md"), "utf8")).toBe("You are terse.\n");
    expect(readFileSync(join(home, "profiles", "copy", ".env"), "utf8")).toBe("SECRET=1\n");
    const base = JSON.parse((await hermes(["--json", "profile", "show", "base"], { home })).stdout) as ProfileJson;
    expect(clone.bot_chat_session_id).not.toBe(base.bot_chat_session_id);
    expect(base.title).toBe("Base");
  });

  it("--clone-from an unknown profile fails with exit 1 and creates nothing", async () => {
    const home = newHome();
    const r = await hermes(["profile", "create", "copy", "--clone-from", "ghost"], { home });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("unknown profile ghost");
    expect(existsSync(join(home, "profiles", "copy"))).toBe(false);
  });

  it("create of an existing profile is refused with exit 2", async () => {
    const home = newHome();
    await createOk(home, "alice", "--title", "First");
    const r = await hermes(["profile", "create", "alice", "--title", "Second"], { home });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("already exists");
    expect(JSON.parse((await hermes(["--json", "profile", "show", "alice"], { home })).stdout).title).toBe("First");
  });

  it("an unknown profile fails with exit 1 and a hint", async () => {
    const home = newHome();
    const r = await hermes(["profile", "show", "ghost"], { home });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("unknown profile ghost");
    expect(r.stderr).toContain("hermes profile list");
    const j = await hermes(["--json", "profile", "show", "ghost"], { home });
    expect(j.code).toBe(1);
    expect(JSON.parse(j.stderr).error).toMatchObject({ reason: "not_found", data: { profile: "ghost" } });
    for (const args of [
      ["profile", "rename", "ghost", "spirit"],
      ["profile", "delete", "--yes", "ghost"],
    ]) {
      const x = await hermes(args, { home });
      expect(x.code, args.join(" ")).toBe(1);
      expect(x.stderr, args.join(" ")).toContain("hermes profile list");
    }
  });
});

describe.concurrent("rename (no gateway: the CLI rewrites the database itself)", () => {
  it("moves the directory and every identity row; the old name resolves as an alias", async () => {
    const home = newHome();
    const before = await createOk(home, "mybot", "--title", "Helper");
    const r = await hermes(["profile", "rename", "mybot", "assistant"], { home });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("renamed mybot → assistant");
    expect(r.stdout).toContain("sessions 1");
    expect(existsSync(join(home, "profiles", "mybot"))).toBe(false);
    expect(existsSync(join(home, "profiles", "assistant", "config.yaml"))).toBe(true);
    expect(rowsMentioning(join(home, "state.db"), "mybot")).toEqual({});
    expect(rowsMentioning(join(home, "state.db"), "assistant")).toEqual({ sessions: 1, gateway_routing: 1 });

    const shown = await hermes(["--json", "profile", "show", "mybot"], { home });
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      name: "assistant",
      title: "Helper",
      aliases: ["mybot"],
      bot_chat_session_id: before.bot_chat_session_id,
    });
    const human = await hermes(["profile", "show", "mybot"], { home });
    expect(human.stdout).toMatch(/name:\s+assistant\n/);
    expect(human.stdout).toMatch(/former names:\s+mybot/);

    const list = JSON.parse((await hermes(["--json", "profile", "list"], { home })).stdout) as { profiles: ProfileJson[] };
    expect(list.profiles.map((p) => p.name)).toEqual(["default", "assistant"]);

    // Retrying the migration after a clean rename is a no-op success.
    const again = await hermes(["profile", "migrate-identity", "mybot", "assistant"], { home });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("nothing to rewrite");
  });

  it("onto an existing profile is refused with exit 2 and changes nothing", async () => {
    const home = newHome();
    await createOk(home, "alice", "--title", "A");
    await createOk(home, "bob", "--title", "B");
    const dirs = treeSnapshot(join(home, "profiles"));
    const rows = identityRows(join(home, "state.db"));
    const r = await hermes(["profile", "rename", "alice", "bob"], { home });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("bob already exists");
    expect(r.stdout).toBe("");
    expect(treeSnapshot(join(home, "profiles"))).toEqual(dirs);
    expect(identityRows(join(home, "state.db"))).toEqual(rows);
  });

  it("to or from an unknown name changes nothing", async () => {
    const home = newHome();
    await createOk(home, "alice");
    const rows = identityRows(join(home, "state.db"));
    expect((await hermes(["profile", "rename", "alice", "default"], { home })).code).toBe(2);
    expect(identityRows(join(home, "state.db"))).toEqual(rows);
    expect(existsSync(join(home, "profiles", "alice", "config.yaml"))).toBe(true);
  });

  it("a locked state.db: the rename still succeeds with a warning naming the database and the retry; migrate-identity completes it", async () => {
    const home = newHome();
    const env = { HERMES_DB_BUSY_TIMEOUT_MS: "200" };
    const before = await createOk(home, "mybot");
    const stateDb = join(home, "state.db");
    const lock = holdWriteLock(stateDb);
    let r: Awaited<ReturnType<typeof hermes>>;
    try {
      r = await hermes(["profile", "rename", "mybot", "assistant"], { home, env });
      // While locked, the retry itself fails (exit ≠ 0) and names the database.
      const blocked = await hermes(["profile", "migrate-identity", "mybot", "assistant"], { home, env });
      expect(blocked.code).not.toBe(0);
      expect(blocked.stderr).toContain(stateDb);
      expect(blocked.stderr).toMatch(/locked/);
    } finally {
      lock.release();
    }
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("renamed mybot → assistant");
    expect(r.stderr).toContain(stateDb);
    expect(r.stderr).toMatch(/locked/);
    expect(r.stderr).toContain("hermes profile migrate-identity mybot assistant");
    expect(existsSync(join(home, "profiles", "assistant"))).toBe(true);
    expect(existsSync(join(home, "profiles", "mybot"))).toBe(false);
    // The rows still carry the old name until the retry.
    expect(rowsMentioning(stateDb, "mybot")).toEqual({ sessions: 1, gateway_routing: 1 });

    const m = await hermes(["--json", "profile", "migrate-identity", "mybot", "assistant"], { home, env });
    expect(m.code).toBe(0);
    expect(JSON.parse(m.stdout)).toMatchObject({ ok: true, counts: { sessions: 1, gateway_routing: 1 } });
    expect(rowsMentioning(stateDb, "mybot")).toEqual({});
    const shown = JSON.parse((await hermes(["--json", "profile", "show", "assistant"], { home })).stdout) as ProfileJson;
    expect(shown.bot_chat_session_id).toBe(before.bot_chat_session_id);
    expect(shown.aliases).toEqual(["mybot"]);

    const again = await hermes(["--json", "profile", "migrate-identity", "mybot", "assistant"], { home, env });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ ok: true, counts: {} });
  });

  it("migrate-identity onto a profile that does not exist fails with a message", async () => {
    const home = newHome();
    await createOk(home, "alice");
    const r = await hermes(["profile", "migrate-identity", "alice", "nobody"], { home });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("nobody does not exist");
    expect(rowsMentioning(join(home, "state.db"), "alice")).toEqual({ sessions: 1, gateway_routing: 1 });
  });
});

describe.concurrent("rename default <label>", () => {
  it("sets only display_name in HERMES_HOME/profile.yaml; the id stays default", async () => {
    const home = newHome();
    await createOk(home, "alice");
    const rows = identityRows(join(home, "state.db"));
    const r = await hermes(["profile", "rename", "default", "小助手"], { home });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("小助手");
    expect(r.stdout).toContain("id stays default");
    expect(parseYaml(readFileSync(join(home, "profile.yaml"), "utf8"))).toEqual({ display_name: "小助手" });
    expect(existsSync(join(home, "profiles", "小助手"))).toBe(false);
    expect(identityRows(join(home, "state.db"))).toEqual(rows);

    const { profiles } = JSON.parse((await hermes(["--json", "profile", "list"], { home })).stdout) as { profiles: ProfileJson[] };
    expect(profiles[0]).toMatchObject({ name: "default", display_name: "小助手", is_default: true });
    const list = await hermes(["profile", "list"], { home });
    expect(list.stdout).toMatch(/^default\s+小助手/m);
    const shown = await hermes(["--json", "profile", "show", "default"], { home });
    expect(JSON.parse(shown.stdout)).toMatchObject({ name: "default", display_name: "小助手" });
    // The label is presentation only: it does not resolve as a profile.
    expect((await hermes(["profile", "show", "小助手"], { home })).code).toBe(2);

    // A second rename replaces the label and keeps other keys of profile.yaml.
    writeFileSync(join(home, "profile.yaml"), "display_name: 小助手\nui_meta:\n  color: blue\n");
    expect((await hermes(["profile", "rename", "default", "Harumesu"], { home })).code).toBe(0);
    expect(parseYaml(readFileSync(join(home, "profile.yaml"), "utf8"))).toEqual({ display_name: "Harumesu", ui_meta: { color: "blue" } });
  });

  it("accepts 64 characters (counted as characters, not bytes) and refuses empty or 65", async () => {
    const home = newHome();
    const long = "界".repeat(64);
    expect((await hermes(["profile", "rename", "default", long], { home })).code).toBe(0);
    expect(parseYaml(readFileSync(join(home, "profile.yaml"), "utf8")).display_name).toBe(long);
    for (const label of ["", "   ", "界".repeat(65), "x".repeat(65)]) {
      const r = await hermes(["profile", "rename", "default", label], { home });
      expect(r.code, JSON.stringify(label)).toBe(2);
      expect(r.stderr).toContain("1-64 characters");
    }
    expect(parseYaml(readFileSync(join(home, "profile.yaml"), "utf8")).display_name).toBe(long);
  });
});

describe.concurrent("delete", () => {
  /** A profile with the identity rows a gateway would have left: a heartbeat and a pending obligation. */
  async function profileWithState(home: string, name: string): Promise<void> {
    await createOk(home, name);
    withDb(
      join(home, "state.db"),
      (db) => {
        db.prepare(
          "INSERT INTO gateway_heartbeats (profile, gateway_id, pid, state, last_seen_at) VALUES (?, 'gw-test', 1, 'stopped', '2026-01-01T00:00:00Z')",
        ).run(name);
        db.prepare(
          `INSERT INTO delivery_obligations (obligation_id, adapter_profile, session_key, kind, state, payload_json, created_at, updated_at)
           VALUES (?, ?, ?, 'turn_reply', 'pending', '{}', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
        ).run(`obl_${name}`, name, `agent:${name}:bot:dm:bot-chat`);
      },
      { write: true },
    );
  }

  it("without --yes and without a TTY is refused with exit 2 and deletes nothing", async () => {
    const home = newHome();
    await profileWithState(home, "coder");
    const dirs = treeSnapshot(join(home, "profiles"));
    const rows = identityRows(join(home, "state.db"));
    const r = await hermes(["profile", "delete", "coder"], { home });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--yes");
    expect(treeSnapshot(join(home, "profiles"))).toEqual(dirs);
    expect(identityRows(join(home, "state.db"))).toEqual(rows);
    expect(existsSync(join(home, "profiles", ".deleted", "coder"))).toBe(false);
  });

  it("with --yes removes the directory, writes a tombstone, purges identity rows and abandons obligations", async () => {
    const home = newHome();
    await profileWithState(home, "coder");
    await profileWithState(home, "keeper");
    const stateDb = join(home, "state.db");
    const r = await hermes(["--json", "profile", "delete", "--yes", "coder"], { home });
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { name: string; purged: Record<string, number>; tombstone: string };
    expect(out).toMatchObject({
      name: "coder",
      tombstone: join(home, "profiles", ".deleted", "coder"),
      purged: { sessions: 1, gateway_routing: 1, gateway_heartbeats: 1, delivery_obligations: 1 },
    });
    expect(existsSync(join(home, "profiles", "coder"))).toBe(false);
    expect(existsSync(join(home, "profiles", ".deleted", "coder"))).toBe(true);
    expect(rowsMentioning(stateDb, "coder")).toEqual({});
    const obligation = withDb(stateDb, (db) =>
      db.prepare("SELECT state FROM delivery_obligations WHERE obligation_id = 'obl_coder'").get(),
    );
    expect(obligation).toEqual({ state: "abandoned" });
    // The other profile is untouched.
    expect(rowsMentioning(stateDb, "keeper")).toEqual({ sessions: 1, gateway_routing: 1, gateway_heartbeats: 1, delivery_obligations: 1 });

    const list = JSON.parse((await hermes(["--json", "profile", "list"], { home })).stdout) as { profiles: ProfileJson[] };
    expect(list.profiles.map((p) => p.name)).toEqual(["default", "keeper"]);
    const shown = await hermes(["profile", "show", "coder"], { home });
    expect(shown.code).toBe(1);
    expect(shown.stderr).toContain("was deleted");

    // Re-creating explicitly works, clears the tombstone and starts fresh.
    const again = await createOk(home, "coder", "--title", "Reborn");
    expect(again.title).toBe("Reborn");
    expect(existsSync(join(home, "profiles", ".deleted", "coder"))).toBe(false);
    expect(rowsMentioning(stateDb, "coder")).toEqual({ sessions: 1, gateway_routing: 1 });
  });

  it("human output of delete --yes names the tombstone", async () => {
    const home = newHome();
    await createOk(home, "coder");
    const r = await hermes(["profile", "delete", "coder", "-y"], { home });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("deleted profile coder");
    expect(r.stdout).toContain(join(home, "profiles", ".deleted", "coder"));
  });

  it("the default profile cannot be deleted, with or without --yes", async () => {
    const home = newHome();
    await createOk(home, "alice");
    const rows = identityRows(join(home, "state.db"));
    for (const args of [
      ["profile", "delete", "default"],
      ["profile", "delete", "--yes", "default"],
    ]) {
      const r = await hermes(args, { home });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toContain("default profile cannot be deleted");
    }
    expect(identityRows(join(home, "state.db"))).toEqual(rows);
    expect(existsSync(join(home, "state.db"))).toBe(true);
  });

  it("a former name deletes the renamed profile", async () => {
    const home = newHome();
    await createOk(home, "mybot");
    expect((await hermes(["profile", "rename", "mybot", "assistant"], { home })).code).toBe(0);
    const r = await hermes(["--json", "profile", "delete", "--yes", "mybot"], { home });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).name).toBe("assistant");
    expect(existsSync(join(home, "profiles", "assistant"))).toBe(false);
    expect(existsSync(join(home, "profiles", ".deleted", "assistant"))).toBe(true);
    expect(identityRows(join(home, "state.db")).profile_aliases).toEqual([]);
  });
});
