import type { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import type { MisfirePolicy } from "./misfire.js";
import type { RoutineTrigger } from "./run.js";
import { Schedule } from "./schedule.js";
import { MAX_TIMER_DELAY_MS, RoutineScheduler, type ScheduledRoutine, type SchedulerEffect } from "./scheduler.js";

const T = (hhmmss: string) => Date.parse(`2026-05-04T${hhmmss}Z`);
/** `10:05` for a whole minute, `12:00:02` for a second, `10:00:01.500` otherwise. */
const hms = (ms: number | null) =>
  ms === null
    ? null
    : new Date(ms)
        .toISOString()
        .slice(11, 23)
        .replace(/\.000$/, "")
        .replace(/^(\d\d:\d\d):00$/, "$1");

function routine(
  id: string,
  expression: string,
  cursor: number,
  options: { misfire?: MisfirePolicy; grace?: number; paused?: boolean } = {},
): ScheduledRoutine {
  return {
    routine_id: id,
    schedule: Schedule.parse(expression, "UTC", cursor),
    misfire: options.misfire ?? "skip",
    grace_seconds: options.grace ?? 60,
    paused: options.paused ?? false,
    cursor,
  };
}

interface Started {
  routine_id: string;
  trigger: RoutineTrigger;
  scheduled_for: number | null;
  started_at: number;
}

/**
 * The shell, simulated: one timer, runs that end after `runMs`, and what a store would keep (the
 * cursors, missed and skipped times). The timer fires `lagMs` after the time it was armed for.
 */
class Shell {
  readonly scheduler = new RoutineScheduler();
  now: number;
  timerAt: number | null = null;
  readonly started: Started[] = [];
  readonly missed: { routine_id: string; time: number }[] = [];
  readonly skipped: { routine_id: string; time: number }[] = [];
  readonly cursors = new Map<string, number>();
  readonly moreBefore: string[] = [];
  private readonly ends: { at: number; routine_id: string }[] = [];
  maxConcurrentPerRoutine = 0;

  constructor(
    start: number,
    private readonly runMs: (routineId: string) => number = () => 200,
    private readonly lagMs = 3,
  ) {
    this.now = start;
  }

  apply(effects: SchedulerEffect[]): void {
    expect(effects.at(-1)?.kind).toBe("arm_timer");
    expect(effects.filter((e) => e.kind === "arm_timer")).toHaveLength(1);
    for (const effect of effects) {
      switch (effect.kind) {
        case "record_missed":
          this.missed.push(...effect.times.map((time) => ({ routine_id: effect.routine_id, time })));
          if (effect.more_before) this.moreBefore.push(effect.routine_id);
          break;
        case "record_skipped_overlap":
          this.skipped.push(...effect.times.map((time) => ({ routine_id: effect.routine_id, time })));
          break;
        case "save_cursor":
          this.cursors.set(effect.routine_id, effect.cursor);
          break;
        case "start_run": {
          this.started.push({
            routine_id: effect.routine_id,
            trigger: effect.trigger,
            scheduled_for: effect.scheduled_for,
            started_at: this.now,
          });
          this.ends.push({ at: this.now + this.runMs(effect.routine_id), routine_id: effect.routine_id });
          const running = this.ends.filter((e) => e.routine_id === effect.routine_id).length;
          this.maxConcurrentPerRoutine = Math.max(this.maxConcurrentPerRoutine, running);
          break;
        }
        case "arm_timer":
          if (effect.at !== null) expect(effect.at).toBeLessThanOrEqual(this.now + MAX_TIMER_DELAY_MS);
          this.timerAt = effect.at;
          break;
      }
    }
  }

  /** Runs the event loop (timer fires and run ends, in time order) until `end`. */
  runUntil(end: number): void {
    for (let steps = 0; steps < 100_000; steps++) {
      this.ends.sort((a, b) => a.at - b.at);
      const nextEnd = this.ends[0]?.at ?? Number.POSITIVE_INFINITY;
      const nextFire = this.timerAt === null ? Number.POSITIVE_INFINITY : Math.max(this.timerAt, this.now) + this.lagMs;
      const next = Math.min(nextEnd, nextFire);
      if (next > end) {
        this.now = end;
        return;
      }
      this.now = next;
      if (nextEnd <= nextFire) this.apply(this.scheduler.runEnded(this.ends.shift()!.routine_id, this.now));
      else this.apply(this.scheduler.tick(this.now));
    }
    throw new Error("the simulation did not settle");
  }

  /** The routine as the store would load it after a restart: its definition, with the saved cursor. */
  reloaded(job: ScheduledRoutine): ScheduledRoutine {
    return { ...job, cursor: this.cursors.get(job.routine_id) ?? job.cursor };
  }
}

describe("a 6-field schedule firing every second", () => {
  it("runs 60 times in a simulated minute, each at its second, never two at once", () => {
    const start = T("12:00:00");
    const shell = new Shell(start);
    shell.apply(shell.scheduler.upsert(routine("r1", "* * * * * *", start), start));
    shell.runUntil(start + 60_500);
    expect(shell.started).toHaveLength(60);
    expect(shell.started.map((s) => s.scheduled_for)).toEqual(Array.from({ length: 60 }, (_, i) => start + (i + 1) * 1000));
    expect(shell.started.every((s) => s.trigger === "schedule" && s.started_at - s.scheduled_for! === 3)).toBe(true);
    expect(shell.missed).toEqual([]);
    expect(shell.skipped).toEqual([]);
    expect(shell.maxConcurrentPerRoutine).toBe(1);
    expect(shell.cursors.get("r1")).toBe(start + 60_000);
  });

  it("overlap: runs of 2.5 s skip the two seconds they cover; every second is accounted for once", () => {
    const start = T("12:00:00");
    const shell = new Shell(start, () => 2_500);
    shell.apply(shell.scheduler.upsert(routine("r1", "* * * * * *", start), start));
    shell.runUntil(start + 60_500);
    const startedAt = shell.started.map((s) => (s.scheduled_for! - start) / 1000);
    expect(startedAt).toEqual(Array.from({ length: 20 }, (_, i) => 1 + 3 * i));
    expect(shell.skipped).toHaveLength(40);
    expect(shell.skipped.every((s) => !startedAt.includes((s.time - start) / 1000))).toBe(true);
    const accounted = [...shell.started.map((s) => s.scheduled_for!), ...shell.skipped.map((s) => s.time)].sort((a, b) => a - b);
    expect(accounted).toEqual(Array.from({ length: 60 }, (_, i) => start + (i + 1) * 1000));
    expect(shell.maxConcurrentPerRoutine).toBe(1);
  });

  it("two routines share the one timer and do not hold each other up", () => {
    const start = T("12:00:00");
    const shell = new Shell(start, (id) => (id === "slow" ? 10_000 : 100));
    shell.apply(shell.scheduler.upsert(routine("fast", "* * * * * *", start), start));
    shell.apply(shell.scheduler.upsert(routine("slow", "*/2 * * * * *", start), start));
    shell.runUntil(start + 10_500);
    expect(shell.started.filter((s) => s.routine_id === "fast")).toHaveLength(10);
    expect(shell.started.filter((s) => s.routine_id === "slow").map((s) => hms(s.scheduled_for))).toEqual(["12:00:02"]);
    expect(shell.skipped.map((s) => `${s.routine_id} ${hms(s.time)}`)).toEqual([
      "slow 12:00:04",
      "slow 12:00:06",
      "slow 12:00:08",
      "slow 12:00:10",
    ]);
  });
});

describe("a gateway stopped across two scheduled times, then started", () => {
  // Every five minutes; the gateway runs 10:00, stops at 10:02, starts again at 10:12:30.
  function outage(misfire: MisfirePolicy, grace = 60) {
    const first = new Shell(T("09:58:00"));
    const job = routine("r1", "*/5 * * * *", T("09:58:00"), { misfire, grace });
    first.apply(first.scheduler.upsert(job, first.now));
    first.runUntil(T("10:02:00"));
    expect(first.started.map((s) => hms(s.scheduled_for))).toEqual(["10:00"]);

    const second = new Shell(T("10:12:30"));
    second.apply(second.scheduler.upsert(first.reloaded(job), second.now));
    second.apply(second.scheduler.tick(second.now));
    const atStart = {
      missed: second.missed.map((m) => hms(m.time)),
      started: second.started.map((s) => [s.trigger, hms(s.scheduled_for)]),
    };
    second.runUntil(T("10:20:30"));
    return { atStart, second };
  }

  it("skip: both times are recorded missed and nothing runs until 10:15", () => {
    const { atStart, second } = outage("skip");
    expect(atStart).toEqual({ missed: ["10:05", "10:10"], started: [] });
    expect(second.started.map((s) => [s.trigger, hms(s.scheduled_for)])).toEqual([
      ["schedule", "10:15"],
      ["schedule", "10:20"],
    ]);
  });

  it("run-once: both are recorded missed and exactly one catch-up run starts at once", () => {
    const { atStart, second } = outage("run-once");
    expect(atStart).toEqual({ missed: ["10:05", "10:10"], started: [["catch_up", "10:10"]] });
    expect(second.started.filter((s) => s.trigger === "catch_up")).toHaveLength(1);
    expect(second.started.map((s) => [s.trigger, hms(s.scheduled_for)])).toEqual([
      ["catch_up", "10:10"],
      ["schedule", "10:15"],
      ["schedule", "10:20"],
    ]);
    expect(second.missed).toHaveLength(2);
  });

  it("back within the grace of the second time: it runs late as scheduled, the first is missed", () => {
    const { atStart } = outage("run-once", 180);
    expect(atStart).toEqual({ missed: ["10:05"], started: [["schedule", "10:10"]] });
  });

  it("a day down on a per-minute routine records the newest times, flags the rest, and catches up once", () => {
    const shell = new Shell(T("10:00:30"));
    shell.apply(
      shell.scheduler.upsert(routine("r1", "* * * * *", T("10:00:30") - 86_400_000, { misfire: "run-once", grace: 10 }), shell.now),
    );
    shell.apply(shell.scheduler.tick(shell.now));
    expect(shell.started).toEqual([{ routine_id: "r1", trigger: "catch_up", scheduled_for: T("10:00:00"), started_at: T("10:00:30") }]);
    expect(shell.missed.length).toBeGreaterThan(1);
    expect(shell.moreBefore).toEqual(["r1"]);
  });
});

describe("pause and resume", () => {
  it("times while paused are neither run nor missed; a resumed routine fires at its next time", () => {
    const shell = new Shell(T("10:00:30"));
    shell.apply(shell.scheduler.upsert(routine("r1", "*/5 * * * *", T("10:00:30"), { misfire: "run-once" }), shell.now));
    shell.runUntil(T("10:01:00"));
    shell.apply(shell.scheduler.pause("r1", shell.now));
    expect(shell.timerAt).toBeNull();
    shell.runUntil(T("10:17:00"));
    shell.apply(shell.scheduler.resume("r1", shell.now));
    expect(shell.cursors.get("r1")).toBe(T("10:17:00"));
    expect(shell.scheduler.nextRun("r1", shell.now)).toBe(T("10:20:00"));
    shell.runUntil(T("10:21:00"));
    expect(shell.missed).toEqual([]);
    expect(shell.started.map((s) => [s.trigger, hms(s.scheduled_for)])).toEqual([["schedule", "10:20"]]);
  });

  it("a paused routine stays paused across a restart, and cron list shows no next run", () => {
    const scheduler = new RoutineScheduler();
    const effects = scheduler.upsert(routine("r1", "* * * * *", T("09:00:00"), { paused: true }), T("10:00:00"));
    expect(effects).toEqual([{ kind: "arm_timer", at: null }]);
    expect(scheduler.tick(T("10:00:00"))).toEqual([{ kind: "arm_timer", at: null }]);
    expect(scheduler.nextRun("r1", T("10:00:00"))).toBeNull();
  });

  it("resuming a routine that is not paused changes nothing", () => {
    const scheduler = new RoutineScheduler();
    scheduler.upsert(routine("r1", "*/5 * * * *", T("10:00:00")), T("10:00:00"));
    expect(scheduler.resume("r1", T("10:03:00"))).toEqual([{ kind: "arm_timer", at: T("10:03:30") }]);
  });

  it("pausing lets a running run finish", () => {
    const shell = new Shell(T("10:04:59"), () => 30_000);
    shell.apply(shell.scheduler.upsert(routine("r1", "*/5 * * * *", T("10:04:59")), shell.now));
    shell.runUntil(T("10:05:10"));
    shell.apply(shell.scheduler.pause("r1", shell.now));
    expect(shell.scheduler.isRunning("r1")).toBe(true);
    shell.runUntil(T("10:06:00"));
    expect(shell.scheduler.isRunning("r1")).toBe(false);
  });
});

describe("run now", () => {
  it("runs at once, paused or not, without moving the schedule", () => {
    const scheduler = new RoutineScheduler();
    scheduler.upsert(routine("r1", "*/5 * * * *", T("10:00:00"), { paused: true }), T("10:00:00"));
    expect(scheduler.runNow("r1", T("10:01:00"))).toEqual([
      { kind: "start_run", routine_id: "r1", trigger: "manual", scheduled_for: null, late_ms: 0 },
      { kind: "arm_timer", at: null },
    ]);
  });

  it("is refused while the routine runs, and a scheduled time during a manual run is skipped", () => {
    const shell = new Shell(T("10:04:00"), () => 120_000);
    shell.apply(shell.scheduler.upsert(routine("r1", "*/5 * * * *", T("10:04:00")), shell.now));
    shell.apply(shell.scheduler.runNow("r1", shell.now));
    let refused: HermesError | undefined;
    try {
      shell.scheduler.runNow("r1", shell.now + 1_000);
    } catch (err) {
      refused = err as HermesError;
    }
    expect(refused?.reason).toBe("refused");
    expect(refused?.message).toContain("one run at a time");
    shell.runUntil(T("10:06:30"));
    expect(shell.skipped.map((s) => hms(s.time))).toEqual(["10:05"]);
    expect(shell.started.map((s) => s.trigger)).toEqual(["manual"]);
  });

  it("an unknown routine is not_found", () => {
    expect(() => new RoutineScheduler().runNow("nope", 0)).toThrow(/routine nope is not scheduled/);
  });
});

describe("job changes and the timer", () => {
  it("with no routines there is no timer; removing a running routine ignores its end", () => {
    const scheduler = new RoutineScheduler();
    expect(scheduler.tick(T("10:00:00"))).toEqual([{ kind: "arm_timer", at: null }]);
    scheduler.upsert(routine("r1", "* * * * * *", T("10:00:00")), T("10:00:00"));
    scheduler.tick(T("10:00:01"));
    expect(scheduler.isRunning("r1")).toBe(true);
    expect(scheduler.remove("r1", T("10:00:01.5"))).toEqual([{ kind: "arm_timer", at: null }]);
    expect(scheduler.runEnded("r1", T("10:00:02"))).toEqual([{ kind: "arm_timer", at: null }]);
  });

  it("a distant next time arms the timer at most 30 s ahead; the early tick does nothing but re-arm", () => {
    const scheduler = new RoutineScheduler();
    expect(scheduler.upsert(routine("r1", "0 8 * * *", T("10:00:00")), T("10:00:00"))).toEqual([{ kind: "arm_timer", at: T("10:00:30") }]);
    expect(scheduler.tick(T("10:00:30"))).toEqual([{ kind: "arm_timer", at: T("10:01:00") }]);
    expect(scheduler.nextRun("r1", T("10:00:30"))).toBe(Date.parse("2026-05-05T08:00:00Z"));
  });

  it("an edited schedule replaces the old one and keeps a run in progress", () => {
    const scheduler = new RoutineScheduler();
    scheduler.upsert(routine("r1", "* * * * * *", T("10:00:00")), T("10:00:00"));
    scheduler.tick(T("10:00:01"));
    scheduler.upsert(routine("r1", "*/10 * * * *", T("10:00:01")), T("10:00:01"));
    expect(scheduler.isRunning("r1")).toBe(true);
    expect(scheduler.nextRun("r1", T("10:00:01"))).toBe(T("10:10:00"));
  });

  it("a clock set back leaves nothing to run twice", () => {
    const shell = new Shell(T("10:00:00"));
    shell.apply(shell.scheduler.upsert(routine("r1", "* * * * *", T("10:00:00")), shell.now));
    shell.runUntil(T("10:03:30"));
    expect(shell.started).toHaveLength(3);
    shell.now = T("10:01:30"); // the wall clock jumps back two minutes
    shell.apply(shell.scheduler.tick(shell.now));
    expect(shell.timerAt).toBe(T("10:02:00"));
    shell.runUntil(T("10:04:30"));
    expect(shell.started.map((s) => hms(s.scheduled_for))).toEqual(["10:01", "10:02", "10:03", "10:04"]);
  });
});
