import { HermesError, isoTime } from "@hermes/common/pure";
import type { DeliveryReason } from "@hermes/contract";
import { type JobRef, jobLabel } from "./routine-name.js";

/**
 * One run of a routine, as `hermes cron runs` lists it.
 *
 *   running ──reply──▶ settled
 *      └──error / gateway stopped──▶ failed (with a typed reason)
 *   missed            a scheduled time that did not run (gateway down, or later than the grace)
 *   skipped_overlap   a scheduled time that came while the routine's previous run was still running
 *
 * `missed` and `skipped_overlap` are written in their final state. A failed run is not retried: the
 * next scheduled time is the retry, and `cron run-now` is there for an impatient person. A run cut off
 * by a stop or a crash is failed `runtime_offline` and never run again, since its turn may have had
 * effects (a message sent).
 */
export const ROUTINE_RUN_STATES = ["running", "settled", "failed", "missed", "skipped_overlap"] as const;
export type RoutineRunState = (typeof ROUTINE_RUN_STATES)[number];

/** Why a run started: its scheduled time, the misfire policy's one catch-up, or `cron run-now`. */
export const ROUTINE_TRIGGERS = ["schedule", "catch_up", "manual"] as const;
export type RoutineTrigger = (typeof ROUTINE_TRIGGERS)[number];

/**
 * A failed run carries a delivery reason (the same twelve as receipts and peer runs), classified by
 * the shell with the delivery classifier, so a provider failure reads the same everywhere: the turn
 * outliving its deadline is `delivery_timeout`, no free agent slot `target_busy`, the gateway
 * stopping under the run `runtime_offline`, anything unclassified `unknown` with its text kept.
 */
export interface RunFailure {
  reason: DeliveryReason;
  error: string;
}

export interface RoutineRun {
  run_id: string;
  routine_id: string;
  state: RoutineRunState;
  trigger: RoutineTrigger | null;
  /** The scheduled time this row stands for (ISO); null for a manual run. */
  scheduled_for: string | null;
  started_at: string | null;
  ended_at: string | null;
  reason: DeliveryReason | null;
  error: string | null;
  reply: string | null;
}

function ended(run: RoutineRun, now: number): RoutineRun {
  if (run.state !== "running") {
    throw new HermesError("refused", `routine run ${run.run_id} is ${run.state}; only a running run can end`, {
      data: { run_id: run.run_id, state: run.state },
    });
  }
  return { ...run, ended_at: isoTime(now) };
}

export function settleRun(run: RoutineRun, reply: string, now: number): RoutineRun {
  return { ...ended(run, now), state: "settled", reply };
}

export function failRun(run: RoutineRun, failure: RunFailure, now: number): RoutineRun {
  return { ...ended(run, now), state: "failed", reason: failure.reason, error: failure.error };
}

/** A run found `running` at start-up: the gateway stopped or crashed under it. */
export function interruptedRun(run: RoutineRun, now: number): RoutineRun {
  return failRun(run, { reason: "runtime_offline", error: "the gateway stopped during the run; it was not run again" }, now);
}

/**
 * The message of a run's turn in the bot's canonical Bot Chat: a one-line header that says which
 * routine it is and for when, then the prompt verbatim, so the bot (and whoever reads the chat) can
 * tell a routine from something its person typed.
 */
export function routineTurnMessage(ref: JobRef, tz: string, trigger: RoutineTrigger, scheduledFor: number | null, prompt: string): string {
  const when = scheduledFor === null ? "" : ` scheduled for ${localTime(scheduledFor, tz)}`;
  const why = trigger === "manual" ? " (run now)" : trigger === "catch_up" ? " (catching up after missed runs)" : "";
  return `Routine ${jobLabel(ref)}${when}${why}:\n${prompt}`;
}

/** `2026-03-29 08:00 Europe/Berlin` */
function localTime(ms: number, tz: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-CA", {
      timeZone: tz,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
    })
      .formatToParts(ms)
      .map((p) => [p.type, p.value]),
  );
  const seconds = parts.second === "00" ? "" : `:${parts.second}`;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}${seconds} ${tz}`;
}
