import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "@hermes/common";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { canonicalJson, planCreateRoom, type RoomEvent, sealEvent, verifyChain } from "../src/core/rooms/index.js";
import { GATEWAY_MIGRATIONS } from "../src/store/migrations/index.js";
import { RoomsStore } from "../src/store/rooms-store.js";
import { killDuringMigration } from "./support/migration-crash.js";
import { MEMBERS } from "./support/rooms-fixtures.js";

/**
 * kill -9 in the middle of the storage migration (version 8 → 9, the log into segments): a child
 * process runs the BUILT migration on a version-8 state.db and is killed while the migration's
 * transaction has written part of the new tables (it stops itself at that point and says so). On
 * reopening, the database is at version 8 with every row as it was; opening it normally then
 * upgrades it with nothing lost.
 */

const NOW = "2026-11-30T00:00:00.000Z";
const EVENTS = 30_000;
const POLICY = { mode: "quorum", replicas: ["gw-a", "gw-b", "gw-c"], min_insync: 2 };
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A version-8 state.db holding one quorum room led by gw-a with `count` chained messages (as that version stored them). */
function writeVersion8(path: string, count: number): RoomEvent[] {
  const db = openDatabase(path, { label: "v8", migrations: GATEWAY_MIGRATIONS.slice(0, 8) });
  const plan = planCreateRoom({
    room_id: "big",
    name: "Big",
    members: MEMBERS,
    self_gateway_id: "gw-a",
    now: NOW,
    retired: false,
    exists: false,
  });
  if (!plan.ok) throw new Error(plan.refusal.message);
  const events: RoomEvent[] = [plan.event];
  const actor = canonicalJson({ id: "user", kind: "user" });
  for (let seq = 2; seq <= count + 1; seq++) {
    const payload = canonicalJson({ text: `message ${seq} ${"x".repeat(180)}` });
    events.push(
      sealEvent(
        {
          room_id: "big",
          seq,
          event_id: `m-${seq}`,
          kind: "message.user",
          actor_json: actor,
          epoch: 1,
          payload_json: payload,
          created_at: NOW,
        },
        events.at(-1)!.hash,
      ),
    );
  }
  db.transaction(() => {
    db.prepare(
      `INSERT INTO rooms (room_id, name, members_json, authority_gateway_id, authority_epoch, next_seq, revision, created_at,
         updated_at, max_epoch_seen, last_hash, safety_status, replication_json)
       VALUES ('big', 'Big', ?, 'gw-a', 1, ?, 1, ?, ?, 1, ?, 'passive', ?)`,
    ).run(JSON.stringify(plan.members), count + 2, NOW, NOW, events.at(-1)!.hash, JSON.stringify(POLICY));
    db.prepare("INSERT INTO room_lineage (room_id, epoch, gateway_id, start_seq) VALUES ('big', 1, 'gw-a', 1)").run();
    const insert = db.prepare(
      `INSERT INTO room_events (room_id, seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash)
       VALUES (@room_id, @seq, @event_id, @kind, @actor_json, @epoch, @payload_json, @created_at, @hash)`,
    );
    for (const e of events) insert.run(e);
  })();
  db.close();
  return events;
}

/** Child code: stops (for the kill) after `arg` segment rows were inserted. */
const STOP_AFTER_SEGMENTS = `
const prepare = db.prepare.bind(db);
let segments = 0;
db.prepare = (sql) => {
  const statement = prepare(sql);
  if (!sql.startsWith("INSERT INTO room_log_segments")) return statement;
  const run = statement.run.bind(statement);
  statement.run = (...args) => {
    const result = run(...args);
    if (++segments === Number(arg)) stop();
    return result;
  };
  return statement;
};
`;

describe("kill -9 during the storage migration", () => {
  it("leaves the database as it was (version 8, every row), and the next open upgrades it with nothing lost", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-migration-crash-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const events = writeVersion8(path, EVENTS);

    // About 12 MB of events in segments of ≤ 256 KiB: stop after 20 of them, well inside the transaction.
    const killed = await killDuringMigration(path, STOP_AFTER_SEGMENTS, "20");
    expect(killed.said).toBe("MIGRATING\n");
    expect(killed.signal).toBe("SIGKILL");
    expect(killed.walBytes).toBeGreaterThan(1024 * 1024); // the migration had written into the WAL

    const raw = new Database(path);
    expect(raw.pragma("user_version", { simple: true })).toBe(8);
    expect(raw.prepare("SELECT count(*) FROM sqlite_master WHERE name LIKE 'room_log%'").pluck().get()).toBe(0);
    expect(raw.prepare("SELECT count(*) FROM room_events").pluck().get()).toBe(events.length);
    expect(raw.prepare("SELECT hash FROM room_events WHERE seq = ?").pluck().get(events.length)).toBe(events.at(-1)!.hash);
    raw.close();

    const db = openDatabase(path, { label: "after the crash", migrations: GATEWAY_MIGRATIONS.slice(0, 9) });
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(9);
      const store = new RoomsStore(db, "gw-a", () => NOW);
      const stored = store.events("big", 0, 1e9);
      expect(stored.length).toBe(events.length);
      expect(stored).toEqual(events);
      expect(verifyChain(stored, 0, "").ok).toBe(true);
      expect(store.state("big")).toMatchObject({ last_seq: events.length, last_hash: events.at(-1)!.hash });
      expect(store.eventById("big", `m-${EVENTS}`)?.seq).toBe(EVENTS);
      expect(store.room("big")!.replication).toEqual(POLICY);
    } finally {
      db.close();
    }
  }, 120_000);
});
