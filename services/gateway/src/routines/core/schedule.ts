import { HermesError } from "@hermes/common/pure";
import { Cron } from "croner";
import { describeType } from "../../botmode/core/labels.js";

/**
 * A routine's schedule: a cron expression of 5 or 6 fields read in an IANA time zone. croner is used
 * only as a calculator of scheduled times (no function is given to it, so it arms no timer); the
 * scheduler's shell owns the one timer.
 *
 * Daylight saving time is croner's (asserted in schedule.test.ts). A schedule whose second, minute
 * and hour fields hold no `*` and no step is *fixed-time* (`30 2 * * *`, `0 8,18 * * 1-5`): when that
 * local time does not exist (spring forward) it runs at the first valid time after the gap, and when
 * it happens twice (fall back) it runs once, at the first occurrence. Any other schedule is an
 * *interval* (`*\/15 * * * *`, `0 * * * *`): times in the gap do not exist and are not run, and a
 * repeated hour runs on both occurrences, so the interval holds in real time.
 */

export const SCHEDULE_FIELDS =
  "5 fields (minute hour day-of-month month day-of-week) or 6 (second minute hour day-of-month month day-of-week)";
const SCHEDULE_VALID = `${SCHEDULE_FIELDS}, e.g. "0 8 * * 1-5" for 08:00 on weekdays`;
const TIME_ZONE_VALID = "an IANA time zone name such as Europe/Berlin, America/New_York or UTC";

/** Longer than any real schedule (six fields of long lists); checked first, so nothing longer is parsed or quoted back. */
export const MAX_SCHEDULE_CHARS = 512;
/** The longest IANA zone names are about 30 characters. */
export const MAX_TIME_ZONE_CHARS = 64;

function invalid(field: "schedule" | "tz", message: string, valid: string, extra: Record<string, unknown> = {}): HermesError {
  return new HermesError("invalid_params", `${field}: ${message}; it must be ${valid}`, { data: { field, valid, ...extra } });
}

/**
 * An IANA zone name as the platform's time zone database knows it. Case is corrected
 * (`europe/berlin` → `Europe/Berlin`); links such as `US/Eastern` are kept as written. Fixed offsets
 * (`+01:00`, `UTC+1`) are not zone names: `Etc/GMT-1` is one hour east of Greenwich.
 */
export function checkTimeZone(tz: unknown): string {
  if (typeof tz !== "string" || tz.trim() === "") throw invalid("tz", `got ${describeType(tz)}`, TIME_ZONE_VALID);
  const name = tz.trim();
  if (name.length > MAX_TIME_ZONE_CHARS) {
    throw invalid(
      "tz",
      `is ${name.length.toLocaleString("en-US")} characters; no zone name is longer than ${MAX_TIME_ZONE_CHARS}`,
      TIME_ZONE_VALID,
      {
        limit: MAX_TIME_ZONE_CHARS,
        length: name.length,
      },
    );
  }
  if (/^[+-]\d|^(?:utc|gmt)\s*[+-]/i.test(name)) {
    throw invalid(
      "tz",
      `${JSON.stringify(name)} is a UTC offset, not a zone (a fixed offset is written Etc/GMT-1 for UTC+1)`,
      TIME_ZONE_VALID,
    );
  }
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    throw invalid("tz", `${JSON.stringify(name)} is not a known time zone`, TIME_ZONE_VALID);
  }
  return resolved.toLowerCase() === name.toLowerCase() ? resolved : name;
}

const NICKNAMES: Record<string, string> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *",
};

/** Scheduled times in (after, upto], oldest first, at most a limit of them. */
export interface TimesBetween {
  times: number[];
  /** More times fell in the range before `times[0]` than the limit let through. */
  more_before: boolean;
}

export class Schedule {
  private constructor(
    /** The expression as stored: fields separated by one space. */
    readonly expression: string,
    readonly tz: string,
    readonly fields: 5 | 6,
    private readonly cron: Cron,
  ) {}

  /**
   * Parses and validates `expression` in `tz`. `now` (ms) is needed only to refuse a schedule that
   * never fires again (`0 0 30 2 *`).
   */
  static parse(expression: unknown, tz: unknown, now: number): Schedule {
    const zone = checkTimeZone(tz);
    if (typeof expression !== "string") throw invalid("schedule", `got ${describeType(expression)}`, SCHEDULE_VALID);
    if (expression.length > MAX_SCHEDULE_CHARS) {
      const length = expression.length;
      throw invalid(
        "schedule",
        `is ${length.toLocaleString("en-US")} characters; no schedule is longer than ${MAX_SCHEDULE_CHARS}`,
        SCHEDULE_VALID,
        {
          limit: MAX_SCHEDULE_CHARS,
          length,
        },
      );
    }
    const parts = expression.trim().split(/\s+/).filter(Boolean);
    const text = parts.join(" ");
    const nickname = NICKNAMES[text.toLowerCase()];
    if (text.startsWith("@")) {
      const hint = nickname === undefined ? "" : ` (${text} is "${nickname}")`;
      throw invalid("schedule", `${JSON.stringify(text)} is a nickname; write the fields instead${hint}`, SCHEDULE_VALID);
    }
    if (parts.length !== 5 && parts.length !== 6) {
      throw invalid("schedule", `${JSON.stringify(text)} has ${parts.length} field${parts.length === 1 ? "" : "s"}`, SCHEDULE_VALID);
    }
    let cron: Cron;
    try {
      // domAndDow false: a day-of-month and a day-of-week both set match either (as Vixie cron does).
      cron = new Cron(text, { timezone: zone, mode: "5-or-6-parts", domAndDow: false, fixedTimeRule: "no-wildcard" });
    } catch (err) {
      const why = (err instanceof Error ? err.message : String(err)).replace(/^CronPattern:\s*/, "");
      throw invalid("schedule", `${JSON.stringify(text)} is not valid: ${why}`, SCHEDULE_VALID);
    }
    const schedule = new Schedule(text, zone, parts.length as 5 | 6, cron);
    if (schedule.nextAfter(now) === null) {
      throw invalid("schedule", `${JSON.stringify(text)} never fires (no such date comes again)`, SCHEDULE_VALID);
    }
    return schedule;
  }

  /** The first scheduled time strictly after `after` (ms), or null when none comes. */
  nextAfter(after: number): number | null {
    return this.cron.nextRun(new Date(after))?.getTime() ?? null;
  }

  /** The last scheduled time strictly before `before` (ms), or null. */
  private previousBefore(before: number): number | null {
    return this.cron.previousRuns(1, new Date(before))[0]?.getTime() ?? null;
  }

  /**
   * The scheduled times in (after, upto], oldest first. Walks back from `upto`, so the newest `limit`
   * are listed and a long outage of a fast schedule costs `limit` steps, not one per missed second.
   */
  timesBetween(after: number, upto: number, limit: number): TimesBetween {
    const newestFirst: number[] = [];
    // Scheduled times are whole seconds; `before` is exclusive, so upto itself is included.
    let cursor = upto + 1;
    while (newestFirst.length < limit) {
      const t = this.previousBefore(cursor);
      if (t === null || t <= after) return { times: newestFirst.reverse(), more_before: false };
      newestFirst.push(t);
      cursor = t;
    }
    const older = this.previousBefore(cursor);
    return { times: newestFirst.reverse(), more_before: older !== null && older > after };
  }
}
