import { type Clock, HermesError, isoTime, type Logger, newId } from "@hermes/common";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { ChatService } from "../../agents/app/chat.js";
import { attemptFailure } from "../../delivery/app/failure.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { SessionService } from "../../identity/app/sessions.js";
import { checkRoutineDefinition, type RoutineDefinitionInput } from "../core/definition.js";
import { MAX_LISTED_TIMES } from "../core/misfire.js";
import { type JobRef, jobLabel, parseJobLabel, routineNameKey } from "../core/routine-name.js";
import { failRun, interruptedRun, type RoutineTrigger, routineTurnMessage, settleRun } from "../core/run.js";
import { Schedule } from "../core/schedule.js";
import { RoutineScheduler, type ScheduledRoutine, type SchedulerEffect } from "../core/scheduler.js";
import { type RoutineRow, type RoutinesStore, RUNS_KEPT_PER_ROUTINE, type RunRow } from "../store/routines-store.js";

/** `cron add` / `routines.add`: the core's input; `tz` absent or empty means the gateway's own zone. */
export type RoutineInput = Omit<RoutineDefinitionInput, "tz"> & { tz?: unknown };

/** A run as `cron runs` lists it. */
export interface RoutineRunView {
  run_id: string;
  job: string;
  state: RunRow["state"];
  trigger: RoutineTrigger | null;
  scheduled_for: string | null;
  started_at: string | null;
  ended_at: string | null;
  late_ms: number | null;
  reason: string | null;
  error: string | null;
  reply: string | null;
  detail: string | null;
}

/** A routine as `cron list` shows it. */
export interface RoutineView {
  routine_id: string;
  job: string;
  profile: string;
  name: string;
  schedule: string;
  tz: string;
  misfire: RoutineRow["misfire"];
  grace_seconds: number;
  paused: boolean;
  prompt: string;
  /** Null while paused (or when the schedule has no time left). */
  next_run: string | null;
  last_run: RoutineRunView | null;
  created_at: string;
}

/** What runs the turns: present in a running gateway, absent when the CLI edits routines directly. */
export interface RoutineRunner {
  chat: ChatService;
  sessions: SessionService;
  /** A run's turn still running after this long is cancelled and fails `delivery_timeout`. */
  turnTimeoutMs: number;
}

export interface RoutineServiceDeps {
  store: RoutinesStore;
  profiles: ProfileService;
  clock: Clock;
  logger: Logger;
  /** The zone stored with a routine added without one (the gateway's own). */
  timeZone: string;
  runner?: RoutineRunner | undefined;
  registry?: Registry | undefined;
}

interface ActiveRun {
  run_id: string;
  controller: AbortController;
  done: Promise<void>;
}

const DEFAULT_RUNS_LISTED = 20;

/** The zone of this process (the machine's setting, or TZ), stored with routines added without `--tz`. */
export function localTimeZone(): string {
  return new Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

/**
 * Routines: durable jobs in state.db driven by the core's scheduler state machine
 * (routines/core/scheduler.ts) with one timer. Each answer of the scheduler is applied the same way:
 * the records, cursors and new `running` rows in one IMMEDIATE transaction, then the runs, then the
 * timer. A run is one turn in the bot's canonical Bot Chat, queued in its session lane like a chat
 * turn, so `hermes -p BOT chat` has it in context.
 *
 * Without a runner (the CLI with no gateway) the same service edits the rows; nothing runs, and the
 * next gateway start picks the routines up.
 */
export class RoutineService {
  private readonly scheduler = new RoutineScheduler();
  private readonly active = new Map<string, ActiveRun>();
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private stopping = false;
  private readonly runsTotal: Counter<"state" | "reason">;
  private readonly lateness: Histogram<"trigger">;
  private readonly duration: Histogram<"state">;

  constructor(private readonly deps: RoutineServiceDeps) {
    const registers = deps.registry ? [deps.registry] : [];
    this.runsTotal = new Counter({
      name: "hermes_routine_runs_total",
      help: "Routine run rows written in their final state, by state (settled, failed, missed, skipped_overlap) and reason",
      labelNames: ["state", "reason"] as const,
      registers,
    });
    this.lateness = new Histogram({
      name: "hermes_routine_lateness_seconds",
      help: "How late routine runs started after their scheduled time, by trigger (schedule, catch_up)",
      labelNames: ["trigger"] as const,
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300, 3600],
      registers,
    });
    this.duration = new Histogram({
      name: "hermes_routine_run_duration_seconds",
      help: "Routine runs from start to end, by end state",
      labelNames: ["state"] as const,
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900],
      registers,
    });
    const store = deps.store;
    new Gauge({
      name: "hermes_routines",
      help: "Routines of this gateway, by state (active, paused)",
      labelNames: ["state"] as const,
      registers,
      collect() {
        const counts = store.countRoutines();
        this.set({ state: "active" }, counts.active);
        this.set({ state: "paused" }, counts.paused);
      },
    });
    const active = this.active;
    new Gauge({
      name: "hermes_routine_runs_running",
      help: "Routine runs running now (queued in or running from a Bot Chat lane)",
      registers,
      collect() {
        this.set(active.size);
      },
    });
    const now = deps.clock.now();
    for (const row of deps.store.routines()) this.schedule(row, now);
    // A deleted profile's routines stop before its rows are purged; a rename needs nothing: the
    // scheduler knows routines by id, and every run reads its routine's row when it starts.
    deps.profiles.events.on("stopping", (profile) => this.dropProfile(profile));
  }

  /** Loads a stored routine into the scheduler (its effects wait for `start`). */
  private schedule(row: RoutineRow, now: number): void {
    let schedule: Schedule;
    try {
      schedule = Schedule.parse(row.schedule, row.tz, now);
    } catch (err) {
      this.deps.logger.warn({ err, routine_id: row.routine_id, job: this.label(row) }, "routine not scheduled: its schedule is invalid");
      return;
    }
    this.scheduler.upsert(scheduledRoutine(row, schedule), now);
  }

  /**
   * Start-up (a running gateway only): runs left `running` by a stop or a crash are failed
   * `runtime_offline` (never re-run: their turn may have had effects), then the scheduler accounts
   * for every time that passed while the gateway was down (the misfire policy) and arms its timer.
   */
  start(): void {
    if (this.deps.runner === undefined) throw new HermesError("internal", "routines run only in a gateway");
    this.started = true;
    const now = this.deps.clock.now();
    for (const run of this.deps.store.runningRuns()) {
      this.end({ ...run, ...interruptedRun(run, now) }, run.started_at);
      this.deps.logger.warn(
        { run_id: run.run_id, routine_id: run.routine_id },
        "routine run was running at restart: failed runtime_offline",
      );
    }
    this.apply(this.scheduler.tick(now));
  }

  add(input: RoutineInput): RoutineView {
    const profile = this.deps.profiles.resolve(input.profile);
    this.deps.profiles.assertIdentitySettled(profile);
    const now = this.deps.clock.now();
    const tz = input.tz === undefined || input.tz === "" ? this.deps.timeZone : input.tz;
    const existing = this.deps.store.routines(profile).map((r) => r.name);
    const definition = checkRoutineDefinition({ ...input, profile, tz }, existing, now);
    const at = isoTime(now);
    const row: RoutineRow = {
      routine_id: newId("routine"),
      profile,
      name: definition.name,
      name_key: routineNameKey(definition.name),
      schedule: definition.schedule.expression,
      tz: definition.schedule.tz,
      prompt: definition.prompt,
      misfire: definition.misfire,
      grace_seconds: definition.grace_seconds,
      paused: false,
      // A new routine's first run is its first scheduled time after now.
      cursor_ms: now,
      created_at: at,
      updated_at: at,
    };
    this.change(row.routine_id, this.scheduler.upsert(scheduledRoutine(row, definition.schedule), now), () =>
      this.deps.store.insertRoutine(row),
    );
    this.deps.logger.info({ routine_id: row.routine_id, job: this.label(row), schedule: row.schedule, tz: row.tz }, "routine added");
    return this.view(row);
  }

  /** Every routine, or one profile's (a former name resolves too), by profile and name. */
  list(profile?: string): RoutineView[] {
    const rows = this.deps.store.routines(profile === undefined || profile === "" ? undefined : this.deps.profiles.resolve(profile));
    const last = this.deps.store.lastRuns();
    return rows.map((row) => this.view(row, last.get(row.routine_id) ?? null));
  }

  /** No more scheduled runs until resumed; a run in progress finishes. */
  pause(job: unknown): RoutineView {
    const row = this.resolveJob(job);
    const now = this.deps.clock.now();
    this.change(row.routine_id, this.scheduler.pause(row.routine_id, now), () =>
      this.deps.store.setPaused(row.routine_id, true, isoTime(now)),
    );
    return this.view(this.deps.store.routine(row.routine_id)!);
  }

  /** Runs again from now on: times that came while paused are neither run nor missed. */
  resume(job: unknown): RoutineView {
    const row = this.resolveJob(job);
    const now = this.deps.clock.now();
    this.change(row.routine_id, this.scheduler.resume(row.routine_id, now), () =>
      this.deps.store.setPaused(row.routine_id, false, isoTime(now)),
    );
    return this.view(this.deps.store.routine(row.routine_id)!);
  }

  /** Removes a routine and its history; a run in progress is cancelled. */
  remove(job: unknown): { job: string; routine_id: string; runs_deleted: number } {
    const row = this.resolveJob(job);
    this.apply(this.scheduler.remove(row.routine_id, this.deps.clock.now()));
    this.cancel(row.routine_id, `routine ${this.label(row)} was removed`);
    const runs = this.deps.store.deleteRoutine(row.routine_id);
    this.deps.logger.info({ routine_id: row.routine_id, job: this.label(row) }, "routine removed");
    return { job: this.label(row), routine_id: row.routine_id, runs_deleted: runs };
  }

  /** `cron run-now`: one run at once, paused or not (its schedule does not move); refused while one runs. */
  runNow(job: unknown): RoutineRunView {
    const row = this.resolveJob(job);
    if (!this.started || this.stopping) {
      throw new HermesError("unavailable", "run-now runs the routine in the gateway: start it (hermes gateway start) and try again", {
        data: { job: this.label(row) },
      });
    }
    const [run] = this.apply(this.scheduler.runNow(row.routine_id, this.deps.clock.now()));
    return this.runView(run!, this.label(row));
  }

  /** A routine's runs, newest first. */
  runs(job: unknown, limit?: unknown): RoutineRunView[] {
    const row = this.resolveJob(job);
    const n = limit === undefined || limit === 0 ? DEFAULT_RUNS_LISTED : limit;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > RUNS_KEPT_PER_ROUTINE) {
      throw new HermesError("invalid_params", `limit: must be a whole number from 1 to ${RUNS_KEPT_PER_ROUTINE} (the runs kept)`, {
        data: { field: "limit", valid: { min: 1, max: RUNS_KEPT_PER_ROUTINE } },
      });
    }
    return this.deps.store.runs(row.routine_id, n).map((run) => this.runView(run, this.label(row)));
  }

  /** `[bot:<profile>] <name>` → its row; the profile may be given by a former name. */
  private resolveJob(job: unknown): RoutineRow {
    const ref = parseJobLabel(job);
    const profile = this.deps.profiles.resolve(ref.profile);
    const row = this.deps.store.byName(profile, routineNameKey(ref.name));
    if (row === undefined) {
      throw new HermesError("not_found", `no routine ${jobLabel({ profile, name: ref.name })}; list them with: hermes cron list`, {
        data: { job: jobLabel({ profile, name: ref.name }) },
      });
    }
    return row;
  }

  /**
   * A change of one routine's row with the scheduler's answer to it, in one transaction. When the
   * write fails the scheduler is set back to what the database holds, so the two never disagree.
   */
  private change(routineId: string, effects: SchedulerEffect[], write: () => void): void {
    try {
      this.apply(effects, write);
    } catch (err) {
      const now = this.deps.clock.now();
      const row = this.deps.store.routine(routineId);
      if (row === undefined) this.scheduler.remove(routineId, now);
      else this.schedule(row, now);
      throw err;
    }
  }

  /**
   * Carries out the scheduler's answer: the records, cursors and new `running` rows (and `write`, a
   * change of the routine's own row) in one transaction, then the runs, then the timer. Returns the
   * runs started.
   */
  private apply(effects: SchedulerEffect[], write?: () => void): RunRow[] {
    const now = this.deps.clock.now();
    const started: { run: RunRow; scheduledFor: number | null }[] = [];
    const recorded: RunRow[] = [];
    let armAt: number | null | undefined;
    try {
      this.deps.store.transaction(() => {
        write?.();
        for (const effect of effects) {
          switch (effect.kind) {
            case "record_missed":
            case "record_skipped_overlap":
              recorded.push(...this.recordTimes(effect, now));
              break;
            case "save_cursor":
              this.deps.store.saveCursor(effect.routine_id, effect.cursor);
              break;
            case "start_run": {
              const run = this.newRun(effect, now);
              if (run === undefined) break;
              this.deps.store.insertRun(run);
              started.push({ run, scheduledFor: effect.scheduled_for });
              break;
            }
            case "arm_timer":
              armAt = effect.at;
              break;
          }
        }
      });
    } catch (err) {
      if (write !== undefined) throw err;
      // Nothing was recorded (a full disk, a lock): the runs did not start, so the scheduler must
      // not think they are running. The times come back at the next start (the cursor was not saved).
      this.deps.logger.error({ err }, "recording routine runs failed");
      for (const effect of effects) {
        if (effect.kind === "start_run") this.scheduler.runEnded(effect.routine_id, now);
      }
      started.length = 0;
      recorded.length = 0;
    }
    for (const run of recorded) this.runsTotal.inc({ state: run.state, reason: "none" });
    for (const { run, scheduledFor } of started) this.startRun(run, scheduledFor);
    if (armAt !== undefined) this.arm(armAt);
    return started.map((s) => s.run);
  }

  /** Rows for scheduled times that did not run: missed, or skipped because the previous run was still running. */
  private recordTimes(effect: Extract<SchedulerEffect, { kind: "record_missed" | "record_skipped_overlap" }>, now: number): RunRow[] {
    const row = this.deps.store.routine(effect.routine_id);
    if (row === undefined) return [];
    const state = effect.kind === "record_missed" ? "missed" : "skipped_overlap";
    const why =
      state === "missed"
        ? `not run: the gateway was not running then, or came to it more than the grace of ${row.grace_seconds} s late`
        : "not run: the previous run of this routine was still running (one run at a time)";
    const rows = effect.times.map(
      (t, i): RunRow => ({
        run_id: newId("rrun"),
        routine_id: row.routine_id,
        profile: row.profile,
        state,
        trigger: "schedule",
        scheduled_for: isoTime(t),
        started_at: null,
        ended_at: isoTime(now),
        late_ms: now - t,
        reason: null,
        error: null,
        reply: null,
        session_id: null,
        detail:
          i === 0 && effect.more_before
            ? `${why}; earlier scheduled times were ${state === "missed" ? "missed" : "skipped"} too (only the newest ${MAX_LISTED_TIMES} are listed)`
            : why,
      }),
    );
    for (const run of rows) this.deps.store.insertRun(run);
    return rows;
  }

  private newRun(effect: Extract<SchedulerEffect, { kind: "start_run" }>, now: number): RunRow | undefined {
    const row = this.deps.store.routine(effect.routine_id);
    if (row === undefined) return undefined;
    this.lateness.observe({ trigger: effect.trigger }, effect.late_ms / 1000);
    return {
      run_id: newId("rrun"),
      routine_id: row.routine_id,
      profile: row.profile,
      state: "running",
      trigger: effect.trigger,
      scheduled_for: effect.scheduled_for === null ? null : isoTime(effect.scheduled_for),
      started_at: isoTime(now),
      ended_at: null,
      late_ms: effect.late_ms,
      reason: null,
      error: null,
      reply: null,
      session_id: null,
      detail: null,
    };
  }

  private startRun(run: RunRow, scheduledFor: number | null): void {
    const controller = new AbortController();
    const done = this.execute(run, scheduledFor, controller.signal).finally(() => {
      if (this.active.get(run.routine_id)?.run_id === run.run_id) this.active.delete(run.routine_id);
      if (!this.stopping) this.apply(this.scheduler.runEnded(run.routine_id, this.deps.clock.now()));
    });
    this.active.set(run.routine_id, { run_id: run.run_id, controller, done });
  }

  /** The run's turn in the bot's canonical Bot Chat, queued in its lane; its end is recorded here. */
  private async execute(run: RunRow, scheduledFor: number | null, cancelled: AbortSignal): Promise<void> {
    const runner = this.deps.runner!;
    const timeout = AbortSignal.timeout(runner.turnTimeoutMs);
    let sessionId: string | null = null;
    try {
      // Read now, not when the run was planned: a rename moved the routine to the new name.
      const row = this.deps.store.routine(run.routine_id);
      if (row === undefined) return;
      const profile = this.deps.profiles.resolve(row.profile);
      this.deps.profiles.assertIdentitySettled(profile);
      const session = runner.sessions.botChat(profile);
      sessionId = session.session_id;
      const ref: JobRef = { profile, name: row.name };
      const message = routineTurnMessage(ref, row.tz, run.trigger ?? "manual", scheduledFor, row.prompt);
      const out = await runner.chat.exclusive(session.session_id, () =>
        runner.chat.runLocked(profile, session, message, {
          signal: AbortSignal.any([cancelled, timeout]),
          user_meta: { routine: jobLabel(ref), run_id: run.run_id },
          commands: false,
          obligation: false,
        }),
      );
      this.end({ ...run, ...settleRun(run, out.reply, this.deps.clock.now()), session_id: sessionId }, run.started_at);
    } catch (err) {
      const now = this.deps.clock.now();
      const failure = attemptFailure(err);
      let ended: RunRow;
      if (this.stopping && (failure.cancelled || failure.reason === "runtime_offline")) ended = { ...run, ...interruptedRun(run, now) };
      else if (timeout.aborted) {
        const seconds = Math.round(runner.turnTimeoutMs / 1000);
        ended = { ...run, ...failRun(run, { reason: "delivery_timeout", error: `the turn did not finish within ${seconds} s` }, now) };
      } else ended = { ...run, ...failRun(run, failure, now) };
      this.end({ ...ended, session_id: sessionId }, run.started_at);
    }
  }

  /** Saves a run's end if it is still running (it is gone when its routine or profile was removed meanwhile). */
  private end(run: RunRow, startedAt: string | null): void {
    if (!this.deps.store.endRun(run)) return;
    this.runsTotal.inc({ state: run.state, reason: run.reason ?? "none" });
    if (startedAt !== null && run.ended_at !== null) {
      this.duration.observe({ state: run.state }, Math.max(0, Date.parse(run.ended_at) - Date.parse(startedAt)) / 1000);
    }
    const log = { run_id: run.run_id, routine_id: run.routine_id, state: run.state, reason: run.reason ?? undefined };
    if (run.state === "failed") this.deps.logger.warn({ ...log, error: run.error }, "routine run failed");
    else this.deps.logger.info(log, "routine run settled");
  }

  private cancel(routineId: string, why: string): void {
    this.active.get(routineId)?.controller.abort(new HermesError("refused", why));
  }

  /** A profile being deleted: its routines leave the scheduler and their runs are cancelled (the purge deletes the rows). */
  private dropProfile(profile: string): void {
    for (const row of this.deps.store.routines(profile)) {
      this.apply(this.scheduler.remove(row.routine_id, this.deps.clock.now()));
      this.cancel(row.routine_id, `profile ${profile} was deleted`);
    }
  }

  /** The one timer, at the scheduler's next time (at most 30 s ahead, so a clock jump is noticed). */
  private arm(at: number | null): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.started || this.stopping || at === null) return;
    const delay = Math.max(0, at - this.deps.clock.now());
    this.timer = setTimeout(() => this.apply(this.scheduler.tick(this.deps.clock.now())), delay);
    this.timer.unref();
  }

  /** Graceful stop, first step: the timer is cleared and no run starts; running ones get the turn engine's grace. */
  beginStop(): void {
    this.stopping = true;
    clearTimeout(this.timer);
  }

  /** Waits until every run has recorded its end (after the turn engine stopped, so they have ended). */
  async stop(): Promise<void> {
    this.beginStop();
    await Promise.allSettled([...this.active.values()].map((a) => a.done));
  }

  private label(row: Pick<RoutineRow, "profile" | "name">): string {
    return jobLabel({ profile: row.profile, name: row.name });
  }

  private view(row: RoutineRow, last: RunRow | null = this.deps.store.runs(row.routine_id, 1)[0] ?? null): RoutineView {
    const job = this.label(row);
    let next: number | null = null;
    try {
      next = this.scheduler.nextRun(row.routine_id, this.deps.clock.now());
    } catch {
      // Not scheduled (its stored schedule no longer parses): no next run.
    }
    return {
      routine_id: row.routine_id,
      job,
      profile: row.profile,
      name: row.name,
      schedule: row.schedule,
      tz: row.tz,
      misfire: row.misfire,
      grace_seconds: row.grace_seconds,
      paused: row.paused,
      prompt: row.prompt,
      next_run: next === null ? null : isoTime(next),
      last_run: last === null ? null : this.runView(last, job),
      created_at: row.created_at,
    };
  }

  private runView(run: RunRow, job: string): RoutineRunView {
    return {
      run_id: run.run_id,
      job,
      state: run.state,
      trigger: run.trigger,
      scheduled_for: run.scheduled_for,
      started_at: run.started_at,
      ended_at: run.ended_at,
      late_ms: run.late_ms,
      reason: run.reason,
      error: run.error,
      reply: run.reply,
      detail: run.detail,
    };
  }
}

function scheduledRoutine(row: RoutineRow, schedule: Schedule): ScheduledRoutine {
  return {
    routine_id: row.routine_id,
    schedule,
    misfire: row.misfire,
    grace_seconds: row.grace_seconds,
    paused: row.paused,
    cursor: row.cursor_ms,
  };
}
