import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, openDatabase } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { purgeProfileState, rekeyProfileState } from "./identity-store.js";
import { forgetSessionRows, type SessionRow, SessionsStore, type TranscriptMessage, TranscriptStore } from "./sessions-store.js";

/**
 * What the stores keep of the rows they read and wrote, so hot paths skip the query: session rows
 * (current after every write through the store, dropped by an identity change) and each session's
 * last transcript messages (exactly what a read would return, only while this connection wrote
 * them all).
 */

let dir: string;
let db: Db;
const T = "2026-01-01T00:00:00.000Z";

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-kept-"));
  db = openDatabase(join(dir, "state.db"), { label: "test state.db", migrations: GATEWAY_MIGRATIONS });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

function session(profile: string, chat: string): SessionRow {
  return {
    session_id: `ses-${profile}-${chat}`,
    session_key: `agent:${profile}:api:dm:${chat}`,
    profile_name: profile,
    title: "t",
    kind: "api",
    origin: { profile, platform: "api", chat_type: "dm", chat_id: chat },
    model_override: null,
    provider_override: null,
    created_at: T,
    updated_at: T,
  };
}

/** Changes a stored row without the store knowing: what only another writer could do. */
const retitleBehindTheStore = (sessionId: string, title: string) =>
  db.prepare("UPDATE session_records SET title = ? WHERE session_id = ?").run(title, sessionId);

describe("SessionsStore: the rows it keeps", () => {
  it("answers a second lookup, by id or by key, from the row it read", () => {
    const store = new SessionsStore(db);
    store.insert(session("bob", "c1"));
    expect(store.byKey("agent:bob:api:dm:c1")?.title).toBe("t");
    retitleBehindTheStore("ses-bob-c1", "changed");
    // Another store on the same connection shares what it keeps.
    expect(new SessionsStore(db).byId("ses-bob-c1")?.title).toBe("t");
    expect(store.byKey("agent:bob:api:dm:c1")?.title).toBe("t");
    forgetSessionRows(db);
    expect(store.byKey("agent:bob:api:dm:c1")?.title).toBe("changed");
  });

  it("keeps its copy current through its own writes", () => {
    const store = new SessionsStore(db);
    store.insert(session("bob", "c1"));
    expect(store.byId("ses-bob-c1")?.updated_at).toBe(T);
    store.touch("ses-bob-c1", "2026-02-02T00:00:00.000Z");
    expect(store.byId("ses-bob-c1")?.updated_at).toBe("2026-02-02T00:00:00.000Z");
    store.setModelOverride("ses-bob-c1", "gpt-x", "openai");
    expect(store.byKey("agent:bob:api:dm:c1")).toMatchObject({ model_override: "gpt-x", provider_override: "openai" });
    const kept = store.byId("ses-bob-c1");
    forgetSessionRows(db);
    expect(store.byId("ses-bob-c1")).toEqual(kept);
  });

  it("a rename answers at the new key with the new name, and nothing at the old one", () => {
    const store = new SessionsStore(db);
    store.insert(session("bob", "c1"));
    expect(store.byKey("agent:bob:api:dm:c1")?.profile_name).toBe("bob");
    rekeyProfileState(db, "bob", "robert");
    expect(store.byKey("agent:bob:api:dm:c1")).toBeUndefined();
    expect(store.byId("ses-bob-c1")).toMatchObject({ profile_name: "robert", session_key: "agent:robert:api:dm:c1" });
    expect(store.byKey("agent:robert:api:dm:c1")?.session_id).toBe("ses-bob-c1");
  });

  it("a failed rename still drops what it kept (the rows are read again)", () => {
    const store = new SessionsStore(db);
    store.insert(session("bob", "c1"));
    store.insert(session("robert", "c1"));
    expect(store.byId("ses-bob-c1")?.title).toBe("t");
    retitleBehindTheStore("ses-bob-c1", "changed");
    expect(() => rekeyProfileState(db, "bob", "robert")).toThrow(/collision|already/i);
    expect(store.byId("ses-bob-c1")?.title).toBe("changed");
  });

  it("a deleted profile's sessions are gone at once", () => {
    const store = new SessionsStore(db);
    store.insert(session("bob", "c1"));
    expect(store.byId("ses-bob-c1")).toBeDefined();
    purgeProfileState(db, "bob");
    expect(store.byId("ses-bob-c1")).toBeUndefined();
    expect(store.byKey("agent:bob:api:dm:c1")).toBeUndefined();
  });

  it("keeps at most a bounded number of rows: the oldest are read again", () => {
    const store = new SessionsStore(db);
    db.transaction(() => {
      for (let i = 0; i < 5000; i++) store.insert(session("bob", `c${i}`));
    })();
    for (let i = 0; i < 5000; i++) store.byId(`ses-bob-c${i}`);
    retitleBehindTheStore("ses-bob-c0", "changed");
    retitleBehindTheStore("ses-bob-c4999", "changed");
    expect(store.byId("ses-bob-c0")?.title).toBe("changed");
    expect(store.byId("ses-bob-c4999")?.title).toBe("t");
  });
});

const said = (content: string, role: TranscriptMessage["role"] = "user") => ({ role, content, meta: { note: content }, created_at: T });

describe("TranscriptStore: the tails it keeps", () => {
  it("serves the messages from a seq to the end exactly as a read returns them", () => {
    const t = new TranscriptStore(db);
    t.append("s1", [said("one"), said("two", "assistant")]);
    t.append("s1", [said("three", "notification")]);
    t.append("s2", [said("elsewhere")]);
    for (const from of [1, 2, 3]) expect(t.keptFrom("s1", from)).toEqual(t.from("s1", from, 100));
    expect(t.keptFrom("s1", 4)).toBeUndefined();
    expect(t.keptFrom("s2", 1)).toEqual(t.from("s2", 1, 100));
  });

  it("keeps only the last messages of a session", () => {
    const t = new TranscriptStore(db);
    for (let i = 1; i <= 20; i++) t.append("s1", [said(`m${i}`)]);
    expect(t.keptFrom("s1", 12)).toBeUndefined();
    expect(t.keptFrom("s1", 13)?.map((m) => m.content)).toEqual(["m13", "m14", "m15", "m16", "m17", "m18", "m19", "m20"]);
  });

  it("knows nothing of a session written before this connection opened, until it writes", () => {
    new TranscriptStore(db).append("s1", [said("one")]);
    const other = openDatabase(join(dir, "state.db"), { label: "test state.db", migrations: GATEWAY_MIGRATIONS });
    try {
      const t = new TranscriptStore(other);
      expect(t.keptFrom("s1", 1)).toBeUndefined();
      t.append("s1", [said("two")]);
      expect(t.keptFrom("s1", 1)).toBeUndefined();
      expect(t.keptFrom("s1", 2)?.map((m) => [m.seq, m.content])).toEqual([[2, "two"]]);
      // The first connection's tail belongs to it: the other one wrote since.
      expect(new TranscriptStore(db).keptFrom("s1", 1)).toBeUndefined();
    } finally {
      other.close();
    }
  });

  it("drops a session's tail when its transcript is replaced", () => {
    const t = new TranscriptStore(db);
    t.append("s1", [said("one"), said("two"), said("three")]);
    t.replace("s1", [said("summary")]);
    expect(t.keptFrom("s1", 1)).toBeUndefined();
    t.append("s1", [said("four")]);
    expect(t.keptFrom("s1", 2)?.map((m) => [m.seq, m.content])).toEqual([[2, "four"]]);
    expect(t.keptFrom("s1", 1)).toBeUndefined();
  });

  it("keeps nothing of an append inside a transaction that is rolled back", () => {
    const t = new TranscriptStore(db);
    t.append("s1", [said("one")]);
    expect(() =>
      db.transaction(() => {
        t.append("s1", [said("two")]);
        throw new Error("rolled back");
      })(),
    ).toThrow("rolled back");
    expect(t.from("s1", 1, 100).map((m) => m.content)).toEqual(["one"]);
    expect(t.keptFrom("s1", 1)).toBeUndefined();
  });

  it("numbers appends after a kept tail densely, as a read of the last seq would", () => {
    const t = new TranscriptStore(db);
    t.append("s1", [said("one"), said("two")]);
    expect(t.append("s1", [said("three"), said("four")]).map((m) => m.seq)).toEqual([3, 4]);
    expect(t.append("s1", [said("five")]).map((m) => m.seq)).toEqual([5]);
    expect(t.from("s1", 1, 100).map((m) => [m.seq, m.content])).toEqual([
      [1, "one"],
      [2, "two"],
      [3, "three"],
      [4, "four"],
      [5, "five"],
    ]);
  });

  it("a failed append (the disk refused its second message) stores nothing and leaves the numbering dense", () => {
    const t = new TranscriptStore(db);
    t.append("s1", [said("one")]);
    // Stands in for SQLITE_FULL half-way through the transaction.
    db.exec(
      "CREATE TRIGGER refuse_full BEFORE INSERT ON messages WHEN NEW.content = 'full' BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    );
    expect(() => t.append("s1", [said("two"), said("full")])).toThrow(/disk is full/);
    expect(t.from("s1", 1, 100).map((m) => m.content)).toEqual(["one"]);
    expect(t.keptFrom("s1", 1)).toBeUndefined();
    db.exec("DROP TRIGGER refuse_full");
    expect(t.append("s1", [said("two"), said("three")]).map((m) => m.seq)).toEqual([2, 3]);
    expect(t.keptFrom("s1", 1)).toBeUndefined();
    expect(t.keptFrom("s1", 2)).toEqual(t.from("s1", 2, 100));
  });

  it("refuses an append whose kept tail is behind a write made around the store, overwriting nothing", () => {
    const t = new TranscriptStore(db);
    t.append("s1", [said("one")]);
    // Not through TranscriptStore (the gateway never does this): the kept tail still ends at seq 1.
    db.prepare(
      "INSERT INTO messages (session_id, seq, role, content, meta_json, created_at) VALUES ('s1', 2, 'user', 'around', '{}', ?)",
    ).run(T);
    expect(() => t.append("s1", [said("two")])).toThrow(/UNIQUE|PRIMARY KEY/);
    expect(t.from("s1", 1, 100).map((m) => m.content)).toEqual(["one", "around"]);
    // The refused append dropped the tail: the next one reads the last seq.
    expect(t.append("s1", [said("two")]).map((m) => m.seq)).toEqual([3]);
    expect(t.from("s1", 1, 100).map((m) => m.content)).toEqual(["one", "around", "two"]);
  });
});
