import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import { checkTimeZone, Schedule } from "./schedule.js";

const NOW = Date.parse("2026-01-01T00:00:00Z");
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Every scheduled time in [from, to), walking forward. */
function forward(schedule: Schedule, from: string, to: string): string[] {
  const out: string[] = [];
  let t = schedule.nextAfter(Date.parse(from) - 1);
  while (t !== null && t < Date.parse(to)) {
    out.push(iso(t)!);
    t = schedule.nextAfter(t);
  }
  return out;
}

describe("Schedule.parse", () => {
  it.each([
    ["0 8 * * 1-5", 5],
    ["  */5   *  * * * ", 5],
    ["*/10 * * * * *", 6],
    ["0 30 2 * * *", 6],
    ["0 0 L * *", 5],
    ["0 9 * * MON#1", 5],
  ])("accepts %j (%i fields)", (expression, fields) => {
    const schedule = Schedule.parse(expression, "UTC", NOW);
    expect(schedule.fields).toBe(fields);
    expect(schedule.expression).toBe(expression.trim().split(/\s+/).join(" "));
  });

  it.each([
    ["* * * *", 'schedule: "* * * *" has 4 fields'],
    ["0 0 0 1 1 * 2030", "has 7 fields"],
    ["", 'schedule: "" has 0 fields'],
    ["61 * * * *", 'schedule: "61 * * * *" is not valid: Invalid value for minute: 61'],
    ["* 24 * * *", "Invalid value for hour: 24"],
    ["5/5 * * * *", "stepping with numeric prefix"],
    ["0 8 * * FUNDAY", "is not valid"],
    ["@daily", 'schedule: "@daily" is a nickname; write the fields instead (@daily is "0 0 * * *")'],
    ["@reboot", '"@reboot" is a nickname'],
    ["0 0 30 2 *", 'schedule: "0 0 30 2 *" never fires'],
  ])("refuses %j naming the field and what is valid", (expression, message) => {
    const err = thrownHermesError(() => Schedule.parse(expression, "UTC", NOW));
    expect(err.reason).toBe("invalid_params");
    expect(err.exitCode).toBe(2);
    expect(err.message).toContain(message);
    expect(err.message).toContain("it must be 5 fields (minute hour day-of-month month day-of-week) or 6 (second minute");
    expect(err.data.field).toBe("schedule");
  });

  it("refuses an oversized schedule or zone without quoting it back", () => {
    const long = thrownHermesError(() => Schedule.parse(`0 8 * * ${"1,".repeat(5_000)}1`, "UTC", NOW));
    expect(long).toMatchObject({ reason: "invalid_params", data: { field: "schedule", limit: 512, length: 10_009 } });
    expect(long.message).toMatch(/^schedule: is 10,009 characters; no schedule is longer than 512; it must be 5 fields/);
    const zone = thrownHermesError(() => Schedule.parse("0 8 * * *", `Europe/${"x".repeat(5_000)}`, NOW));
    expect(zone).toMatchObject({ reason: "invalid_params", data: { field: "tz", limit: 64, length: 5_007 } });
    expect(zone.message).toMatch(/^tz: is 5,007 characters; no zone name is longer than 64; it must be an IANA time zone name/);
  });

  it("refuses a schedule that is not text", () => {
    expect(thrownHermesError(() => Schedule.parse(5, "UTC", NOW)).message).toContain("schedule: got number 5");
  });
});

describe("checkTimeZone", () => {
  it.each([
    ["Europe/Berlin", "Europe/Berlin"],
    ["europe/berlin", "Europe/Berlin"],
    ["UTC", "UTC"],
    [" America/New_York ", "America/New_York"],
    ["US/Eastern", "US/Eastern"],
    ["Etc/GMT-1", "Etc/GMT-1"],
  ])("accepts %j as %j", (tz, expected) => {
    expect(checkTimeZone(tz)).toBe(expected);
  });

  it.each([
    ["Mars/Olympus", '"Mars/Olympus" is not a known time zone'],
    ["+01:00", "is a UTC offset, not a zone"],
    ["UTC+1", "is a UTC offset, not a zone"],
    ["", "got text"],
    [null, "got null"],
    [3, "got number 3"],
  ])("refuses %j naming the field and what is valid", (tz, message) => {
    const err = thrownHermesError(() => checkTimeZone(tz));
    expect(err.reason).toBe("invalid_params");
    expect(err.message).toContain(`tz: `);
    expect(err.message).toContain(message);
    expect(err.message).toContain("it must be an IANA time zone name such as Europe/Berlin");
    expect(err.data).toMatchObject({ field: "tz" });
  });

  it("Schedule.parse refuses a bad zone before looking at the expression", () => {
    expect(thrownHermesError(() => Schedule.parse("not cron", "Mars/Olympus", NOW)).data.field).toBe("tz");
  });
});

describe("scheduled times", () => {
  it("nextAfter is strictly after, in the schedule's zone", () => {
    const eight = Schedule.parse("0 8 * * *", "Europe/Berlin", NOW);
    expect(iso(eight.nextAfter(Date.parse("2026-01-01T06:59:59.999Z")))).toBe("2026-01-01T07:00:00.000Z");
    expect(iso(eight.nextAfter(Date.parse("2026-01-01T07:00:00.000Z")))).toBe("2026-01-02T07:00:00.000Z");
    expect(iso(eight.nextAfter(Date.parse("2026-07-01T07:00:00.000Z")))).toBe("2026-07-02T06:00:00.000Z");
  });

  it("timesBetween lists (after, upto] oldest first, the newest ones when capped", () => {
    const everySecond = Schedule.parse("* * * * * *", "UTC", NOW);
    const from = Date.parse("2026-01-01T10:00:00Z");
    expect(everySecond.timesBetween(from, from + 3_000, 10)).toEqual({
      times: [from + 1_000, from + 2_000, from + 3_000],
      more_before: false,
    });
    expect(everySecond.timesBetween(from, from + 3_500, 10).times).toEqual([from + 1_000, from + 2_000, from + 3_000]);
    expect(everySecond.timesBetween(from, from + 3_600_000, 2)).toEqual({ times: [from + 3_599_000, from + 3_600_000], more_before: true });
    expect(everySecond.timesBetween(from, from + 2_000, 2)).toEqual({ times: [from + 1_000, from + 2_000], more_before: false });
    expect(everySecond.timesBetween(from, from, 5)).toEqual({ times: [], more_before: false });
  });
});

// Europe/Berlin 2026: 02:00 CET jumps to 03:00 CEST on March 29; 03:00 CEST falls back to 02:00 CET
// on October 25, so 02:00-02:59 happens twice (first at UTC+2, then at UTC+1).
describe("daylight saving time (croner, Europe/Berlin)", () => {
  const berlin = (expression: string) => Schedule.parse(expression, "Europe/Berlin", NOW);

  it("spring forward: a fixed time in the gap (02:30) runs once, at 03:00 CEST, the first valid time after it", () => {
    expect(forward(berlin("30 2 * * *"), "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z")).toEqual([
      "2026-03-28T01:30:00.000Z", // 02:30 CET
      "2026-03-29T01:00:00.000Z", // 03:00 CEST: 02:30 does not exist
      "2026-03-30T00:30:00.000Z", // 02:30 CEST
    ]);
    expect(forward(berlin("0 30 2 * * *"), "2026-03-29T00:00:00Z", "2026-03-30T00:00:00Z")).toEqual(["2026-03-29T01:00:00.000Z"]);
  });

  it("spring forward: a list of fixed times keeps each of them, the one in the gap moved after it", () => {
    expect(forward(berlin("30 2,14 * * *"), "2026-03-29T00:00:00Z", "2026-03-30T00:00:00Z")).toEqual([
      "2026-03-29T01:00:00.000Z", // 03:00 CEST for 02:30
      "2026-03-29T12:30:00.000Z", // 14:30 CEST
    ]);
  });

  it("spring forward: an interval skips the times that do not exist", () => {
    expect(forward(berlin("*/30 2 * * *"), "2026-03-28T23:00:00Z", "2026-03-30T00:00:00Z")).toEqual([]);
    const hourly = forward(berlin("0 * * * *"), "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z");
    expect(hourly).toHaveLength(23);
    expect(hourly.slice(0, 3)).toEqual(["2026-03-28T23:00:00.000Z", "2026-03-29T00:00:00.000Z", "2026-03-29T01:00:00.000Z"]); // 00:00, 01:00 CET, 03:00 CEST
  });

  it("fall back: a fixed time in the repeated hour (02:30) runs once, at its first occurrence (CEST)", () => {
    expect(forward(berlin("30 2 * * *"), "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z")).toEqual([
      "2026-10-24T00:30:00.000Z", // 02:30 CEST
      "2026-10-25T00:30:00.000Z", // 02:30 CEST, the first of the two; not again at 01:30Z (02:30 CET)
      "2026-10-26T01:30:00.000Z", // 02:30 CET
    ]);
  });

  it("fall back: an interval runs on both occurrences of the repeated hour", () => {
    expect(forward(berlin("*/30 2 * * *"), "2026-10-24T23:00:00Z", "2026-10-25T23:00:00Z")).toEqual([
      "2026-10-25T00:00:00.000Z", // 02:00 CEST
      "2026-10-25T00:30:00.000Z", // 02:30 CEST
      "2026-10-25T01:00:00.000Z", // 02:00 CET
      "2026-10-25T01:30:00.000Z", // 02:30 CET
    ]);
    expect(forward(berlin("0 * * * *"), "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z")).toHaveLength(25);
  });

  it.each([
    ["30 2 * * *", "2026-03-27T00:00:00Z", "2026-04-01T00:00:00Z"],
    ["*/30 2 * * *", "2026-03-28T00:00:00Z", "2026-03-30T00:00:00Z"],
    ["30 2 * * *", "2026-10-23T00:00:00Z", "2026-10-28T00:00:00Z"],
    ["*/30 2 * * *", "2026-10-24T00:00:00Z", "2026-10-26T00:00:00Z"],
    ["*/20 * * * * *", "2026-10-25T00:55:00Z", "2026-10-25T01:05:00Z"],
    ["0 * * * *", "2026-03-28T20:00:00Z", "2026-03-29T05:00:00Z"],
  ])("walking back (misfire accounting) finds what walking forward finds: %s", (expression, from, to) => {
    const schedule = berlin(expression);
    const back = schedule.timesBetween(Date.parse(from) - 1, Date.parse(to) - 1, 1_000);
    expect(back.times.map(iso)).toEqual(forward(schedule, from, to));
    expect(back.more_before).toBe(false);
  });
});
