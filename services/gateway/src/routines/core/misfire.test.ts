import type { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import {
  checkGraceSeconds,
  checkMisfirePolicy,
  DEFAULT_GRACE_SECONDS,
  DEFAULT_MISFIRE,
  decideDue,
  MAX_LISTED_TIMES,
  type MisfirePolicy,
} from "./misfire.js";
import { Schedule } from "./schedule.js";

const at = (hhmmss: string) => Date.parse(`2026-05-04T${hhmmss}Z`);
const hhmmss = (ms: number) => new Date(ms).toISOString().slice(11, 19);
const everyFive = Schedule.parse("*/5 * * * *", "UTC", at("00:00:00"));

interface Row {
  what: string;
  cursor: string;
  now: string;
  misfire: MisfirePolicy;
  grace: number;
  running?: boolean;
  start: [trigger: "schedule" | "catch_up", scheduled_for: string] | null;
  missed: string[];
  skipped?: string[];
  cursorAfter: string;
}

// Schedule: every five minutes (10:00, 10:05, 10:10, …); the cursor is the last time accounted for.
const rows: Row[] = [
  {
    what: "nothing due yet",
    cursor: "10:00:00",
    now: "10:04:59",
    misfire: "skip",
    grace: 60,
    start: null,
    missed: [],
    cursorAfter: "10:00:00",
  },
  {
    what: "on the dot",
    cursor: "10:00:00",
    now: "10:05:00",
    misfire: "skip",
    grace: 60,
    start: ["schedule", "10:05:00"],
    missed: [],
    cursorAfter: "10:05:00",
  },
  {
    what: "a timer a little late",
    cursor: "10:00:00",
    now: "10:05:00.250",
    misfire: "skip",
    grace: 60,
    start: ["schedule", "10:05:00"],
    missed: [],
    cursorAfter: "10:05:00",
  },
  {
    what: "late, inside the grace",
    cursor: "10:00:00",
    now: "10:06:00",
    misfire: "skip",
    grace: 60,
    start: ["schedule", "10:05:00"],
    missed: [],
    cursorAfter: "10:05:00",
  },
  {
    what: "just past the grace, skip",
    cursor: "10:00:00",
    now: "10:06:01",
    misfire: "skip",
    grace: 60,
    start: null,
    missed: ["10:05:00"],
    cursorAfter: "10:05:00",
  },
  {
    what: "just past the grace, run-once",
    cursor: "10:00:00",
    now: "10:06:01",
    misfire: "run-once",
    grace: 60,
    start: ["catch_up", "10:05:00"],
    missed: ["10:05:00"],
    cursorAfter: "10:05:00",
  },
  // The gateway was down across two scheduled times.
  {
    what: "down across two times, skip",
    cursor: "10:00:00",
    now: "10:12:30",
    misfire: "skip",
    grace: 60,
    start: null,
    missed: ["10:05:00", "10:10:00"],
    cursorAfter: "10:10:00",
  },
  {
    what: "down across two times, run-once: exactly one catch-up",
    cursor: "10:00:00",
    now: "10:12:30",
    misfire: "run-once",
    grace: 60,
    start: ["catch_up", "10:10:00"],
    missed: ["10:05:00", "10:10:00"],
    cursorAfter: "10:10:00",
  },
  {
    what: "down across two times, back inside the grace of the second",
    cursor: "10:00:00",
    now: "10:12:30",
    misfire: "skip",
    grace: 180,
    start: ["schedule", "10:10:00"],
    missed: ["10:05:00"],
    cursorAfter: "10:10:00",
  },
  {
    what: "run-once inside the grace is an ordinary run",
    cursor: "10:00:00",
    now: "10:12:30",
    misfire: "run-once",
    grace: 180,
    start: ["schedule", "10:10:00"],
    missed: ["10:05:00"],
    cursorAfter: "10:10:00",
  },
  // One run at a time: a due time while the previous run runs is skipped, never queued.
  {
    what: "due while running",
    cursor: "10:00:00",
    now: "10:05:00",
    misfire: "run-once",
    grace: 60,
    running: true,
    start: null,
    missed: [],
    skipped: ["10:05:00"],
    cursorAfter: "10:05:00",
  },
  {
    what: "two due while running (a stall)",
    cursor: "10:00:00",
    now: "10:12:30",
    misfire: "run-once",
    grace: 60,
    running: true,
    start: null,
    missed: [],
    skipped: ["10:05:00", "10:10:00"],
    cursorAfter: "10:10:00",
  },
  // The wall clock went back: nothing is due twice.
  {
    what: "clock behind the cursor",
    cursor: "10:10:00",
    now: "10:02:00",
    misfire: "run-once",
    grace: 60,
    start: null,
    missed: [],
    cursorAfter: "10:10:00",
  },
];

describe("decideDue (every five minutes)", () => {
  it.each(rows)("$what", (row) => {
    const now = Date.parse(`2026-05-04T${row.now}Z`);
    const decision = decideDue({
      schedule: everyFive,
      misfire: row.misfire,
      grace_seconds: row.grace,
      cursor: at(row.cursor),
      now,
      running: row.running ?? false,
    });
    expect(decision.start === null ? null : [decision.start.trigger, hhmmss(decision.start.scheduled_for)]).toEqual(row.start);
    if (decision.start !== null) expect(decision.start.late_ms).toBe(now - decision.start.scheduled_for);
    expect(decision.missed.times.map(hhmmss)).toEqual(row.missed);
    expect(decision.skipped_overlap.times.map(hhmmss)).toEqual(row.skipped ?? []);
    expect(decision.missed.more_before || decision.skipped_overlap.more_before).toBe(false);
    expect(hhmmss(decision.cursor)).toBe(row.cursorAfter);
  });

  it("an outage of a day lists the newest times, says more were missed, and catches up exactly once", () => {
    const everyMinute = Schedule.parse("* * * * *", "UTC", at("00:00:00"));
    const cursor = at("00:00:00");
    const now = cursor + 86_400_000 + 30_000;
    const decision = decideDue({ schedule: everyMinute, misfire: "run-once", grace_seconds: 10, cursor, now, running: false });
    expect(decision.start).toEqual({ trigger: "catch_up", scheduled_for: cursor + 86_400_000, late_ms: 30_000 });
    expect(decision.missed.times).toHaveLength(MAX_LISTED_TIMES);
    expect(decision.missed.times.at(-1)).toBe(cursor + 86_400_000);
    expect(decision.missed.more_before).toBe(true);
    expect(decision.cursor).toBe(cursor + 86_400_000);
  });

  it("the newest time of a per-second schedule is always inside the grace: it runs, the stall's times are missed", () => {
    const everySecond = Schedule.parse("* * * * * *", "UTC", at("00:00:00"));
    const cursor = at("00:00:00");
    const decision = decideDue({
      schedule: everySecond,
      misfire: "skip",
      grace_seconds: 1,
      cursor,
      now: cursor + 3_600_500,
      running: false,
    });
    expect(decision.start).toEqual({ trigger: "schedule", scheduled_for: cursor + 3_600_000, late_ms: 500 });
    expect(decision.missed.times).toHaveLength(MAX_LISTED_TIMES - 1);
    expect(decision.missed.more_before).toBe(true);
  });
});

describe("misfire settings", () => {
  it("defaults: skip, with five minutes of grace", () => {
    expect(DEFAULT_MISFIRE).toBe("skip");
    expect(DEFAULT_GRACE_SECONDS).toBe(300);
  });

  it.each(["skip", "run-once"])("accepts the policy %s", (p) => {
    expect(checkMisfirePolicy(p)).toBe(p);
  });

  it.each(["run_once", "always", "", 1, null])("refuses the policy %j, naming what is valid", (p) => {
    const err = (() => {
      try {
        checkMisfirePolicy(p);
      } catch (e) {
        return e as HermesError;
      }
    })();
    expect(err?.reason).toBe("invalid_params");
    expect(err?.message).toContain("misfire: must be one of skip, run-once");
  });

  it.each([1, 60, 86_400])("accepts %i seconds of grace", (g) => {
    expect(checkGraceSeconds(g)).toBe(g);
  });

  it.each([0, -5, 1.5, 86_401, "60", Number.NaN])("refuses %j seconds of grace", (g) => {
    expect(() => checkGraceSeconds(g)).toThrow(/grace: must be a whole number of seconds from 1 to 86400/);
  });
});
