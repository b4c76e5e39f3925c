import type { Migration } from "@hermes/common";

/**
 * A2A tasks: messages A2A callers sent to this gateway's bots, each one turn in a canonical Bot
 * Chat (a2a/core/task.ts). A row is written when the task is admitted and when it ends; the states
 * in between live in memory, and a row still open at start is failed (never re-run).
 *
 * `(caller, profile, message_id)` is unique, so the same messageId answers with the same task,
 * across restarts too; `caller` scopes what a key may see. A contextId names one conversation: its
 * first task's bot and session (a session id survives renames) are where its next tasks run, found
 * by `(caller, context_id)`. Few indexes on purpose: each is a page more in the two fsynced commits
 * of every task (open tasks at start and the retention sweep read the table through).
 *
 * Identity (identity/core/registry.ts): `profile` holds a profile of this gateway.
 */
export const a2aTasksMigration: Migration = {
  version: 12,
  name: "a2a-tasks",
  up(db) {
    db.exec(`
      CREATE TABLE a2a_tasks (
        id INTEGER PRIMARY KEY,
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
      CREATE INDEX a2a_tasks_by_context ON a2a_tasks(caller, context_id);
    `);
  },
};
