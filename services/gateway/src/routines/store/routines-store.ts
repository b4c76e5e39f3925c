import { type Db, statement } from "@hermes/common";
import { type DeliveryReason, toReceiptReason } from "@hermes/contract";
import type { MisfirePolicy } from "../core/misfire.js";
import type { RoutineRun, RoutineRunState, RoutineTrigger } from "../core/run.js";

/** A routine as stored (home/store/migrations/008-routines.ts). */
export interface RoutineRow {
  routine_id: string;
  profile: string;
  name: string;
  name_key: string;
  schedule: string;
  tz: string;
  prompt: string;
  misfire: MisfirePolicy;
  grace_seconds: number;
  paused: boolean;
  /** ms: the newest scheduled time accounted for. */
  cursor_ms: number;
  created_at: string;
  updated_at: string;
}

/** A run row: the core's run plus where it ran and how late it started. */
export interface RunRow extends RoutineRun {
  profile: string;
  late_ms: number | null;
  session_id: string | null;
  detail: string | null;
}

/** Run history kept per routine; older rows are pruned in the transaction that adds one. */
export const RUNS_KEPT_PER_ROUTINE = 200;

const ROUTINE_COLUMNS =
  "routine_id, profile, name, name_key, schedule, tz, prompt, misfire, grace_seconds, paused, cursor_ms, created_at, updated_at";
const RUN_COLUMNS =
  "run_id, routine_id, profile, state, trigger, scheduled_for, started_at, ended_at, late_ms, reason, error, reply, session_id, detail";

type RawRoutine = Omit<RoutineRow, "paused"> & { paused: number };
type RawRun = Omit<RunRow, "reason" | "state" | "trigger"> & {
  reason: string | null;
  state: RoutineRunState;
  trigger: RoutineTrigger | null;
};

function routineOf(raw: RawRoutine): RoutineRow {
  return { ...raw, paused: raw.paused === 1 };
}

function runOf(raw: RawRun): RunRow {
  const reason: DeliveryReason | null = raw.reason === null ? null : toReceiptReason(raw.reason);
  return { ...raw, reason };
}

/** Routines and their runs in the gateway's state.db. Multi-row changes are the caller's transaction (`transaction`). */
export class RoutinesStore {
  constructor(readonly db: Db) {}

  /** Runs `fn` in one IMMEDIATE transaction. */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  insertRoutine(row: RoutineRow): void {
    statement(
      this.db,
      `INSERT INTO routines (${ROUTINE_COLUMNS})
       VALUES (@routine_id, @profile, @name, @name_key, @schedule, @tz, @prompt, @misfire, @grace_seconds, @paused, @cursor_ms,
               @created_at, @updated_at)`,
    ).run({ ...row, paused: row.paused ? 1 : 0 });
  }

  routine(routineId: string): RoutineRow | undefined {
    const raw = statement(this.db, `SELECT ${ROUTINE_COLUMNS} FROM routines WHERE routine_id = ?`).get(routineId) as RawRoutine | undefined;
    return raw && routineOf(raw);
  }

  byName(profile: string, nameKey: string): RoutineRow | undefined {
    const raw = statement(this.db, `SELECT ${ROUTINE_COLUMNS} FROM routines WHERE profile = ? AND name_key = ?`).get(profile, nameKey) as
      | RawRoutine
      | undefined;
    return raw && routineOf(raw);
  }

  /** Every routine (or a profile's), by profile and name. */
  routines(profile?: string): RoutineRow[] {
    const rows =
      profile === undefined
        ? statement(this.db, `SELECT ${ROUTINE_COLUMNS} FROM routines ORDER BY profile, name_key`).all()
        : statement(this.db, `SELECT ${ROUTINE_COLUMNS} FROM routines WHERE profile = ? ORDER BY name_key`).all(profile);
    return (rows as RawRoutine[]).map(routineOf);
  }

  setPaused(routineId: string, paused: boolean, at: string): void {
    statement(this.db, "UPDATE routines SET paused = ?, updated_at = ? WHERE routine_id = ?").run(paused ? 1 : 0, at, routineId);
  }

  saveCursor(routineId: string, cursorMs: number): void {
    statement(this.db, "UPDATE routines SET cursor_ms = ? WHERE routine_id = ?").run(cursorMs, routineId);
  }

  /** Deletes a routine and (by cascade) its runs; the number of runs that went with it. */
  deleteRoutine(routineId: string): number {
    return this.transaction(() => {
      const runs = (statement(this.db, "SELECT count(*) AS n FROM routine_runs WHERE routine_id = ?").get(routineId) as { n: number }).n;
      statement(this.db, "DELETE FROM routine_runs WHERE routine_id = ?").run(routineId);
      statement(this.db, "DELETE FROM routines WHERE routine_id = ?").run(routineId);
      return runs;
    });
  }

  /** Adds a run row and prunes the routine's history to the newest RUNS_KEPT_PER_ROUTINE (a running row is never pruned). */
  insertRun(run: RunRow): void {
    statement(
      this.db,
      `INSERT INTO routine_runs (${RUN_COLUMNS})
       VALUES (@run_id, @routine_id, @profile, @state, @trigger, @scheduled_for, @started_at, @ended_at, @late_ms, @reason, @error,
               @reply, @session_id, @detail)`,
    ).run(run);
    statement(
      this.db,
      `DELETE FROM routine_runs WHERE routine_id = @routine_id AND state != 'running' AND id <= (
         SELECT id FROM routine_runs WHERE routine_id = @routine_id ORDER BY id DESC LIMIT 1 OFFSET @kept)`,
    ).run({ routine_id: run.routine_id, kept: RUNS_KEPT_PER_ROUTINE });
  }

  /**
   * Saves a run's end if the row is still running (compare and set). False when it is not: it
   * ended another way first, or it is gone with its routine or profile.
   */
  endRun(run: RunRow): boolean {
    return (
      statement(
        this.db,
        `UPDATE routine_runs SET state = @state, ended_at = @ended_at, reason = @reason, error = @error, reply = @reply,
                session_id = @session_id
         WHERE run_id = @run_id AND state = 'running'`,
      ).run(run).changes === 1
    );
  }

  /** A routine's runs, newest first. */
  runs(routineId: string, limit: number): RunRow[] {
    return (
      statement(this.db, `SELECT ${RUN_COLUMNS} FROM routine_runs WHERE routine_id = ? ORDER BY id DESC LIMIT ?`).all(
        routineId,
        limit,
      ) as RawRun[]
    ).map(runOf);
  }

  /** The newest run row of every routine that has one. */
  lastRuns(): Map<string, RunRow> {
    const rows = statement(
      this.db,
      `SELECT ${RUN_COLUMNS} FROM routine_runs WHERE id IN (SELECT max(id) FROM routine_runs GROUP BY routine_id)`,
    ).all() as RawRun[];
    return new Map(rows.map((raw) => [raw.routine_id, runOf(raw)]));
  }

  /** Runs left `running` (by a stop or a crash), for start-up. */
  runningRuns(): RunRow[] {
    return (statement(this.db, `SELECT ${RUN_COLUMNS} FROM routine_runs WHERE state = 'running' ORDER BY id`).all() as RawRun[]).map(runOf);
  }

  countRoutines(): { active: number; paused: number } {
    const rows = statement(this.db, "SELECT paused, count(*) AS n FROM routines GROUP BY paused").all() as { paused: number; n: number }[];
    return { active: rows.find((r) => r.paused === 0)?.n ?? 0, paused: rows.find((r) => r.paused === 1)?.n ?? 0 };
  }
}
