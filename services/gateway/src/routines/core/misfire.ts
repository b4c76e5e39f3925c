import { HermesError } from "@hermes/common/pure";
import { describeType } from "../../botmode/core/labels.js";
import type { Schedule, TimesBetween } from "./schedule.js";

/**
 * What happens to scheduled times that were not run when they came (the gateway was down, the
 * machine asleep, the event loop stalled).
 *
 * A time is *on time* when it is at most `grace` seconds old; the newest due time that is on time
 * runs. A due time that is older than the grace is `missed` (recorded, never run), and so is every
 * due time older than the newest. Then the policy: `skip` runs nothing more; `run-once` starts
 * exactly one catch-up run when the newest due time was missed, however many were — an outage of a
 * day costs one run, not a day's worth. While the routine's previous run is still running, every
 * due time is `skipped_overlap` instead: one run at a time per routine.
 *
 * The cursor is the newest scheduled time already accounted for (run, missed or skipped); a time is
 * due when it is after the cursor and not after now. A clock that goes back leaves the cursor ahead
 * of now, so nothing runs twice: the routine waits until its next time after the cursor.
 */
export const MISFIRE_POLICIES = ["skip", "run-once"] as const;
export type MisfirePolicy = (typeof MISFIRE_POLICIES)[number];

/** Cron's own behaviour: a time that passed while nothing ran is gone. `run-once` is opt-in. */
export const DEFAULT_MISFIRE: MisfirePolicy = "skip";
/** Long enough for a gateway restart or an upgrade to start the morning routine late rather than miss it. */
export const DEFAULT_GRACE_SECONDS = 300;
export const MAX_GRACE_SECONDS = 86_400;
/** Missed or skipped times listed one by one per decision; older ones are summed up as `more_before`. */
export const MAX_LISTED_TIMES = 50;

export function checkMisfirePolicy(value: unknown): MisfirePolicy {
  if (typeof value === "string" && (MISFIRE_POLICIES as readonly string[]).includes(value)) return value as MisfirePolicy;
  throw new HermesError("invalid_params", `misfire: must be one of ${MISFIRE_POLICIES.join(", ")} (got ${describeType(value)})`, {
    data: { field: "misfire", valid: MISFIRE_POLICIES },
  });
}

export function checkGraceSeconds(value: unknown): number {
  if (typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= MAX_GRACE_SECONDS) return value;
  throw new HermesError(
    "invalid_params",
    `grace: must be a whole number of seconds from 1 to ${MAX_GRACE_SECONDS} (got ${describeType(value)})`,
    { data: { field: "grace", valid: { min: 1, max: MAX_GRACE_SECONDS } } },
  );
}

export interface DueInput {
  schedule: Schedule;
  misfire: MisfirePolicy;
  grace_seconds: number;
  /** ms: the newest scheduled time already accounted for. */
  cursor: number;
  now: number;
  /** The routine's previous run has not ended. */
  running: boolean;
}

export interface DueStart {
  trigger: "schedule" | "catch_up";
  scheduled_for: number;
  /** now − scheduled_for, for the lateness histogram. */
  late_ms: number;
}

export interface DueDecision {
  start: DueStart | null;
  missed: TimesBetween;
  skipped_overlap: TimesBetween;
  /** The new cursor: the newest due time, or the old cursor when nothing was due. */
  cursor: number;
}

const NONE: TimesBetween = Object.freeze({ times: [], more_before: false }) as TimesBetween;

export function decideDue(input: DueInput): DueDecision {
  const due = input.schedule.timesBetween(input.cursor, input.now, MAX_LISTED_TIMES);
  const newest = due.times.at(-1);
  if (newest === undefined) return { start: null, missed: NONE, skipped_overlap: NONE, cursor: input.cursor };
  const late_ms = input.now - newest;
  if (input.running) return { start: null, missed: NONE, skipped_overlap: due, cursor: newest };
  if (late_ms <= input.grace_seconds * 1000) {
    return {
      start: { trigger: "schedule", scheduled_for: newest, late_ms },
      missed: { times: due.times.slice(0, -1), more_before: due.more_before },
      skipped_overlap: NONE,
      cursor: newest,
    };
  }
  return {
    start: input.misfire === "run-once" ? { trigger: "catch_up", scheduled_for: newest, late_ms } : null,
    missed: due,
    skipped_overlap: NONE,
    cursor: newest,
  };
}
