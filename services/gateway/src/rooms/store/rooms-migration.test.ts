import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "@hermes/common";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import {
  buildPackedLogPage,
  planAppendBatch,
  planLogRead,
  type RoomEvent,
  roomInvariantViolations,
  tupleStart,
  verifyChain,
} from "../core/index.js";
import { RoomsStore } from "./rooms-store.js";

/**
 * Migration 009 (the log in segments) on a database written by the previous schema: testdata/state-v8.sql
 * is a state.db of the version-8 schema (rooms led here, a disbanded room, a replica with a preserved
 * branch and a demotion, texts JSON escapes, a quorum room led here and one followed here with their
 * replication policies), dumped as SQL. After the upgrade every event reads back as it was, by seq
 * and by id, every room keeps its policy, and the rooms go on working.
 * (test/rooms-migration-crash.test.ts kills the migration part way.)
 */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-rooms-migration-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const FIXTURE = readFileSync(new URL("./testdata/state-v8.sql", import.meta.url), "utf8");

describe("migration 009: room logs in segments", () => {
  it("upgrades a version-8 state.db in place: every event, id, branch, state and policy as it was", () => {
    const path = join(dir, "state.db");
    const old = new Database(path);
    old.pragma("journal_mode = WAL");
    old.exec(FIXTURE);
    expect(old.pragma("user_version", { simple: true })).toBe(8);
    const before = old.prepare("SELECT * FROM room_events ORDER BY room_id, seq").all() as RoomEvent[];
    const divergentBefore = old.prepare("SELECT * FROM room_divergent_events ORDER BY divergence_id, seq").all();
    old.close();
    expect(before.length).toBe(71);

    // Up to the current schema: the store reads the latest one (the later steps keep every row).
    const db = openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS });
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(GATEWAY_MIGRATIONS.length);
      expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'room_events'").pluck().get()).toBe(0);
      const store = new RoomsStore(db, "gw-a", () => "2026-12-01T00:00:00.000Z");
      for (const roomId of ["copy", "gone", "led", "quorum-copy", "quorum-led"]) {
        const events = store.events(roomId, 0, 1e9);
        expect(events).toEqual(before.filter((e) => e.room_id === roomId));
        expect(verifyChain(events, 0, "").ok).toBe(true);
        const room = store.room(roomId)!;
        expect(roomInvariantViolations(room.state, events)).toEqual([]);
        for (const e of events) expect(store.eventById(roomId, e.event_id)).toEqual(e);
        // The stored tuples are what JSON.stringify writes (SQLite's json_array wrote them).
        const state = room.state;
        const read = planLogRead(state, { since_seq: 0, limit: 5000 }, { maxLimit: 5000 });
        if (!read.ok) throw new Error(read.refusal.message);
        const page = buildPackedLogPage(state, read.value, null, store.packedEvents(roomId, 0, 5000));
        const texts = page.packed.flatMap((run) =>
          Array.from(run.ends, (_, i) => Buffer.from(run.body).toString("utf8", tupleStart(run, i), run.ends[i])),
        );
        expect(texts).toEqual(
          events.map((e) => JSON.stringify([e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash])),
        );
      }
      expect(store.room("led")!.meta).toMatchObject({ name: "Led, renamed", revision: 2 });
      expect(store.isRetired("gone")).toBe(true);
      expect(store.room("gone")!.state.disbanded).toBe(true);
      const copy = store.room("copy")!;
      expect(copy.state).toMatchObject({ role: "replica", safety_status: "diverged", last_seq: 15 });
      expect(copy.follow).toEqual({ peer: "yhost" });
      expect(store.lastDemotion("copy")).toMatchObject({ previous_gateway_id: "gw-a", authority_gateway_id: "gw-y", authority_epoch: 3 });
      const [branch] = store.divergences("copy", true);
      expect(branch!.record).toMatchObject({ from_seq: 12, count: 3, branch_gateway_id: "gw-a" });
      expect(db.prepare("SELECT * FROM room_divergent_events ORDER BY divergence_id, seq").all()).toEqual(divergentBefore);
      expect(store.maxDurableEpoch()).toBe(3);
      // The quorum rooms keep their replication policies (rooms.replication_json) and the replica its source.
      expect(store.quorumRoomIds()).toEqual(["quorum-copy", "quorum-led"]);
      expect(store.room("quorum-led")!.replication).toEqual({ mode: "quorum", replicas: ["gw-a", "gw-b", "gw-c"], min_insync: 2 });
      const quorumCopy = store.room("quorum-copy")!;
      expect(quorumCopy.replication).toEqual({ mode: "quorum", replicas: ["gw-q", "gw-a", "gw-b"], min_insync: 1 });
      expect(quorumCopy.follow).toEqual({ peer: "qhost" });
      expect(quorumCopy.state).toMatchObject({ role: "replica", last_seq: 3, authority: { gateway_id: "gw-q", epoch: 1 } });
      expect(store.room("led")!.replication).toBeNull();

      // The led room goes on: a retry of an old send is idempotent, a new one continues the chain.
      const state = store.state("led")!;
      const user = { kind: "user" as const, id: "user" };
      const old3 = before.find((e) => e.room_id === "led" && e.event_id === "m-3")!;
      const plan = planAppendBatch(
        state,
        [
          {
            request: { origin: "client", event_id: "m-3", kind: "message.user", actor: user, payload: JSON.parse(old3.payload_json) },
            stored: store.eventById("led", "m-3"),
          },
          { request: { origin: "client", event_id: "new-1", kind: "message.user", actor: user, payload: { text: "new" } }, stored: null },
        ],
        "2026-12-01T00:00:00.000Z",
      );
      expect(plan.outcomes.map((o) => o.kind)).toEqual(["idempotent", "appended"]);
      store.commitAppends([{ roomId: "led", plan }]);
      store.dropCache();
      const led = store.events("led", 0, 1e9);
      expect(led.at(-1)).toMatchObject({ seq: 45, event_id: "new-1" });
      expect(verifyChain(led, 0, "").ok).toBe(true);
    } finally {
      db.close();
    }
  });

  it("refuses a log with a gap and leaves the database at version 8", () => {
    const path = join(dir, "state.db");
    const old = new Database(path);
    old.pragma("journal_mode = WAL");
    old.exec(FIXTURE);
    old.prepare("DELETE FROM room_events WHERE room_id = 'led' AND seq = 7").run();
    old.close();
    expect(() => openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS.slice(0, 9) })).toThrow(/jumps from seq 6 to 8/);
    const after = new Database(path, { readonly: true });
    expect(after.pragma("user_version", { simple: true })).toBe(8);
    expect(after.prepare("SELECT count(*) FROM room_events").pluck().get()).toBe(70);
    after.close();
  });
});
