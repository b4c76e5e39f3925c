import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "@hermes/common";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openVersion9, V9_NOW, v9Sessions, writeV9Sessions } from "../../../test/support/version9-identity.js";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { rekeyProfileState } from "./identity-store.js";
import { loadRoutingEntries } from "./routing-store.js";
import { SessionsStore } from "./sessions-store.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-profile-ids-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("migration 010: profile ids", () => {
  it("upgrades a version-9 state.db in place: every session and routing entry reads back as it was, under its name", () => {
    const path = join(dir, "state.db");
    const sessions = [...v9Sessions("bob", 40, 2), ...v9Sessions("bobcat", 7), ...v9Sessions("default", 3)];
    const old = openVersion9(path);
    writeV9Sessions(old, sessions);
    const viewBefore = old.prepare("SELECT * FROM sessions ORDER BY session_id").all();
    const routingBefore = old.prepare("SELECT routing_key, entry_json, updated_at FROM gateway_routing ORDER BY routing_key").all();
    old.close();

    const db = openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS });
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(GATEWAY_MIGRATIONS.length);
      const profiles = () => db.prepare("SELECT name, session_rows, routing_rows FROM profiles ORDER BY name").all();
      expect(profiles()).toEqual([
        { name: "bob", session_rows: 40, routing_rows: 20 },
        { name: "bobcat", session_rows: 7, routing_rows: 7 },
        { name: "default", session_rows: 3, routing_rows: 3 },
      ]);
      const store = new SessionsStore(db);
      for (const s of sessions) {
        const row = { ...store.byKey(s.session_key) };
        expect(row).toEqual({
          session_id: s.session_id,
          session_key: s.session_key,
          profile_name: s.profile_name,
          title: `Chat ${s.session_id}`,
          kind: "chat",
          origin: s.origin,
          model_override: s.model_override ?? null,
          provider_override: null,
          created_at: V9_NOW,
          updated_at: V9_NOW,
        });
        expect(store.byId(s.session_id)).toEqual(row);
      }
      expect(
        store
          .listByProfile("bob")
          .map((s) => s.session_id)
          .sort(),
      ).toEqual(
        sessions
          .filter((s) => s.profile_name === "bob")
          .map((s) => s.session_id)
          .sort(),
      );
      // The entries load as the gateway persisted them.
      const entries = loadRoutingEntries(db).sort((a, b) => (a.routing_key < b.routing_key ? -1 : 1));
      expect(entries).toEqual(routingBefore.map((r) => JSON.parse((r as { entry_json: string }).entry_json)));
      // The views show the rows as version 9 stored them.
      const parsed = (rows: unknown[], column: string) =>
        (rows as Record<string, string>[]).map((r) => ({ ...r, [column]: JSON.parse(r[column] as string) }));
      const view = db.prepare("SELECT * FROM sessions ORDER BY session_id").all();
      expect(parsed(view, "origin_json")).toEqual(parsed(viewBefore, "origin_json"));
      const routingView = db.prepare("SELECT routing_key, entry_json, updated_at FROM gateway_routing ORDER BY routing_key").all();
      expect(parsed(routingView, "entry_json")).toEqual(parsed(routingBefore, "entry_json"));
      // A rename now changes one row; the sessions answer to the new name.
      expect(rekeyProfileState(db, "bob", "robert")).toEqual({ sessions: 40, gateway_routing: 20 });
      expect(store.byKey("agent:robert:telegram:group:-1002")).toMatchObject({ session_id: "ses_bob_2", origin: { profile: "robert" } });
      expect(store.byKey("agent:bob:telegram:group:-1002")).toBeUndefined();
      expect(profiles()[2]).toEqual({ name: "robert", session_rows: 40, routing_rows: 20 });
      expect(store.byKey("agent:bobcat:telegram:group:-1002")).toMatchObject({ session_id: "ses_bobcat_2" });
    } finally {
      db.close();
    }
  });

  it("refuses a session whose key names another profile, and leaves the database at version 9", () => {
    const path = join(dir, "state.db");
    const old = openVersion9(path);
    writeV9Sessions(old, v9Sessions("bob", 2));
    old
      .prepare(
        `INSERT INTO sessions (session_id, session_key, profile_name, title, kind, origin_json, created_at, updated_at)
         VALUES ('stray', 'agent:alice:api:dm:1', 'bob', 't', 'api', '{"profile":"bob"}', ?, ?)`,
      )
      .run(V9_NOW, V9_NOW);
    old.close();
    expect(() => openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS })).toThrow(
      /sessions: the key agent:alice:api:dm:1 does not belong to its row's profile; the database was not upgraded \(still version 9\)/,
    );
    const raw = new Database(path, { readonly: true });
    expect(raw.pragma("user_version", { simple: true })).toBe(9);
    expect(raw.prepare("SELECT count(*) FROM sessions").pluck().get()).toBe(3);
    raw.close();
  });
});
