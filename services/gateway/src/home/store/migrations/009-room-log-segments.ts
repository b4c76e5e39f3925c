import { HermesError, type Migration } from "@hermes/common";
import { cutSegments, endsToBytes, SEGMENT_MAX_EVENTS, type TupleRun } from "../../../rooms/core/index.js";

/**
 * Rooms, fourth step: the log in segments. `room_events` held one row per event in three b-trees
 * (the rowid table, the (room_id, seq) key, the (room_id, event_id) key); now:
 *
 * - `room_logs`: a small integer per room log (`log_id`), so the other tables key by it;
 * - `room_log_segments`: contiguous events as one row: `body` is their PackedEvent tuples as JSON
 *   text joined by commas (rooms/core/log-segment.ts), `ends` where each tuple ends (32-bit
 *   little-endian), `last_epoch` the epoch of the last one;
 * - `room_event_ids`: the idempotency index, event_id → seq, one WITHOUT ROWID b-tree;
 * - `room_meta_events`: the seqs of the room.* events, so name and members can be recomputed after
 *   a branch moves away without reading the whole log.
 *
 * The existing events move into segments in this migration's one transaction (a kill -9 part way
 * leaves the database at version 8, as it was) and `room_events` is dropped. Tuples are written by
 * SQLite's json_array, byte-identical to JSON.stringify. A log that is not dense is refused: that
 * database needs a look before anything rewrites it.
 */
export const roomLogSegmentsMigration: Migration = {
  version: 9,
  name: "room-log-segments",
  up(db) {
    db.exec(`
      CREATE TABLE room_logs (
        log_id INTEGER PRIMARY KEY,
        room_id TEXT NOT NULL UNIQUE
      );
      CREATE TABLE room_log_segments (
        log_id INTEGER NOT NULL,
        first_seq INTEGER NOT NULL CHECK (first_seq >= 1),
        last_seq INTEGER NOT NULL CHECK (last_seq >= first_seq),
        last_epoch INTEGER NOT NULL,
        ends BLOB NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (log_id, first_seq)
      );
      CREATE TABLE room_event_ids (
        log_id INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (log_id, event_id)
      ) WITHOUT ROWID;
      CREATE TABLE room_meta_events (
        log_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (log_id, seq)
      ) WITHOUT ROWID;
    `);
    const rooms = db.prepare("SELECT DISTINCT room_id FROM room_events ORDER BY room_id").pluck().all() as string[];
    const addLog = db.prepare("INSERT INTO room_logs (room_id) VALUES (?)");
    const read = db
      .prepare(
        `SELECT seq, epoch, json_array(seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash)
         FROM room_events WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
      )
      .raw(true);
    const addSegment = db.prepare(
      "INSERT INTO room_log_segments (log_id, first_seq, last_seq, last_epoch, ends, body) VALUES (?, ?, ?, ?, ?, ?)",
    );
    const addIds = db.prepare(
      "INSERT INTO room_event_ids (log_id, event_id, seq) SELECT ?, event_id, seq FROM room_events WHERE room_id = ?",
    );
    const addMeta = db.prepare(
      "INSERT INTO room_meta_events (log_id, seq) SELECT ?, seq FROM room_events WHERE room_id = ? AND kind LIKE 'room.%'",
    );
    for (const roomId of rooms) {
      const logId = Number(addLog.run(roomId).lastInsertRowid);
      let last = 0;
      for (;;) {
        const rows = read.all(roomId, last, SEGMENT_MAX_EVENTS) as [number, number, string][];
        if (rows.length === 0) break;
        const texts: string[] = [];
        const epochs: number[] = [];
        for (const [seq, epoch, text] of rows) {
          if (seq !== last + 1) {
            throw new HermesError(
              "database_corrupt",
              `room ${roomId}: the log jumps from seq ${last} to ${seq}; the database was not upgraded (still version 8): restore it from a backup or move it aside`,
            );
          }
          texts.push(text);
          epochs.push(epoch);
          last = seq;
        }
        const firstSeq = rows[0]![0];
        for (const segment of cutSegments(runOfTexts(firstSeq, texts))) {
          const lastSeq = segment.first_seq + segment.ends.length - 1;
          addSegment.run(logId, segment.first_seq, lastSeq, epochs[lastSeq - firstSeq], endsToBytes(segment.ends), segment.body);
        }
      }
      addIds.run(logId, roomId);
      addMeta.run(logId, roomId);
    }
    db.exec("DROP TABLE room_events");
  },
};

function runOfTexts(firstSeq: number, texts: readonly string[]): TupleRun {
  const body = Buffer.from(texts.join(","), "utf8");
  const ends = new Uint32Array(texts.length);
  let at = 0;
  for (let i = 0; i < texts.length; i++) {
    at += Buffer.byteLength(texts[i]!, "utf8");
    ends[i] = at;
    at += 1;
  }
  return { first_seq: firstSeq, body, ends };
}
