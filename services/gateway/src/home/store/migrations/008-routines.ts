import type { Migration } from "@hermes/common";

/**
 * Routines (Bot Mode's cron jobs, `hermes cron …`) and their run history.
 *
 * - `routines`: one row per routine, named `[bot:<profile>] <name>`; `name_key` (lower-case NFC)
 *   makes the name unique per profile whatever its case. `cursor_ms` is the newest scheduled time
 *   already accounted for (run, missed or skipped): the scheduler picks up there after a restart,
 *   which is how times missed while the gateway was down are found.
 * - `routine_runs`: one row per scheduled time or manual run, final except `running`. `id` keeps
 *   the order rows were written in (the history lists newest first). `late_ms` is start − scheduled
 *   time; `detail` says what a row stands for beyond itself (older missed times not listed one by one).
 *
 * Identity (identity/core/registry.ts): both `profile` columns hold a profile of this gateway; a
 * rename rekeys them in the same transaction as every other identity row, a delete purges them.
 */
export const routinesMigration: Migration = {
  version: 8,
  name: "routines",
  up(db) {
    db.exec(`
      CREATE TABLE routines (
        routine_id TEXT PRIMARY KEY,
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        name_key TEXT NOT NULL,
        schedule TEXT NOT NULL,
        tz TEXT NOT NULL,
        prompt TEXT NOT NULL,
        misfire TEXT NOT NULL CHECK (misfire IN ('skip', 'run-once')),
        grace_seconds INTEGER NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
        cursor_ms INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (profile, name_key)
      );
      CREATE TABLE routine_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE,
        routine_id TEXT NOT NULL REFERENCES routines(routine_id) ON DELETE CASCADE,
        profile TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'settled', 'failed', 'missed', 'skipped_overlap')),
        trigger TEXT CHECK (trigger IN ('schedule', 'catch_up', 'manual')),
        scheduled_for TEXT,
        started_at TEXT,
        ended_at TEXT,
        late_ms INTEGER,
        reason TEXT,
        error TEXT,
        reply TEXT,
        session_id TEXT,
        detail TEXT
      );
      CREATE INDEX routine_runs_by_routine ON routine_runs(routine_id, id);
      CREATE INDEX routine_runs_running ON routine_runs(state) WHERE state = 'running';
    `);
  },
};
