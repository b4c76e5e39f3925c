import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, HermesError, openDatabase, tableExists } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { IDENTITY_REGISTRY } from "../core/registry.js";
import type { RoutingOrigin } from "../core/routing-key.js";
import { purgeProfileState, rekeyProfileState } from "./identity-store.js";
import { persistRoutingChanges } from "./routing-store.js";
import { type SessionRow, SessionsStore } from "./sessions-store.js";

let dir: string;
let db: Db;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-identity-"));
  db = openDatabase(join(dir, "state.db"), { label: "test state.db", migrations: GATEWAY_MIGRATIONS });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const T = "2026-01-01T00:00:00.000Z";

/** One row in every registered identity table for `profile`, keyed by chat id. */
function seed(profile: string, chat = "c1") {
  const key = `agent:${profile}:api:dm:${chat}`;
  const origin = { profile, platform: "api", chat_type: "dm", chat_id: chat };
  new SessionsStore(db).insert(session(`ses-${profile}-${chat}`, key, origin));
  persistRoutingChanges(db, {
    upserts: [{ routing_key: key, session_key: key, session_id: `ses-${profile}-${chat}`, origin, updated_at: T }],
    deletes: [],
  });
  db.prepare(
    "INSERT OR REPLACE INTO gateway_heartbeats (profile, gateway_id, pid, state, last_seen_at) VALUES (?, 'gw', 1, 'running', ?)",
  ).run(profile, T);
  db.prepare(
    "INSERT INTO delivery_obligations (obligation_id, adapter_profile, session_key, kind, state, payload_json, created_at, updated_at) VALUES (?, ?, ?, 'turn_reply', 'pending', '{}', ?, ?)",
  ).run(`obl-${profile}-${chat}`, profile, key, T, T);
}

function session(session_id: string, session_key: string, origin: RoutingOrigin): SessionRow {
  const at = { created_at: T, updated_at: T };
  return {
    session_id,
    session_key,
    profile_name: origin.profile,
    title: "t",
    kind: "api",
    origin,
    model_override: null,
    provider_override: null,
    ...at,
  };
}

/** Every identity-bearing value in the database, for before/after comparisons. */
function snapshot() {
  return {
    sessions: db.prepare("SELECT session_id, session_key, profile_name, origin_json FROM sessions ORDER BY session_id").all(),
    routing: db.prepare("SELECT routing_key, entry_json FROM gateway_routing ORDER BY routing_key").all(),
    heartbeats: db.prepare("SELECT profile FROM gateway_heartbeats ORDER BY profile").all(),
    obligations: db
      .prepare("SELECT obligation_id, adapter_profile, session_key, state FROM delivery_obligations ORDER BY obligation_id")
      .all(),
    aliases: db.prepare("SELECT alias, profile_name FROM profile_aliases ORDER BY alias").all(),
  };
}

describe("rekeyProfileState", () => {
  it("rewrites every registered column in one go and returns per-table counts", () => {
    seed("bob", "c1");
    seed("bob", "c2");
    seed("carol", "c1");
    db.prepare("INSERT INTO profile_aliases (alias, profile_name, created_at) VALUES ('bobby', 'bob', ?)").run(T);
    const counts = rekeyProfileState(db, "bob", "robert");
    expect(counts).toEqual({ sessions: 2, gateway_routing: 2, gateway_heartbeats: 1, delivery_obligations: 2, profile_aliases: 1 });

    const s = db.prepare("SELECT * FROM sessions WHERE session_id = 'ses-bob-c1'").get() as {
      session_key: string;
      profile_name: string;
      origin_json: string;
      entry_json: string;
    };
    expect(s.session_key).toBe("agent:robert:api:dm:c1");
    expect(s.profile_name).toBe("robert");
    expect(JSON.parse(s.origin_json).profile).toBe("robert");
    const r = db.prepare("SELECT * FROM gateway_routing WHERE routing_key = 'agent:robert:api:dm:c2'").get() as {
      session_key: string;
      profile_name: string;
      origin_json: string;
      entry_json: string;
    };
    expect(JSON.parse(r.entry_json)).toMatchObject({ session_key: "agent:robert:api:dm:c2", origin: { profile: "robert" } });
    expect(db.prepare("SELECT profile FROM gateway_heartbeats ORDER BY profile").pluck().all()).toEqual(["carol", "robert"]);
    expect(db.prepare("SELECT session_key FROM delivery_obligations WHERE adapter_profile = 'robert' ORDER BY 1").pluck().all()).toEqual([
      "agent:robert:api:dm:c1",
      "agent:robert:api:dm:c2",
    ]);
    expect(db.prepare("SELECT profile_name FROM profile_aliases WHERE alias = 'bobby'").pluck().get()).toBe("robert");
    // Nothing still names bob anywhere.
    expect(JSON.stringify(snapshot())).not.toMatch(/"bob"|agent:bob:/);
    // carol untouched.
    expect(db.prepare("SELECT session_key FROM sessions WHERE profile_name = 'carol'").pluck().get()).toBe("agent:carol:api:dm:c1");
  });

  it("a second run rewrites nothing and succeeds", () => {
    seed("bob");
    rekeyProfileState(db, "bob", "robert");
    const before = snapshot();
    expect(rekeyProfileState(db, "bob", "robert")).toEqual({});
    expect(snapshot()).toEqual(before);
  });

  it("does not touch keys of a profile whose name merely starts with the old name", () => {
    seed("bob");
    seed("bobcat");
    rekeyProfileState(db, "bob", "robert");
    expect(db.prepare("SELECT profile_name FROM sessions ORDER BY 1").pluck().all()).toEqual(["bobcat", "robert"]);
    expect(db.prepare("SELECT routing_key FROM gateway_routing ORDER BY 1").pluck().all()).toEqual([
      "agent:bobcat:api:dm:c1",
      "agent:robert:api:dm:c1",
    ]);
  });

  it("refuses a routing collision with nothing written, naming table and key", () => {
    seed("bob", "c1");
    seed("bob", "c2");
    seed("robert", "c2");
    const before = snapshot();
    let error: unknown;
    try {
      rekeyProfileState(db, "bob", "robert");
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(HermesError);
    expect((error as HermesError).reason).toBe("identity_collision");
    expect((error as HermesError).message).toMatch(/sessions: agent:robert:api:dm:c2 already exists/);
    expect(snapshot()).toEqual(before);
  });

  it("merges onto a profile that already has sessions of its own, its row counts following", () => {
    seed("bob", "c1");
    seed("robert", "c2");
    expect(rekeyProfileState(db, "bob", "robert")).toMatchObject({ sessions: 1, gateway_routing: 1, delivery_obligations: 1 });
    expect(db.prepare("SELECT session_key FROM sessions WHERE profile_name = 'robert' ORDER BY 1").pluck().all()).toEqual([
      "agent:robert:api:dm:c1",
      "agent:robert:api:dm:c2",
    ]);
    expect(db.prepare("SELECT name, session_rows, routing_rows FROM profiles").all()).toEqual([
      { name: "robert", session_rows: 2, routing_rows: 2 },
    ]);
    expect(purgeProfileState(db, "robert")).toMatchObject({ sessions: 2, gateway_routing: 2 });
    expect(db.prepare("SELECT count(*) FROM profiles").pluck().get()).toBe(0);
  });

  it("refuses a per-chat binding collision through the registry's binding rule", () => {
    db.exec("CREATE TABLE topic_bindings (profile_name TEXT NOT NULL, chat_id TEXT NOT NULL, thread_id TEXT)");
    db.exec("INSERT INTO topic_bindings VALUES ('bob', '42', '7'), ('robert', '42', '7')");
    const registry = [
      ...IDENTITY_REGISTRY,
      {
        table: "topic_bindings",
        columns: [{ table: "topic_bindings", column: "profile_name", kind: "plain" as const }],
        purge: { kind: "delete" as const },
        binding: { profileColumn: "profile_name", bindingColumns: ["chat_id", "thread_id"] },
      },
    ];
    expect(() => rekeyProfileState(db, "bob", "robert", registry)).toThrow(/identity collision in topic_bindings/);
    expect(db.prepare("SELECT count(*) FROM topic_bindings WHERE profile_name = 'bob'").pluck().get()).toBe(1);
  });

  it("telegram_topics: a rename carries every chat and topic binding; one that `new` already owns refuses, writing nothing", () => {
    const bind = db.prepare(
      `INSERT INTO telegram_topics (profile, bot_id, chat_id, topic_id, chat_type, session_key, session_id, created_at, updated_at)
       VALUES (?, '100001', ?, ?, 'supergroup', ?, ?, ?, ?)`,
    );
    for (const topic of ["", "7", "8"]) {
      const key = `agent:bob:telegram:supergroup:-100123${topic ? `:${topic}` : ""}`;
      bind.run("bob", "-100123", topic, key, `ses-${topic}`, T, T);
    }
    bind.run("carol", "-100123", "7", "agent:carol:telegram:supergroup:-100123:7", "ses-carol", T, T);
    expect(rekeyProfileState(db, "bob", "robert")).toEqual({ telegram_topics: 3 });
    expect(db.prepare("SELECT topic_id, session_key FROM telegram_topics WHERE profile = 'robert' ORDER BY topic_id").all()).toEqual([
      { topic_id: "", session_key: "agent:robert:telegram:supergroup:-100123" },
      { topic_id: "7", session_key: "agent:robert:telegram:supergroup:-100123:7" },
      { topic_id: "8", session_key: "agent:robert:telegram:supergroup:-100123:8" },
    ]);
    expect(() => rekeyProfileState(db, "robert", "carol")).toThrow(/telegram_topics/);
    expect(db.prepare("SELECT count(*) FROM telegram_topics WHERE profile = 'robert'").pluck().get()).toBe(3);
    expect(purgeProfileState(db, "robert")).toEqual({ telegram_topics: 3 });
    expect(db.prepare("SELECT profile FROM telegram_topics").pluck().all()).toEqual(["carol"]);
  });

  it("skips registered tables that do not exist yet", () => {
    seed("bob");
    const registry = [
      ...IDENTITY_REGISTRY,
      {
        table: "not_created_yet",
        columns: [{ table: "not_created_yet", column: "profile", kind: "plain" as const }],
        purge: { kind: "delete" as const },
      },
    ];
    expect(tableExists(db, "not_created_yet")).toBe(false);
    expect(rekeyProfileState(db, "bob", "robert", registry)).toMatchObject({ sessions: 1 });
    expect(tableExists(db, "not_created_yet")).toBe(false);
  });

  it("drops the old heartbeat when the new name already has its own (derived status, no collision)", () => {
    seed("bob");
    db.prepare(
      "INSERT INTO gateway_heartbeats (profile, gateway_id, pid, state, last_seen_at) VALUES ('robert', 'gw', 2, 'running', ?)",
    ).run(T);
    expect(rekeyProfileState(db, "bob", "robert")).toMatchObject({ sessions: 1 });
    expect(db.prepare("SELECT profile, pid FROM gateway_heartbeats ORDER BY profile").all()).toEqual([{ profile: "robert", pid: 2 }]);
  });

  it("renames a large profile by its id: the sessions answer to the new name untouched; a large name table has its indexes rebuilt", () => {
    const sessions = new SessionsStore(db);
    const obligation = db.prepare(
      "INSERT INTO delivery_obligations (obligation_id, adapter_profile, session_key, kind, state, payload_json, created_at, updated_at) VALUES (?, 'big', ?, 'turn_reply', 'delivered', '{}', ?, ?)",
    );
    db.transaction(() => {
      for (let i = 0; i < 50_001; i++) {
        const origin = { profile: "big", platform: "api", chat_type: "dm", chat_id: String(i) };
        const key = `agent:big:api:dm:${i}`;
        sessions.insert(session(`s${i}`, key, origin));
        obligation.run(`o${i}`, key, T, T);
      }
    })();
    const rowsOfBig = () => db.prepare("SELECT profile_id, chat_key, origin_json FROM session_records ORDER BY session_id").all();
    const stored = rowsOfBig();
    const indexes = () =>
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'delivery_obligations' ORDER BY name").pluck().all();
    const before = indexes();
    expect(rekeyProfileState(db, "big", "huge")).toEqual({ sessions: 50_001, delivery_obligations: 50_001 });
    expect(rowsOfBig()).toEqual(stored); // not one session row was written
    expect(indexes()).toEqual(before);
    expect(db.prepare("SELECT count(*) FROM sessions WHERE profile_name = 'huge' AND session_key LIKE 'agent:huge:%'").pluck().get()).toBe(
      50_001,
    );
    expect(sessions.byKey("agent:huge:api:dm:7")).toMatchObject({ session_id: "s7", profile_name: "huge", origin: { profile: "huge" } });
    expect(sessions.byKey("agent:big:api:dm:7")).toBeUndefined();
    const origin = { profile: "huge", platform: "api", chat_type: "dm", chat_id: "7" };
    expect(() => sessions.insert(session("dup", "agent:huge:api:dm:7", origin))).toThrow(/UNIQUE/);
  });

  it("is a no-op when old and new are equal", () => {
    seed("bob");
    expect(rekeyProfileState(db, "bob", "bob")).toEqual({});
  });
});

describe("purgeProfileState", () => {
  it("deletes identity rows, marks obligations abandoned and leaves other profiles alone", () => {
    seed("bob", "c1");
    seed("bob", "c2");
    seed("carol");
    db.prepare("INSERT INTO profile_aliases (alias, profile_name, created_at) VALUES ('bobby', 'bob', ?)").run(T);
    const counts = purgeProfileState(db, "bob");
    expect(counts).toEqual({ sessions: 2, gateway_routing: 2, gateway_heartbeats: 1, delivery_obligations: 2, profile_aliases: 1 });
    expect(db.prepare("SELECT count(*) FROM sessions WHERE profile_name = 'bob'").pluck().get()).toBe(0);
    expect(db.prepare("SELECT state FROM delivery_obligations WHERE adapter_profile = 'bob'").pluck().all()).toEqual([
      "abandoned",
      "abandoned",
    ]);
    expect(db.prepare("SELECT count(*) FROM sessions WHERE profile_name = 'carol'").pluck().get()).toBe(1);
    expect(purgeProfileState(db, "bob")).toEqual({});
  });

  it("abandons only open obligations: delivered and failed ones stay as they were", () => {
    seed("bob", "c1");
    seed("bob", "c2");
    seed("bob", "c3");
    db.prepare("UPDATE delivery_obligations SET state = 'delivered' WHERE obligation_id = 'obl-bob-c1'").run();
    db.prepare("UPDATE delivery_obligations SET state = 'failed' WHERE obligation_id = 'obl-bob-c2'").run();
    expect(purgeProfileState(db, "bob")).toMatchObject({ delivery_obligations: 1 });
    expect(db.prepare("SELECT obligation_id, state FROM delivery_obligations ORDER BY obligation_id").all()).toEqual([
      { obligation_id: "obl-bob-c1", state: "delivered" },
      { obligation_id: "obl-bob-c2", state: "failed" },
      { obligation_id: "obl-bob-c3", state: "abandoned" },
    ]);
  });
});
