import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "@hermes/common";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeVersion8Room } from "../../../test/support/old-room-logs.js";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { idRunLevel } from "../core/index.js";
import { RoomsStore } from "./rooms-store.js";

/** Migration 011: the event id index of every log becomes one sorted run; a log whose index is off is refused. */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-id-runs-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A version-10 state.db with one room of `count` messages (random ids, as clients send them). */
function writeVersion10(count: number) {
  const path = join(dir, "state.db");
  const ids = Array.from({ length: count + 2 }, () => crypto.randomUUID());
  const events = writeVersion8Room(path, count, (seq) => ids[seq]!);
  openDatabase(path, { label: "v10", migrations: GATEWAY_MIGRATIONS.slice(0, 10) }).close();
  return { path, events };
}

describe("migration 011: the event id index as sorted runs", () => {
  it("upgrades a version-10 state.db in place: one run per log, every id found at its seq", () => {
    const { path, events } = writeVersion10(5000);
    const db = openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS });
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(GATEWAY_MIGRATIONS.length);
      expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'room_event_ids'").pluck().get()).toBe(0);
      expect(db.prepare("SELECT run_id, level, count, merging_into, merged_below FROM room_id_runs").all()).toEqual([
        { run_id: 1, level: idRunLevel(events.length), count: events.length, merging_into: null, merged_below: null },
      ]);
      expect(db.prepare("SELECT ids_through FROM room_logs").pluck().get()).toBe(events.length);
      const store = new RoomsStore(db, "gw-a", () => "2026-12-01T00:00:00.000Z");
      for (const e of events) expect(store.eventById("big", e.event_id)?.seq).toBe(e.seq);
      expect(store.eventById("big", crypto.randomUUID())).toBeNull();
    } finally {
      db.close();
    }
  });

  it("refuses a log whose id index misses an event, and leaves the database at version 10", () => {
    const { path } = writeVersion10(300);
    const raw = new Database(path);
    raw.prepare("DELETE FROM room_event_ids WHERE seq = 7").run();
    raw.close();
    expect(() => openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS })).toThrow(
      /room big: the event id index holds 300 ids for a log of 301 events; the database was not upgraded \(still version 10\)/,
    );
    const after = new Database(path);
    expect(after.pragma("user_version", { simple: true })).toBe(10);
    expect(after.prepare("SELECT count(*) FROM room_event_ids").pluck().get()).toBe(300);
    after.close();
  });
});
