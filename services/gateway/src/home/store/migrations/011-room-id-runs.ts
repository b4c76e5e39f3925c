import { HermesError, type Migration } from "@hermes/common";
import { cutIdChunks, encodeIdChunk, eventIdHash, IdFilter, idRunLevel, RecentIds } from "../../../rooms/core/index.js";

/**
 * Rooms, fifth step: the event id index as sorted runs (rooms/core/id-index.ts). `room_event_ids`
 * was one b-tree keyed by the id: fine for ids that count up, but a page of random ids (UUIDv4)
 * touched most of its leaves. Now:
 *
 * - `room_id_chunks`: each run's (53-bit hash of the id, seq) keys in key order, cut into chunks of
 *   about 512 keys, one row each (16 bytes per key), found by their first hash;
 * - `room_id_runs`: a log's runs, their level and key count, the Bloom filter of each, and the
 *   bookkeeping of a merge in progress (`merging_into` on its sources, `merged_below` on its target);
 * - `room_logs.ids_through`: the last seq whose id is in a run; the ids after it are held in memory
 *   and read back from the segments on start.
 *
 * Each log's ids become one run, in this migration's one transaction (a kill -9 part way leaves the
 * database at version 10, as it was), and `room_event_ids` is dropped. A log whose ids do not cover
 * every seq once is refused: that database needs a look before anything rewrites it.
 */
export const roomIdRunsMigration: Migration = {
  version: 11,
  name: "room-id-runs",
  up(db) {
    db.exec(`
      ALTER TABLE room_logs ADD COLUMN ids_through INTEGER NOT NULL DEFAULT 0;
      CREATE TABLE room_id_runs (
        log_id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        level INTEGER NOT NULL,
        count INTEGER NOT NULL,
        merging_into INTEGER,
        merged_below INTEGER,
        filter BLOB,
        PRIMARY KEY (log_id, run_id)
      );
      CREATE TABLE room_id_chunks (
        log_id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        first_hash INTEGER NOT NULL,
        keys BLOB NOT NULL,
        PRIMARY KEY (log_id, run_id, first_hash)
      );
    `);
    const logs = db
      .prepare(
        `SELECT l.log_id, l.room_id, COALESCE((SELECT MAX(last_seq) FROM room_log_segments s WHERE s.log_id = l.log_id), 0)
         FROM room_logs l ORDER BY l.log_id`,
      )
      .raw(true)
      .all() as [number, string, number][];
    const oldIds = db.prepare("SELECT event_id, seq FROM room_event_ids WHERE log_id = ?").raw(true);
    const addChunk = db.prepare("INSERT INTO room_id_chunks (log_id, run_id, first_hash, keys) VALUES (?, 1, ?, ?)");
    const addRun = db.prepare(
      "INSERT INTO room_id_runs (log_id, run_id, level, count, merging_into, merged_below, filter) VALUES (?, 1, ?, ?, NULL, NULL, ?)",
    );
    const setThrough = db.prepare("UPDATE room_logs SET ids_through = ? WHERE log_id = ?");
    for (const [logId, roomId, lastSeq] of logs) {
      const ids = new RecentIds();
      const seen = new Uint8Array(lastSeq + 1);
      for (const [eventId, seq] of oldIds.iterate(logId) as Iterable<[string, number]>) {
        if (seq < 1 || seq > lastSeq || seen[seq] === 1) {
          throw new HermesError(
            "database_corrupt",
            `room ${roomId}: the event id index lists seq ${seq} twice or outside the log (1..${lastSeq}); the database was not upgraded (still version 10): restore it from a backup or move it aside`,
          );
        }
        seen[seq] = 1;
        ids.add(eventIdHash(eventId), seq);
      }
      if (ids.size !== lastSeq) {
        throw new HermesError(
          "database_corrupt",
          `room ${roomId}: the event id index holds ${ids.size} ids for a log of ${lastSeq} events; the database was not upgraded (still version 10): restore it from a backup or move it aside`,
        );
      }
      if (lastSeq === 0) continue;
      const sorted = ids.sortedKeys();
      const filter = IdFilter.forKeys(lastSeq);
      for (let i = 0; i < sorted.length; i += 2) filter.add(sorted[i]!);
      for (const [from, to] of cutIdChunks(sorted)) addChunk.run(logId, sorted[2 * from]!, Buffer.from(encodeIdChunk(sorted, from, to)));
      addRun.run(logId, idRunLevel(lastSeq), lastSeq, Buffer.from(filter.bytes()));
      setThrough.run(lastSeq, logId);
    }
    db.exec("DROP TABLE room_event_ids");
  },
};
