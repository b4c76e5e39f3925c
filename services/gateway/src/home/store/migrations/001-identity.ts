import type { Migration } from "@hermes/common";

/** A profile's own state.db: its transcripts (keyed by session id, so nothing here names the profile). */
export const transcriptMigration: Migration = {
  version: 1,
  name: "transcripts",
  up(db) {
    db.exec(`
      CREATE TABLE messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'notification')),
        content TEXT NOT NULL,
        meta_json TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      );
    `);
  },
};

/**
 * Sessions, the persisted routing index and the other identity-keyed tables (identity/core/registry.ts), plus the
 * transcript table for the default profile (whose home is HERMES_HOME itself).
 */
export const identityMigration: Migration = {
  version: 1,
  name: "identity",
  up(db) {
    transcriptMigration.up(db);
    db.exec(`
      CREATE TABLE gateway_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
      CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        profile_name TEXT NOT NULL,
        title TEXT NOT NULL,
        kind TEXT NOT NULL,
        origin_json TEXT NOT NULL,
        model_override TEXT,
        provider_override TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      -- Explicit unique indexes (not UNIQUE constraints) so a large rekey can rebuild them.
      CREATE UNIQUE INDEX sessions_by_key ON sessions(session_key);
      CREATE INDEX sessions_by_profile ON sessions(profile_name);
      CREATE TABLE gateway_routing (
        routing_key TEXT NOT NULL,
        entry_json TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE UNIQUE INDEX gateway_routing_by_key ON gateway_routing(routing_key);
      CREATE TABLE gateway_heartbeats (
        profile TEXT PRIMARY KEY,
        gateway_id TEXT NOT NULL,
        pid INTEGER NOT NULL,
        state TEXT NOT NULL,
        last_seen_at TEXT NOT NULL
      );
      CREATE TABLE delivery_obligations (
        obligation_id TEXT PRIMARY KEY,
        adapter_profile TEXT NOT NULL,
        session_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed', 'abandoned')),
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX delivery_obligations_by_profile ON delivery_obligations(adapter_profile, state);
      CREATE TABLE profile_aliases (
        alias TEXT PRIMARY KEY,
        profile_name TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE INDEX profile_aliases_by_profile ON profile_aliases(profile_name);
    `);
  },
};
