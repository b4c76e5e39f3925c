import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "@hermes/common";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../src/home/store/migrations/index.js";
import { verifyChain } from "../../src/rooms/core/index.js";
import { RoomsStore } from "../../src/rooms/store/rooms-store.js";
import { killDuringMigration } from "../support/migration-crash.js";
import { VERSION8_NOW as NOW, VERSION8_POLICY as POLICY, writeVersion8Room } from "../support/old-room-logs.js";

/**
 * kill -9 in the middle of the storage migrations of the room log (version 8 → 9, the log into
 * segments; version 10 → 11, the event id index into sorted runs): a child process runs the BUILT
 * migration on an old state.db and is killed while the migration's transaction has written part
 * of the new tables (it stops itself at that point and says so). On reopening, the database is at
 * the old version with every row as it was; opening it normally then upgrades it with nothing lost.
 */

const EVENTS = 30_000;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Child code: stops (for the kill) after `arg` rows were inserted by a statement starting with `INSERT INTO <table>`. */
const STOP_AFTER_INSERTS = (table: string) => `
const prepare = db.prepare.bind(db);
let inserted = 0;
db.prepare = (sql) => {
  const statement = prepare(sql);
  if (!sql.startsWith("INSERT INTO ${table}")) return statement;
  const run = statement.run.bind(statement);
  statement.run = (...args) => {
    const result = run(...args);
    if (++inserted === Number(arg)) stop();
    return result;
  };
  return statement;
};
`;

/** Opens the database as the gateway does (every migration) and checks every event and id of "big" is there. */
function expectUpgraded(path: string, events: readonly { event_id: string; seq: number; hash: string }[]): void {
  const db = openDatabase(path, { label: "after the crash", migrations: GATEWAY_MIGRATIONS });
  try {
    expect(db.pragma("user_version", { simple: true })).toBe(GATEWAY_MIGRATIONS.length);
    const store = new RoomsStore(db, "gw-a", () => NOW);
    const stored = store.events("big", 0, 1e9);
    expect(stored.length).toBe(events.length);
    expect(stored).toEqual(events);
    expect(verifyChain(stored, 0, "").ok).toBe(true);
    expect(store.state("big")).toMatchObject({ last_seq: events.length, last_hash: events.at(-1)!.hash });
    for (const e of events) expect(store.eventById("big", e.event_id)?.seq).toBe(e.seq);
    expect(store.eventById("big", "never-used")).toBeNull();
    expect(store.room("big")!.replication).toEqual(POLICY);
  } finally {
    db.close();
  }
}

describe("kill -9 during the storage migrations of the room log", () => {
  it("8 → 9 leaves the database as it was (version 8, every row), and the next open upgrades it with nothing lost", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-migration-crash-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const events = writeVersion8Room(path, EVENTS);

    // About 12 MB of events in segments of ≤ 256 KiB: stop after 20 of them, well inside the transaction.
    const killed = await killDuringMigration(path, STOP_AFTER_INSERTS("room_log_segments"), "20");
    expect(killed.said).toBe("MIGRATING\n");
    expect(killed.signal).toBe("SIGKILL");
    expect(killed.walBytes).toBeGreaterThan(1024 * 1024); // the migration had written into the WAL

    const raw = new Database(path);
    expect(raw.pragma("user_version", { simple: true })).toBe(8);
    expect(raw.prepare("SELECT count(*) FROM sqlite_master WHERE name LIKE 'room_log%'").pluck().get()).toBe(0);
    expect(raw.prepare("SELECT count(*) FROM room_events").pluck().get()).toBe(events.length);
    expect(raw.prepare("SELECT hash FROM room_events WHERE seq = ?").pluck().get(events.length)).toBe(events.at(-1)!.hash);
    raw.close();

    expectUpgraded(path, events);
  }, 120_000);

  it("10 → 11 leaves the database as it was (version 10, the old id index whole), and the next open upgrades it with nothing lost", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-migration-crash-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    // Random ids, as clients send them; then the database as version 10 wrote it.
    const events = writeVersion8Room(path, EVENTS, () => crypto.randomUUID());
    openDatabase(path, { label: "v10", migrations: GATEWAY_MIGRATIONS.slice(0, 10) }).close();

    // 30,001 ids in 59 chunks of 512 keys (8 KiB each): stop after 55, when the pages have spilled into the WAL.
    const killed = await killDuringMigration(path, STOP_AFTER_INSERTS("room_id_chunks"), "55");
    expect(killed.said).toBe("MIGRATING\n");
    expect(killed.signal).toBe("SIGKILL");
    expect(killed.walBytes).toBeGreaterThan(0); // the migration had written into the WAL

    const raw = new Database(path);
    expect(raw.pragma("user_version", { simple: true })).toBe(10);
    expect(raw.prepare("SELECT count(*) FROM sqlite_master WHERE name LIKE 'room_id_%'").pluck().get()).toBe(0);
    expect(raw.prepare("SELECT count(*) FROM room_event_ids").pluck().get()).toBe(events.length);
    raw.close();

    expectUpgraded(path, events);
  }, 120_000);
});
