import type { Migration } from "@hermes/common";

/**
 * Peer runs: turns another gateway started in a canonical Bot Chat here (`hermes peer dm/run`).
 * `id` keeps the order runs were queued in (queued runs are queued again in that order at start).
 * An explicit idempotency key is unique per sender (`idempotency_scope` = `<profile>@<gateway>`);
 * the partial index is what makes "same key → the original run" durable across restarts. Keys of
 * runs that ended long ago are released (set to NULL) by the retention sweep.
 *
 * Identity (identity/core/registry.ts): `profile` holds a profile of this gateway. The sender is
 * the calling gateway's statement (`sender_profile`, `sender_gateway`), not a local identity.
 */
export const peerRunsMigration: Migration = {
  version: 4,
  name: "peer-runs",
  up(db) {
    db.exec(`
      CREATE TABLE peer_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('dm', 'run')),
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled', 'interrupted')),
        profile TEXT NOT NULL,
        session_id TEXT NOT NULL,
        sender_profile TEXT NOT NULL,
        sender_gateway TEXT NOT NULL,
        sender_name TEXT NOT NULL,
        input TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        idempotency_scope TEXT NOT NULL,
        idempotency_key TEXT,
        reply TEXT,
        reason TEXT,
        error TEXT,
        created_at TEXT NOT NULL,
        started_at TEXT,
        ended_at TEXT,
        updated_at TEXT NOT NULL
      );
      CREATE UNIQUE INDEX peer_runs_idempotency ON peer_runs(idempotency_scope, idempotency_key) WHERE idempotency_key IS NOT NULL;
      CREATE INDEX peer_runs_by_status ON peer_runs(status);
      CREATE INDEX peer_runs_by_end ON peer_runs(ended_at) WHERE ended_at IS NOT NULL;
    `);
  },
};
