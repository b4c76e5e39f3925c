import type { Db } from "@hermes/common";

/**
 * `delivery_obligations` of chat turns (`turn_reply`): a pending row is recorded before a turn runs
 * and marked after, so a gateway that died mid-turn finds it at start and reports the turn failed
 * instead of running it again. Ended rows are a record kept for OBLIGATION_RETENTION_MS, then
 * pruned: without that the table grows by a row per chat turn forever, and a rename rewrites the
 * profile's rows there.
 */

/** How long an ended obligation (delivered, failed, abandoned) is kept: a week, as peer runs are. */
export const OBLIGATION_RETENTION_MS = 7 * 24 * 3600_000;

export type ObligationEnd = "delivered" | "failed";

/** Records the pending obligation of a turn in `session_key`. */
export function openTurnObligation(
  db: Db,
  row: { obligation_id: string; profile: string; session_key: string; session_id: string; now: string },
): void {
  db.prepare(
    `INSERT INTO delivery_obligations (obligation_id, adapter_profile, session_key, kind, state, payload_json, created_at, updated_at)
     VALUES (?, ?, ?, 'turn_reply', 'pending', ?, ?, ?)`,
  ).run(row.obligation_id, row.profile, row.session_key, JSON.stringify({ session_id: row.session_id }), row.now, row.now);
}

/** Ends an obligation, only while it is still pending: a delete that abandoned it meanwhile has the last word. */
export function endTurnObligation(db: Db, obligationId: string, state: ObligationEnd, now: string): void {
  db.prepare("UPDATE delivery_obligations SET state = ?, updated_at = ? WHERE obligation_id = ? AND state = 'pending'").run(
    state,
    now,
    obligationId,
  );
}

/** At start: the turns that were running when the process died are failed (never re-run). Returns how many. */
export function failInterruptedTurns(db: Db, now: string): number {
  return db
    .prepare("UPDATE delivery_obligations SET state = 'failed', updated_at = ? WHERE kind = 'turn_reply' AND state = 'pending'")
    .run(now).changes;
}

/** Deletes the obligations that ended (any state but pending) before `endedBefore`. Returns how many. */
export function pruneEndedObligations(db: Db, endedBefore: string): number {
  return db.prepare("DELETE FROM delivery_obligations WHERE state <> 'pending' AND updated_at < ?").run(endedBefore).changes;
}
