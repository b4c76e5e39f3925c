import type { Migration } from "@hermes/common";

/**
 * Replicated rooms. One `rooms` row per room this gateway leads or replicates (a replica is a
 * row whose authority_gateway_id is another gateway), its log in `room_events` (hash-chained, dense
 * seqs from 1), the epoch lineage, retired ids, and preserved divergent branches.
 *
 * Columns the pure core needs beyond the room's own data (core/rooms/README.md): fenced_by_gateway_id,
 * max_epoch_seen, last_hash, safety_status, safety_reason. `next_seq` is last_seq + 1 on every row;
 * replica_last_seq / replica_latest_seq are set on replicas only. `replica_source_json` remembers
 * a followed peer (never a key) so following resumes after a restart.
 *
 * Identity (identity/core/registry.ts): room_members.profile names a profile of THIS gateway that
 * sits in a room. The log itself (room.created payloads) is hash-chained and never rewritten.
 */
export const roomsMigration: Migration = {
  version: 2,
  name: "rooms",
  up(db) {
    db.exec(`
      CREATE TABLE rooms (
        room_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        members_json TEXT NOT NULL,
        authority_gateway_id TEXT NOT NULL,
        authority_epoch INTEGER NOT NULL CHECK (authority_epoch >= 0),
        next_seq INTEGER NOT NULL CHECK (next_seq >= 1),
        revision INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        disbanded_at TEXT,
        fenced_by_epoch INTEGER,
        fenced_by_gateway_id TEXT,
        max_epoch_seen INTEGER NOT NULL,
        last_hash TEXT NOT NULL,
        replica_last_seq INTEGER,
        replica_latest_seq INTEGER,
        safety_status TEXT NOT NULL CHECK (safety_status IN ('passive', 'fenced', 'diverged', 'quarantined')),
        safety_reason TEXT,
        replica_source_json TEXT
      );
      CREATE INDEX rooms_by_updated ON rooms(updated_at);

      CREATE TABLE room_events (
        room_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        actor_json TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (room_id, seq),
        UNIQUE (room_id, event_id)
      );

      CREATE TABLE room_lineage (
        room_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        gateway_id TEXT NOT NULL,
        start_seq INTEGER NOT NULL,
        PRIMARY KEY (room_id, epoch)
      );

      CREATE TABLE room_members (
        room_id TEXT NOT NULL,
        member_id TEXT NOT NULL,
        profile TEXT NOT NULL,
        PRIMARY KEY (room_id, member_id)
      );
      CREATE INDEX room_members_by_profile ON room_members(profile);

      CREATE TABLE room_retired_ids (
        room_id TEXT PRIMARY KEY,
        retired_at TEXT NOT NULL
      );

      CREATE TABLE room_divergences (
        divergence_id INTEGER PRIMARY KEY AUTOINCREMENT,
        room_id TEXT NOT NULL,
        detected_at TEXT NOT NULL,
        from_seq INTEGER NOT NULL,
        branch_epoch INTEGER NOT NULL,
        branch_gateway_id TEXT NOT NULL,
        winning_epoch INTEGER NOT NULL,
        winning_gateway_id TEXT NOT NULL,
        count INTEGER NOT NULL,
        markers_only INTEGER NOT NULL
      );
      CREATE INDEX room_divergences_by_room ON room_divergences(room_id);

      CREATE TABLE room_divergent_events (
        divergence_id INTEGER NOT NULL REFERENCES room_divergences(divergence_id),
        room_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        actor_json TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (divergence_id, seq)
      );
    `);
  },
};
