import type { Migration } from "@hermes/common";

/**
 * The relay's DATA/relay.db schema, applied in order at start (PRAGMA user_version). Append new
 * migrations; never edit one that has shipped.
 */
export const RELAY_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "relay: keys, roster, deliveries",
    up(db) {
      db.exec(`
        CREATE TABLE relay_meta (
          key TEXT PRIMARY KEY,
          value TEXT NOT NULL
        ) WITHOUT ROWID;

        -- One key per connection, stored as its SHA-256 (the key itself is shown once).
        CREATE TABLE connection_keys (
          connection TEXT PRIMARY KEY,
          key_hash TEXT NOT NULL UNIQUE,
          created_at TEXT NOT NULL,
          gateway_id TEXT,
          last_seen_at TEXT
        ) WITHOUT ROWID;

        -- The last roster each connection announced (kept while it is offline).
        CREATE TABLE roster_bots (
          connection TEXT NOT NULL REFERENCES connection_keys(connection) ON DELETE CASCADE,
          handle TEXT NOT NULL,
          display_name TEXT NOT NULL,
          title TEXT NOT NULL,
          description TEXT NOT NULL,
          PRIMARY KEY (connection, handle)
        ) WITHOUT ROWID;

        -- The durable envelope queue. seq is the commit order the per-target lanes follow.
        -- state: queued | done | offline ("forwarded" exists only in memory: after a restart an
        -- open delivery is simply queued again; the target deduplicates by delivery id).
        CREATE TABLE deliveries (
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          delivery_id TEXT NOT NULL UNIQUE,
          fingerprint TEXT NOT NULL,
          sender_connection TEXT NOT NULL,
          target_connection TEXT NOT NULL,
          target_handle TEXT NOT NULL,
          sender_name TEXT NOT NULL,
          envelope_json TEXT NOT NULL,
          state TEXT NOT NULL CHECK (state IN ('queued', 'forwarded', 'done', 'offline')),
          forwards INTEGER NOT NULL DEFAULT 0,
          accepted_at INTEGER NOT NULL,
          expires_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL,
          outcome_json TEXT
        );
        CREATE INDEX deliveries_open ON deliveries (seq) WHERE state IN ('queued', 'forwarded');
        CREATE INDEX deliveries_ended ON deliveries (updated_at) WHERE state IN ('done', 'offline');
      `);
    },
  },
];
