import { openDatabase } from "@hermes/common";
import { GATEWAY_MIGRATIONS } from "../../src/home/store/migrations/index.js";
import { canonicalJson, planCreateRoom, type RoomEvent, sealEvent } from "../../src/rooms/core/index.js";
import { MEMBERS } from "./rooms-fixtures.js";

/** Old databases for the storage migrations' tests: written as the earlier schema laid them out. */

export const VERSION8_NOW = "2026-11-30T00:00:00.000Z";
export const VERSION8_POLICY = { mode: "quorum", replicas: ["gw-a", "gw-b", "gw-c"], min_insync: 2 };
const NOW = VERSION8_NOW;
const POLICY = VERSION8_POLICY;

/**
 * A version-8 state.db holding one quorum room ("big", led by gw-a) with `count` chained messages,
 * as that version stored them (one row per event); message i (seq i + 1) has the id `eventId(i)`.
 */
export function writeVersion8Room(path: string, count: number, eventId: (seq: number) => string = (seq) => `m-${seq}`): RoomEvent[] {
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
          event_id: eventId(seq),
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
