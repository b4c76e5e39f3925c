import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openDatabase } from "@hermes/common";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../src/store/migrations/index.js";
import { loadRoutingEntries } from "../src/store/routing-store.js";
import { SessionsStore } from "../src/store/sessions-store.js";
import { openVersion9, v9Sessions, writeV9Sessions } from "./support/version9-identity.js";

/**
 * kill -9 in the middle of the profile-ids migration (version 9 → 10): a child process runs the
 * BUILT migration on a version-9 state.db and is killed inside the migration's transaction, after
 * the sessions were copied into session_records and the old `sessions` table was dropped (it stops
 * itself at that point and says so). On reopening, the database is at version 9 with every row as
 * it was; opening it normally then upgrades it with nothing lost.
 */

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const SESSIONS = 60_000;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The child: the built migrations on `path`, stopping (for the kill) when the step `stopAt` is about to run. */
const CHILD = `
import Database from "better-sqlite3";
const [path, stopAt] = process.argv.slice(1);
const { migrate } = await import(${JSON.stringify(`${ROOT}services/common/dist/index.js`)});
const { GATEWAY_MIGRATIONS } = await import(${JSON.stringify(`${ROOT}services/gateway/dist/store/migrations/index.js`)});
const db = new Database(path);
db.pragma("journal_mode = WAL");
db.pragma("synchronous = FULL");
db.pragma("foreign_keys = ON");
db.pragma("cache_size = -256"); // a small cache spills the migration's pages into the WAL early
const exec = db.exec.bind(db);
db.exec = (sql) => {
  if (sql.startsWith(stopAt)) {
    process.stdout.write("MIGRATING\\n");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 120_000);
  }
  return exec(sql);
};
migrate(db, GATEWAY_MIGRATIONS, "state.db", path);
process.stdout.write("DONE\\n");
`;

function killDuringMigration(path: string, stopAt: string): Promise<{ said: string; signal: NodeJS.Signals | null; walBytes: number }> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD, path, stopAt], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let said = "";
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  return new Promise((resolve, reject) => {
    let walBytes = 0;
    child.stdout.on("data", (d) => {
      said += d;
      if (said.includes("MIGRATING")) {
        walBytes = statSync(`${path}-wal`).size;
        child.kill("SIGKILL");
      }
    });
    child.once("exit", (_code, signal) =>
      said === "" ? reject(new Error(`the child said nothing: ${stderr}`)) : resolve({ said, signal, walBytes }),
    );
  });
}

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
    const killed = await killDuringMigration(path, "CREATE UNIQUE INDEX session_records_by_key");
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
      expect(db.pragma("user_version", { simple: true })).toBe(10);
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
