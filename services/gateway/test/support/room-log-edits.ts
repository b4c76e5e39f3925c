import type { Db } from "@hermes/common";
import { decodeRun, encodeTuples, endsFromBytes, endsToBytes, type RoomEvent } from "../../src/rooms/core/index.js";

/**
 * Edits of a stored room log behind the store's back, for tests that damage or rewrite history
 * (a tampered hash, a log of an older gateway): the segment holding `seq` is decoded, the event
 * replaced by `edit(event)` and the segment written again (a changed id: the id index is rebuilt from the segments).
 * Call the store's `dropCache()` afterwards.
 */
export function rewriteStoredEvent(db: Db, roomId: string, seq: number, edit: (event: RoomEvent) => RoomEvent): void {
  const logId = db.prepare("SELECT log_id FROM room_logs WHERE room_id = ?").pluck().get(roomId) as number;
  const row = db
    .prepare("SELECT first_seq, ends, body FROM room_log_segments WHERE log_id = ? AND first_seq <= ? AND last_seq >= ?")
    .get(logId, seq, seq) as { first_seq: number; ends: Buffer; body: Buffer } | undefined;
  if (row === undefined) throw new Error(`no stored event at seq ${seq} of room ${roomId}`);
  const events = decodeRun(roomId, { first_seq: row.first_seq, body: row.body, ends: endsFromBytes(row.ends) });
  const before = events[seq - row.first_seq]!;
  const after = edit(before);
  events[seq - row.first_seq] = after;
  const run = encodeTuples(events);
  db.transaction(() => {
    db.prepare("UPDATE room_log_segments SET ends = ?, body = ?, last_epoch = ? WHERE log_id = ? AND first_seq = ?").run(
      endsToBytes(run.ends),
      Buffer.from(run.body),
      events.at(-1)!.epoch,
      logId,
      row.first_seq,
    );
    if (after.event_id !== before.event_id) {
      // The id index is rebuilt from the segments: every id goes back to the recent ids in memory.
      db.prepare("DELETE FROM room_id_chunks WHERE log_id = ?").run(logId);
      db.prepare("DELETE FROM room_id_runs WHERE log_id = ?").run(logId);
      db.prepare("UPDATE room_logs SET ids_through = 0 WHERE log_id = ?").run(logId);
    }
  })();
}

/** Removes a room's log entirely (as a restored backup without the room would have it). */
export function deleteStoredLog(db: Db, roomId: string): void {
  const logId = db.prepare("SELECT log_id FROM room_logs WHERE room_id = ?").pluck().get(roomId) as number | undefined;
  if (logId === undefined) return;
  db.transaction(() => {
    for (const table of ["room_log_segments", "room_id_chunks", "room_id_runs", "room_meta_events", "room_logs"]) {
      db.prepare(`DELETE FROM ${table} WHERE log_id = ?`).run(logId);
    }
  })();
}
