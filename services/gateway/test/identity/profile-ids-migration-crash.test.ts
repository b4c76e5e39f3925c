import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "@hermes/common";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../src/home/store/migrations/index.js";
import { loadRoutingEntries } from "../../src/identity/store/routing-store.js";
import { SessionsStore } from "../../src/identity/store/sessions-store.js";
import { killDuringMigration } from "../support/migration-crash.js";
import { openVersion9, v9Sessions, writeV9Sessions } from "../support/version9-identity.js";

/**
 * kill -9 in the middle of the profile-ids migration (version 9 → 10): a child process runs the
 * BUILT migration on a version-9 state.db and is killed inside the migration's transaction, after
 * the sessions were copied into session_records and the old `sessions` table was dropped (it stops
 * itself at that point and says so). On reopening, the database is at version 9 with every row as
 * it was; opening it normally then upgrades it with nothing lost.
 */

const SESSIONS = 60_000;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Child code: stops (for the kill) when the SQL step starting with `arg` is about to run. */
const STOP_AT_STEP = `
const exec = db.exec.bind(db);
db.exec = (sql) => {
  if (sql.startsWith(arg)) stop();
  return exec(sql);
};
`;

describe("kill -9 during the profile-ids migration", () => {
  it("leaves the database as it was (version 9, every row), and the next open upgrades it with nothing lost", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-profile-ids-crash-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const sessions = [...v9Sessions("mybot", SESSIONS, 10), ...v9Sessions("mybot2", 500, 10)];
    const old = openVersion9(path);
    writeV9Sessions(old, sessions);
    old.pragma("wal_checkpoint(TRUNCATE)");
    const sessionsBefore = old.prepare("SELECT * FROM sessions ORDER BY session_id").all();
    const routingBefore = old.prepare("SELECT * FROM gateway_routing ORDER BY routing_key").all();
    old.close();

    // Stop after `DROP TABLE sessions`: the copy is written, the old table is gone, nothing is committed.
    const killed = await killDuringMigration(path, STOP_AT_STEP, "CREATE UNIQUE INDEX session_records_by_key");
    expect(killed.said).toBe("MIGRATING\n");
    expect(killed.signal).toBe("SIGKILL");
    expect(killed.walBytes).toBeGreaterThan(1024 * 1024); // the migration had written into the WAL

    const raw = new Database(path);
    expect(raw.pragma("user_version", { simple: true })).toBe(9);
    expect(raw.prepare("SELECT type FROM sqlite_master WHERE name = 'sessions'").pluck().get()).toBe("table");
    expect(
      raw.prepare("SELECT count(*) FROM sqlite_master WHERE name IN ('profiles', 'session_records', 'routing_records')").pluck().get(),
    ).toBe(0);
    expect(raw.prepare("SELECT * FROM sessions ORDER BY session_id").all()).toEqual(sessionsBefore);
    expect(raw.prepare("SELECT * FROM gateway_routing ORDER BY routing_key").all()).toEqual(routingBefore);
    raw.close();

    const db = openDatabase(path, { label: "after the crash", migrations: GATEWAY_MIGRATIONS });
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(GATEWAY_MIGRATIONS.length);
      const store = new SessionsStore(db);
      expect(db.prepare("SELECT count(*) FROM session_records").pluck().get()).toBe(sessions.length);
      for (const s of sessions.filter((_, i) => i % 997 === 0)) {
        expect(store.byKey(s.session_key)).toMatchObject({ session_id: s.session_id, profile_name: s.profile_name, origin: s.origin });
      }
      const entries = loadRoutingEntries(db).sort((a, b) => (a.routing_key < b.routing_key ? -1 : 1));
      expect(entries).toEqual(routingBefore.map((r) => JSON.parse((r as { entry_json: string }).entry_json)));
    } finally {
      db.close();
    }
  }, 120_000);
});
