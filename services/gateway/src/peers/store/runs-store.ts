import { type Db, statement } from "@hermes/common";
import { type DeliveryReason, toReceiptReason } from "@hermes/contract";
import type { RunKind, RunRecord, RunState } from "../core/run.js";

interface RawRun {
  run_id: string;
  kind: RunKind;
  status: RunState;
  profile: string;
  session_id: string;
  sender_profile: string;
  sender_gateway: string;
  sender_name: string;
  input: string;
  fingerprint: string;
  idempotency_key: string | null;
  reply: string | null;
  reason: string | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
}

const COLUMNS =
  "run_id, kind, status, profile, session_id, sender_profile, sender_gateway, sender_name, input, fingerprint, idempotency_key, reply, reason, error, created_at, started_at, ended_at";

function fromRow(row: RawRun): RunRecord {
  const reason: DeliveryReason | null = row.reason === null ? null : toReceiptReason(row.reason);
  return { ...row, reason };
}

/** Peer runs in the gateway's state.db (home/store/migrations/004-peer-runs.ts). */
export class RunsStore {
  constructor(readonly db: Db) {}

  /** Stores a new run with its idempotency scope (the key's uniqueness is enforced by the index). */
  insert(run: RunRecord, scope: string, updatedAt: string): void {
    statement(
      this.db,
      `INSERT INTO peer_runs (${COLUMNS}, idempotency_scope, updated_at)
       VALUES (@run_id, @kind, @status, @profile, @session_id, @sender_profile, @sender_gateway, @sender_name, @input, @fingerprint,
               @idempotency_key, @reply, @reason, @error, @created_at, @started_at, @ended_at, @idempotency_scope, @updated_at)`,
    ).run({ ...run, idempotency_scope: scope, updated_at: updatedAt });
  }

  get(runId: string): RunRecord | undefined {
    const row = statement(this.db, `SELECT ${COLUMNS} FROM peer_runs WHERE run_id = ?`).get(runId) as RawRun | undefined;
    return row && fromRow(row);
  }

  /** The run holding an explicit idempotency key of a sender, if the key is still held. */
  byIdempotencyKey(scope: string, key: string): RunRecord | undefined {
    const row = statement(this.db, `SELECT ${COLUMNS} FROM peer_runs WHERE idempotency_scope = ? AND idempotency_key = ?`).get(
      scope,
      key,
    ) as RawRun | undefined;
    return row && fromRow(row);
  }

  /**
   * Saves a transition, but only if the row is still in `from` (compare and set): a stop and the
   * end of a turn can race across an await, and the first one to land wins. False when it lost
   * (or the row is gone: its profile was deleted).
   */
  transition(next: RunRecord, from: RunState, updatedAt: string): boolean {
    const result = statement(
      this.db,
      `UPDATE peer_runs SET status = @status, reply = @reply, reason = @reason, error = @error, started_at = @started_at,
              ended_at = @ended_at, updated_at = @updated_at
       WHERE run_id = @run_id AND status = @from`,
    ).run({ ...next, from, updated_at: updatedAt });
    return result.changes === 1;
  }

  /** Runs in a state, oldest first (the order they were queued in). */
  inState(status: RunState): RunRecord[] {
    return (statement(this.db, `SELECT ${COLUMNS} FROM peer_runs WHERE status = ? ORDER BY id`).all(status) as RawRun[]).map(fromRow);
  }

  countByStatus(): Record<string, number> {
    const rows = statement(this.db, "SELECT status, count(*) AS n FROM peer_runs GROUP BY status").all() as { status: string; n: number }[];
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  /**
   * Retention: runs that ended before `releaseKeysBefore` give their idempotency key back (a later
   * call with it starts new work); runs that ended before `deleteBefore` are deleted. Runs that have
   * not ended are never touched.
   */
  prune(releaseKeysBefore: string, deleteBefore: string): { released: number; deleted: number } {
    return this.db.transaction(() => {
      const released = statement(
        this.db,
        "UPDATE peer_runs SET idempotency_key = NULL WHERE ended_at IS NOT NULL AND ended_at < ? AND idempotency_key IS NOT NULL",
      ).run(releaseKeysBefore).changes;
      const deleted = statement(this.db, "DELETE FROM peer_runs WHERE ended_at IS NOT NULL AND ended_at < ?").run(deleteBefore).changes;
      return { released, deleted };
    })();
  }
}
