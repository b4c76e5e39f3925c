import { type Db, statement } from "@hermes/common";
import { type DeliveryReason, toReceiptReason } from "@hermes/contract";
import type { TaskRecord, TaskState } from "../core/task.js";

type RawTask = Omit<TaskRecord, "reason" | "waiting_for"> & { reason: string | null };

const COLUMNS =
  "task_id, profile, session_id, context_id, caller, message_id, fingerprint, state, input, message_json, reply, reason, error, created_at, updated_at, ended_at";

function fromRow(row: RawTask): TaskRecord {
  const reason: DeliveryReason | null = row.reason === null ? null : toReceiptReason(row.reason);
  return { ...row, reason, waiting_for: null };
}

/** A task row without its text, for listings (status, the console). */
export interface TaskSummary {
  task_id: string;
  profile: string;
  context_id: string;
  caller: string;
  state: TaskState;
  reason: string | null;
  created_at: string;
  updated_at: string;
}

/** A2A tasks and conversations in the gateway's state.db (home/store/migrations/012-a2a-tasks.ts). */
export class A2aTasksStore {
  constructor(readonly db: Db) {}

  /** A new task. The unique index on (caller, profile, message_id) refuses a second task for a messageId. */
  insert(task: TaskRecord): void {
    statement(
      this.db,
      `INSERT INTO a2a_tasks (${COLUMNS})
       VALUES (@task_id, @profile, @session_id, @context_id, @caller, @message_id, @fingerprint, @state, @input, @message_json,
               @reply, @reason, @error, @created_at, @updated_at, @ended_at)`,
    ).run(task);
  }

  get(taskId: string): TaskRecord | undefined {
    const row = statement(this.db, `SELECT ${COLUMNS} FROM a2a_tasks WHERE task_id = ?`).get(taskId) as RawTask | undefined;
    return row && fromRow(row);
  }

  /** The task a caller's messageId started with a bot, if any. */
  byMessage(caller: string, profile: string, messageId: string): TaskRecord | undefined {
    const row = statement(this.db, `SELECT ${COLUMNS} FROM a2a_tasks WHERE caller = ? AND profile = ? AND message_id = ?`).get(
      caller,
      profile,
      messageId,
    ) as RawTask | undefined;
    return row && fromRow(row);
  }

  /** The bot and session a caller's contextId belongs to (its first task's), if it was used before. */
  context(caller: string, contextId: string): { profile: string; session_id: string } | undefined {
    return statement(this.db, "SELECT profile, session_id FROM a2a_tasks WHERE caller = ? AND context_id = ? ORDER BY id LIMIT 1").get(
      caller,
      contextId,
    ) as { profile: string; session_id: string } | undefined;
  }

  /** Records an end (or any state) if the row is still in `from`; false when something else moved it first. */
  transition(next: TaskRecord, from: TaskState): boolean {
    return (
      statement(
        this.db,
        `UPDATE a2a_tasks SET state = @state, reply = @reply, reason = @reason, error = @error, updated_at = @updated_at, ended_at = @ended_at
         WHERE task_id = @task_id AND state = @from`,
      ).run({ ...next, from }).changes === 1
    );
  }

  /** Tasks that have not ended, oldest first. */
  open(): TaskRecord[] {
    return (statement(this.db, `SELECT ${COLUMNS} FROM a2a_tasks WHERE ended_at IS NULL ORDER BY id`).all() as RawTask[]).map(fromRow);
  }

  /** A caller's tasks with a bot, newest first (ListTasks), optionally of one context or state. */
  list(filter: { caller: string; profile: string; context_id?: string; state?: TaskState; limit: number; offset: number }): TaskRecord[] {
    const rows = statement(
      this.db,
      `SELECT ${COLUMNS} FROM a2a_tasks
       WHERE caller = @caller AND profile = @profile AND (@context_id IS NULL OR context_id = @context_id) AND (@state IS NULL OR state = @state)
       ORDER BY id DESC LIMIT @limit OFFSET @offset`,
    ).all({ ...filter, context_id: filter.context_id ?? null, state: filter.state ?? null }) as RawTask[];
    return rows.map(fromRow);
  }

  /** The newest tasks of every bot and caller (status, the console). */
  recent(limit: number): TaskSummary[] {
    return statement(
      this.db,
      `SELECT task_id, profile, context_id, caller, state, reason, created_at, updated_at FROM a2a_tasks ORDER BY id DESC LIMIT ?`,
    ).all(limit) as TaskSummary[];
  }

  countByState(): Record<string, number> {
    const rows = statement(this.db, "SELECT state, count(*) AS n FROM a2a_tasks GROUP BY state").all() as { state: string; n: number }[];
    return Object.fromEntries(rows.map((r) => [r.state, r.n]));
  }

  /** Deletes tasks that ended before `before` (their messageIds start new tasks again). */
  prune(before: string): number {
    return statement(this.db, "DELETE FROM a2a_tasks WHERE ended_at IS NOT NULL AND ended_at < ?").run(before).changes;
  }
}
