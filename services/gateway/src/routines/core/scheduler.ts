import { HermesError } from "@hermes/common/pure";
import { decideDue, type MisfirePolicy } from "./misfire.js";
import type { RoutineTrigger } from "./run.js";
import type { Schedule } from "./schedule.js";

/**
 * The routine scheduler as a pure state machine. The shell feeds it events (a tick of its one timer,
 * a run that ended, a routine added, changed, paused, resumed, removed or run now), each with the time,
 * and carries out the effects it answers with: the records and the cursor in one transaction, then
 * the runs, then `arm_timer` (always the last effect: replace the timer, or clear it for `null`).
 *
 * It holds no timer, reads no clock and does no I/O; croner only computes scheduled times.
 */

/** A wall-clock jump (NTP, a person setting the clock) is noticed within this long, like croner's own cap. */
export const MAX_TIMER_DELAY_MS = 30_000;

export interface ScheduledRoutine {
  routine_id: string;
  schedule: Schedule;
  misfire: MisfirePolicy;
  grace_seconds: number;
  paused: boolean;
  /**
   * ms: the newest scheduled time already accounted for. A new routine starts at its creation time,
   * an edited schedule at the time of the edit, a loaded one where it was saved.
   */
  cursor: number;
}

export type SchedulerEffect =
  | { kind: "record_missed"; routine_id: string; times: number[]; more_before: boolean }
  | { kind: "record_skipped_overlap"; routine_id: string; times: number[]; more_before: boolean }
  | { kind: "save_cursor"; routine_id: string; cursor: number }
  /** Create the run row (running) and start its turn; `scheduled_for` is null for a manual run. */
  | { kind: "start_run"; routine_id: string; trigger: RoutineTrigger; scheduled_for: number | null; late_ms: number }
  | { kind: "arm_timer"; at: number | null };

interface Entry {
  job: ScheduledRoutine;
  running: boolean;
  /** The first scheduled time after the cursor (cached: croner is not free). */
  next: number | null;
}

export class RoutineScheduler {
  private readonly entries = new Map<string, Entry>();

  /** Adds a routine or replaces its definition; a run in progress stays in progress. */
  upsert(job: ScheduledRoutine, now: number): SchedulerEffect[] {
    const running = this.entries.get(job.routine_id)?.running ?? false;
    this.entries.set(job.routine_id, { job: { ...job }, running, next: job.schedule.nextAfter(job.cursor) });
    return [this.arm(now)];
  }

  /** Forgets a routine; the shell cancels its run, whose end is then ignored. */
  remove(routineId: string, now: number): SchedulerEffect[] {
    this.entries.delete(routineId);
    return [this.arm(now)];
  }

  /** No more fires until resumed; a run in progress goes on. */
  pause(routineId: string, now: number): SchedulerEffect[] {
    this.entry(routineId).job.paused = true;
    return [this.arm(now)];
  }

  /**
   * Fires again from now on. Times that came while it was paused are not missed (the person asked for
   * no runs) and start no catch-up: the cursor moves to now.
   */
  resume(routineId: string, now: number): SchedulerEffect[] {
    const entry = this.entry(routineId);
    if (!entry.job.paused) return [this.arm(now)];
    entry.job.paused = false;
    const effects: SchedulerEffect[] = [];
    if (now > entry.job.cursor) effects.push(this.moveCursor(entry, now));
    effects.push(this.arm(now));
    return effects;
  }

  /** `cron run-now`: runs at once, paused or not, unless a run of the routine is still running. */
  runNow(routineId: string, now: number): SchedulerEffect[] {
    const entry = this.entry(routineId);
    if (entry.running) {
      throw new HermesError("refused", "the routine is running now; one run at a time (see its state with: hermes cron runs)", {
        data: { routine_id: routineId },
      });
    }
    entry.running = true;
    return [{ kind: "start_run", routine_id: routineId, trigger: "manual", scheduled_for: null, late_ms: 0 }, this.arm(now)];
  }

  runEnded(routineId: string, now: number): SchedulerEffect[] {
    const entry = this.entries.get(routineId);
    if (entry !== undefined) entry.running = false;
    return [this.arm(now)];
  }

  /** The timer fired (or the shell started): account for every due time of every active routine. */
  tick(now: number): SchedulerEffect[] {
    const effects: SchedulerEffect[] = [];
    for (const entry of this.entries.values()) {
      const { job } = entry;
      if (job.paused || entry.next === null || entry.next > now) continue;
      const decision = decideDue({ ...job, now, running: entry.running });
      const id = job.routine_id;
      if (decision.missed.times.length > 0) effects.push({ kind: "record_missed", routine_id: id, ...decision.missed });
      if (decision.skipped_overlap.times.length > 0) {
        effects.push({ kind: "record_skipped_overlap", routine_id: id, ...decision.skipped_overlap });
      }
      effects.push(this.moveCursor(entry, decision.cursor));
      if (decision.start !== null) {
        entry.running = true;
        effects.push({ kind: "start_run", routine_id: id, ...decision.start });
      }
    }
    effects.push(this.arm(now));
    return effects;
  }

  isRunning(routineId: string): boolean {
    return this.entries.get(routineId)?.running ?? false;
  }

  /** `cron list`'s next_run: null while paused or when the schedule has no time left. */
  nextRun(routineId: string, now: number): number | null {
    const entry = this.entry(routineId);
    if (entry.job.paused) return null;
    return entry.job.schedule.nextAfter(Math.max(entry.job.cursor, now));
  }

  private entry(routineId: string): Entry {
    const entry = this.entries.get(routineId);
    if (entry === undefined)
      throw new HermesError("not_found", `routine ${routineId} is not scheduled`, { data: { routine_id: routineId } });
    return entry;
  }

  private moveCursor(entry: Entry, cursor: number): SchedulerEffect {
    entry.job.cursor = cursor;
    entry.next = entry.job.schedule.nextAfter(cursor);
    return { kind: "save_cursor", routine_id: entry.job.routine_id, cursor };
  }

  /** The earliest next time of an active routine (a running one too: its fires are skipped_overlap), capped. */
  private arm(now: number): SchedulerEffect {
    let at: number | null = null;
    for (const { job, next } of this.entries.values()) {
      if (!job.paused && next !== null && (at === null || next < at)) at = next;
    }
    return { kind: "arm_timer", at: at === null ? null : Math.min(at, now + MAX_TIMER_DELAY_MS) };
  }
}
