import type { Migration } from "@hermes/common";

/**
 * A2A tasks: messages A2A callers sent to this gateway's bots, each one turn in a canonical Bot
 * Chat (a2a/core/task.ts). A row is written when the task is admitted and when it ends; the states
 * in between live in memory, and a row still open at start is failed (never re-run).
 *
 * - `a2a_tasks`: `(profile, caller, message_id)` is unique, so the same messageId answers with the
 *   same task, across restarts too; `caller` scopes what a key may see.
 * - `a2a_contexts`: a contextId names one conversation, bound to the session its first task ran
 *   in (a session id survives renames).
 *
 * Identity (identity/core/registry.ts): `profile` holds a profile of this gateway in both tables.
 */
export const a2aTasksMigration: Migration = {
  version: 12,
  name: "a2a-tasks",
  up(db) {
    db.exec(`
      CREATE TABLE a2a_tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT NOT NULL UNIQUE,
        profile TEXT NOT NULL,
        session_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        caller TEXT NOT NULL,
        message_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('submitted', 'working', 'input-required', 'completed', 'failed', 'canceled')),
        input TEXT NOT NULL,
        message_json TEXT NOT NULL,
        reply TEXT,
        reason TEXT,
        error TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        ended_at TEXT
      );
      CREATE UNIQUE INDEX a2a_tasks_by_message ON a2a_tasks(caller, profile, message_id);
      CREATE INDEX a2a_tasks_open ON a2a_tasks(state) WHERE ended_at IS NULL;
      CREATE INDEX a2a_tasks_by_end ON a2a_tasks(ended_at) WHERE ended_at IS NOT NULL;
      CREATE TABLE a2a_contexts (
        caller TEXT NOT NULL,
        context_id TEXT NOT NULL,
        profile TEXT NOT NULL,
        session_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (caller, context_id)
      );
    `);
  },
};
