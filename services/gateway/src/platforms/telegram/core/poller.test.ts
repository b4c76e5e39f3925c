import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ApiFailure } from "./api-failure.js";
import {
  CONFLICT_MESSAGE,
  DEFAULT_POLLER_SETTINGS,
  initialPollerState,
  type PollerEffect,
  type PollerEvent,
  type PollerSettings,
  type PollerState,
  stepPoller,
} from "./poller.js";

const update = (id: number) => ({ update_id: id, message: { message_id: id, chat: { id: 42, type: "private" }, text: `m${id}` } });

/** Drives the machine; `op` in events defaults to the operation in flight. */
class Driver {
  state: PollerState = initialPollerState();
  effects: PollerEffect[] = [];
  log: PollerEffect[] = [];

  constructor(
    private readonly settings: PollerSettings = DEFAULT_POLLER_SETTINGS,
    private readonly random: () => number = () => 0.5,
  ) {}

  send(event: PollerEvent | { type: string; [k: string]: unknown }): PollerEffect[] {
    const withOp = "op" in event || ["start", "singleton", "stop"].includes(event.type) ? event : { ...event, op: this.state.op };
    const step = stepPoller(this.state, withOp as PollerEvent, this.settings, this.random);
    this.state = step.state;
    this.effects = step.effects;
    this.log.push(...step.effects.filter((e) => e.type === "log"));
    return step.effects.filter((e) => e.type !== "log");
  }

  /** start → prepare → prepared: the first poll. */
  started(offset?: number): PollerEffect[] {
    expect(this.send({ type: "start", offset })).toEqual([{ type: "prepare", op: 1 }]);
    expect(this.state.status).toBe("starting");
    return this.send({ type: "prepared" });
  }
}

const fail = (failure: ApiFailure) => ({ type: "call_failed", failure });
const serverError: ApiFailure = { kind: "server_error", message: "502: Bad Gateway", status: 502 };
const conflict: ApiFailure = { kind: "conflict", message: "409: Conflict: terminated by other getUpdates request" };

describe("poller: the happy path and the offset", () => {
  it("polls, hands over each update in order with its next offset, then polls past them", () => {
    const d = new Driver();
    expect(d.started()).toEqual([{ type: "poll", op: 2, offset: undefined, timeout_seconds: 30 }]);
    expect(d.state.status).toBe("polling");
    expect(d.send({ type: "polled", updates: [update(6), update(5)], elapsed_ms: 10 })).toEqual([
      { type: "handle", op: 3, update_id: 5, update: update(5), next_offset: 6, skip: false },
    ]);
    expect(d.state.offset).toBeUndefined();
    expect(d.send({ type: "handled" })).toEqual([{ type: "handle", op: 4, update_id: 6, update: update(6), next_offset: 7, skip: false }]);
    expect(d.state.offset).toBe(6);
    expect(d.send({ type: "handled" })).toEqual([{ type: "poll", op: 5, offset: 7, timeout_seconds: 30 }]);
    expect(d.state).toMatchObject({ offset: 7, confirmed: 7, queue: [] });
  });

  it("a restart starts from the stored offset", () => {
    const d = new Driver();
    expect(d.started(7)).toEqual([{ type: "poll", op: 2, offset: 7, timeout_seconds: 30 }]);
  });

  it("drops duplicates and updates below the offset, and ignores items without update_id", () => {
    const d = new Driver();
    d.started(7);
    const effects = d.send({
      type: "polled",
      updates: [update(8), update(6), { message: {} }, "junk", update(8), update(7)],
      elapsed_ms: 10,
    });
    expect(effects).toMatchObject([{ type: "handle", update_id: 7 }]);
    expect(d.state.queue.map((q) => q.update_id)).toEqual([7, 8]);
    expect(d.log).toContainEqual({
      type: "log",
      level: "warn",
      message: expect.stringContaining("3 update(s) without a usable update_id"),
    });
  });

  it("a batch with nothing usable is a protocol failure with a back-off, never an instant re-poll", () => {
    const d = new Driver();
    d.started(7);
    expect(d.send({ type: "polled", updates: [update(3), { nope: 1 }], elapsed_ms: 10 })).toEqual([{ type: "wait", op: 3, ms: 1000 }]);
    expect(d.state).toMatchObject({ status: "backoff", last_error: { kind: "protocol" } });
  });

  it("an empty answer after a real long poll polls again at once; one that came back instantly waits first", () => {
    const d = new Driver();
    d.started(7);
    expect(d.send({ type: "polled", updates: [], elapsed_ms: 30_000 })).toEqual([{ type: "poll", op: 3, offset: 7, timeout_seconds: 30 }]);
    expect(d.send({ type: "polled", updates: [], elapsed_ms: 3 })).toEqual([{ type: "wait", op: 4, ms: 1000 }]);
    expect(d.state.status).toBe("polling");
    expect(d.send({ type: "timer" })).toEqual([{ type: "poll", op: 5, offset: 7, timeout_seconds: 30 }]);
  });

  it("ignores outcomes of calls that are no longer in flight", () => {
    const d = new Driver();
    d.started();
    const before = d.state;
    expect(d.send({ type: "polled", op: 1, updates: [update(1)], elapsed_ms: 1 })).toEqual([]);
    expect(d.send({ type: "handled", op: 2 })).toEqual([]);
    expect(d.send({ type: "timer", op: 2 })).toEqual([]);
    expect(d.state).toEqual(before);
  });
});

describe("poller: failures", () => {
  it("429 waits exactly retry_after, then polls again from the same offset", () => {
    const d = new Driver();
    d.started(7);
    expect(d.send(fail({ kind: "rate_limited", message: "429: Too Many Requests: retry after 7", retry_after_seconds: 7 }))).toEqual([
      { type: "wait", op: 3, ms: 7000 },
    ]);
    expect(d.state).toMatchObject({ status: "backoff", scheduled_delay_ms: 7000, last_error: { kind: "rate_limited" } });
    expect(d.send({ type: "timer" })).toEqual([{ type: "poll", op: 4, offset: 7, timeout_seconds: 30 }]);
    // The retry is a long poll that may hold 30 s: polling, not waiting; the error is kept until it succeeds.
    expect(d.state).toMatchObject({ status: "polling", last_error: { kind: "rate_limited" } });
    d.send({ type: "polled", updates: [], elapsed_ms: 30_000 });
    expect(d.state).toMatchObject({ status: "polling", failures: 0, last_error: undefined, scheduled_delay_ms: undefined });
  });

  it("5xx and network errors back off exponentially up to the cap, and a success resets it", () => {
    const d = new Driver();
    d.started(1);
    const waits: number[] = [];
    for (let i = 0; i < 9; i++) {
      const [wait] = d.send(fail(i % 2 === 0 ? serverError : { kind: "network", message: "socket hang up" }));
      waits.push((wait as { ms: number }).ms);
      d.send({ type: "timer" });
    }
    expect(waits).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    d.send({ type: "polled", updates: [], elapsed_ms: 30_000 });
    expect(d.send(fail(serverError))).toEqual([{ type: "wait", op: expect.any(Number), ms: 1000 }]);
  });

  it("the jitter comes from the injected random", () => {
    const low = new Driver(DEFAULT_POLLER_SETTINGS, () => 0);
    low.started(1);
    expect(low.send(fail(serverError))).toMatchObject([{ ms: 800 }]);
    const high = new Driver(DEFAULT_POLLER_SETTINGS, () => 1);
    high.started(1);
    expect(high.send(fail(serverError))).toMatchObject([{ ms: 1200 }]);
  });

  it("409: state conflict, logged once per conflict, backing off; a success ends it and a new one is logged again", () => {
    const d = new Driver();
    d.started(1);
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      waits.push((d.send(fail(conflict))[0] as { ms: number }).ms);
      expect(d.state.status).toBe("conflict");
      d.send({ type: "timer" });
      expect(d.state.status).toBe("conflict");
    }
    expect(waits).toEqual([5000, 10_000, 20_000, 40_000]);
    const warnings = () => d.log.filter((l) => l.type === "log" && l.message.includes(CONFLICT_MESSAGE));
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({
      level: "warn",
      message: expect.stringContaining("another process polls this bot token (409 Conflict"),
    });
    d.send({ type: "polled", updates: [], elapsed_ms: 30_000 });
    expect(d.state.status).toBe("polling");
    d.send(fail(conflict));
    expect(warnings()).toHaveLength(2);
  });

  it("401: a long pause, then getMe again before polling", () => {
    const d = new Driver();
    d.started(1);
    expect(d.send(fail({ kind: "unauthorized", message: "401: Unauthorized" }))).toEqual([{ type: "wait", op: 3, ms: 300_000 }]);
    const advice =
      "Telegram refused the bot token (401: Unauthorized): check TELEGRAM_BOT_TOKEN (platforms.telegram.token_env) and platforms.telegram.api_root";
    expect(d.log.at(-1)).toEqual({ type: "log", level: "error", message: `${advice}; next try in 300 s` });
    expect(d.state.last_error).toEqual({ kind: "unauthorized", message: advice });
    expect(d.send({ type: "timer" })).toEqual([{ type: "prepare", op: 4 }]);
    expect(d.send({ type: "prepared" })).toEqual([{ type: "poll", op: 5, offset: 1, timeout_seconds: 30 }]);
  });

  it("a failed prepare backs off like a failed poll", () => {
    const d = new Driver();
    d.send({ type: "start", offset: undefined });
    expect(d.send(fail({ kind: "network", message: "ECONNREFUSED" }))).toEqual([{ type: "wait", op: 2, ms: 1000 }]);
    expect(d.send({ type: "timer" })).toEqual([{ type: "prepare", op: 3 }]);
  });

  it("a failed handle is retried after a back-off without moving the offset; after the limit it is skipped", () => {
    const d = new Driver();
    d.started(1);
    d.send({ type: "polled", updates: [update(1), update(2)], elapsed_ms: 1 });
    for (let attempt = 1; attempt <= DEFAULT_POLLER_SETTINGS.max_handle_attempts; attempt++) {
      expect(d.send({ type: "handle_failed", message: "database is locked" })).toMatchObject([{ type: "wait" }]);
      expect(d.state).toMatchObject({ status: "backoff", offset: 1, last_error: { kind: "handler", message: "database is locked" } });
      const [again] = d.send({ type: "timer" });
      expect(again).toMatchObject({ type: "handle", update_id: 1, skip: attempt === DEFAULT_POLLER_SETTINGS.max_handle_attempts });
    }
    expect(d.log.at(-1)).toMatchObject({ level: "error", message: "update 1 could not be handled in 5 attempts; skipping it" });
    expect(d.send({ type: "handled" })).toMatchObject([{ type: "handle", update_id: 2, skip: false }]);
    expect(d.state.offset).toBe(2);
  });

  it("never a hot loop: every failure schedules a wait, and no call starts without one", () => {
    const failure = fc.constantFrom<ApiFailure>(
      serverError,
      conflict,
      { kind: "network", message: "" },
      { kind: "protocol", message: "" },
      { kind: "bad_request", message: "", status: 400 },
      { kind: "unauthorized", message: "" },
      { kind: "rate_limited", message: "" },
      { kind: "rate_limited", message: "", retry_after_seconds: 1 },
    );
    fc.assert(
      fc.property(fc.array(failure, { minLength: 1, maxLength: 40 }), fc.double({ min: 0, max: 1, noNaN: true }), (failures, r) => {
        const d = new Driver(DEFAULT_POLLER_SETTINGS, () => r);
        d.started(1);
        for (const f of failures) {
          const effects = d.send(fail(f));
          expect(effects).toHaveLength(1);
          expect(effects[0]).toMatchObject({ type: "wait" });
          expect((effects[0] as { ms: number }).ms).toBeGreaterThanOrEqual(800);
          const next = d.send({ type: "timer" });
          expect(next).toHaveLength(1);
          expect(["poll", "prepare"]).toContain(next[0]!.type);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe("poller: the singleton", () => {
  const coordinated = { ...DEFAULT_POLLER_SETTINGS, coordinated: true };

  it("stands by until it holds the singleton", () => {
    const d = new Driver(coordinated);
    expect(d.send({ type: "start", offset: 3 })).toEqual([]);
    expect(d.state.status).toBe("standby");
    expect(d.log.at(-1)).toMatchObject({ level: "info", message: expect.stringContaining("standby") });
    expect(d.send({ type: "singleton", held: true })).toEqual([{ type: "prepare", op: 1 }]);
    expect(d.state.status).toBe("starting");
    expect(d.send({ type: "prepared" })).toEqual([{ type: "poll", op: 2, offset: 3, timeout_seconds: 30 }]);
  });

  it("losing it cancels the poll at once, without a confirming call; regaining it polls from the offset", () => {
    const d = new Driver(coordinated);
    d.send({ type: "singleton", held: true });
    d.started(3);
    expect(d.send({ type: "singleton", held: false })).toEqual([{ type: "cancel" }]);
    expect(d.state.status).toBe("standby");
    expect(d.send({ type: "polled", op: 2, updates: [update(3)], elapsed_ms: 1 })).toEqual([]);
    expect(d.send({ type: "singleton", held: true })).toEqual([{ type: "poll", op: 4, offset: 3, timeout_seconds: 30 }]);
  });

  it("losing it while an update is handled lets that one finish (its offset counts), then drops the rest of the batch", () => {
    const d = new Driver(coordinated);
    d.send({ type: "singleton", held: true });
    d.started(3);
    d.send({ type: "polled", updates: [update(3), update(4)], elapsed_ms: 1 });
    expect(d.send({ type: "singleton", held: false })).toEqual([]);
    expect(d.send({ type: "handled" })).toEqual([]);
    expect(d.state).toMatchObject({ status: "standby", offset: 4, queue: [] });
  });

  it("losing it during a back-off cancels the timer", () => {
    const d = new Driver(coordinated);
    d.send({ type: "singleton", held: true });
    d.started(3);
    d.send(fail(serverError));
    expect(d.send({ type: "singleton", held: false })).toEqual([{ type: "cancel" }]);
    expect(d.send({ type: "timer", op: 3 })).toEqual([]);
    expect(d.state.status).toBe("standby");
  });

  it("without a coordinator the singleton is irrelevant", () => {
    const d = new Driver();
    d.started(1);
    expect(d.send({ type: "singleton", held: false })).toEqual([]);
    expect(d.state.activity).toBe("poll");
  });
});

describe("poller: stop", () => {
  it("during a long poll: cancel and stop (Telegram already knows the offset)", () => {
    const d = new Driver();
    d.started(5);
    expect(d.send({ type: "stop" })).toEqual([{ type: "cancel" }]);
    expect(d.state.status).toBe("stopped");
  });

  it("during a handle: the handle finishes, then one confirming call tells Telegram the new offset", () => {
    const d = new Driver();
    d.started(5);
    d.send({ type: "polled", updates: [update(5), update(6)], elapsed_ms: 1 });
    expect(d.send({ type: "stop" })).toEqual([]);
    expect(d.send({ type: "handled" })).toEqual([{ type: "confirm", op: 4, offset: 6 }]);
    expect(d.state.queue).toEqual([]);
    expect(d.send({ type: "confirmed" })).toEqual([]);
    expect(d.state).toMatchObject({ status: "stopped", offset: 6, confirmed: 6 });
  });

  it("during a back-off: the timer is cancelled", () => {
    const d = new Driver();
    d.started(5);
    d.send(fail(serverError));
    expect(d.send({ type: "stop" })).toEqual([{ type: "cancel" }]);
    expect(d.state.status).toBe("stopped");
    expect(d.send({ type: "timer", op: 3 })).toEqual([]);
  });

  it("in standby: nothing to confirm (this gateway does not own the token)", () => {
    const d = new Driver({ ...DEFAULT_POLLER_SETTINGS, coordinated: true });
    d.send({ type: "start", offset: 5 });
    expect(d.send({ type: "stop" })).toEqual([]);
    expect(d.state.status).toBe("stopped");
  });

  it("a second start or stop does nothing", () => {
    const d = new Driver();
    d.started(5);
    expect(d.send({ type: "start", offset: 99 })).toEqual([]);
    d.send({ type: "stop" });
    expect(d.send({ type: "stop" })).toEqual([]);
    expect(d.state.offset).toBe(5);
  });
});
