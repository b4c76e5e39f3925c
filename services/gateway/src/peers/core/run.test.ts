import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import {
  applyRunEvent,
  canApply,
  INTERRUPTED_AT_START,
  isRunState,
  isTerminalRun,
  RUN_STATES,
  type RunEvent,
  type RunRecord,
  type RunState,
  recoverRun,
} from "./run.js";

const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);
const T1 = T0 + 1500;

function run(status: RunState, extra: Partial<RunRecord> = {}): RunRecord {
  return {
    run_id: "run_1",
    kind: "run",
    status,
    profile: "bob",
    session_id: "ses_1",
    sender_profile: "alice",
    sender_gateway: "gw-a",
    sender_name: "Alice",
    input: "do it",
    fingerprint: "f",
    idempotency_key: null,
    reply: null,
    reason: null,
    error: null,
    created_at: new Date(T0).toISOString(),
    started_at: status === "queued" ? null : new Date(T0).toISOString(),
    ended_at: null,
    ...extra,
  };
}

const EVENTS: RunEvent[] = [
  { kind: "start" },
  { kind: "complete", reply: "done" },
  { kind: "fail", reason: "provider_rate_limit", error: "429" },
  { kind: "cancel", why: "stopped by the peer" },
  { kind: "interrupt", why: "gateway stopped" },
];

/** The whole transition table: every (state, event) pair, allowed or refused. */
const TABLE: Record<RunState, Partial<Record<RunEvent["kind"], RunState>>> = {
  queued: { start: "running", fail: "failed", cancel: "cancelled" },
  running: { complete: "completed", fail: "failed", cancel: "cancelled", interrupt: "interrupted" },
  completed: {},
  failed: {},
  cancelled: {},
  interrupted: {},
};

describe("run state machine", () => {
  for (const state of RUN_STATES) {
    for (const event of EVENTS) {
      const to = TABLE[state][event.kind];
      it(`${state} --${event.kind}--> ${to ?? "refused"}`, () => {
        expect(canApply(state, event.kind)).toBe(to !== undefined);
        if (to === undefined) {
          let caught: unknown;
          try {
            applyRunEvent(run(state), event, T1);
          } catch (err) {
            caught = err;
          }
          expect(caught).toBeInstanceOf(HermesError);
          expect((caught as HermesError).reason).toBe("refused");
          expect((caught as HermesError).message).toContain(`run run_1 is ${state}`);
          return;
        }
        const next = applyRunEvent(run(state), event, T1);
        expect(next.status).toBe(to);
        expect(isTerminalRun(next.status)).toBe(to !== "running");
      });
    }
  }

  it("start stamps started_at; terminal events stamp ended_at", () => {
    const started = applyRunEvent(run("queued"), { kind: "start" }, T1);
    expect(started).toMatchObject({ status: "running", started_at: new Date(T1).toISOString(), ended_at: null });
    const done = applyRunEvent(started, { kind: "complete", reply: "the answer" }, T1 + 10);
    expect(done).toMatchObject({
      status: "completed",
      reply: "the answer",
      reason: null,
      error: null,
      ended_at: new Date(T1 + 10).toISOString(),
    });
  });

  it("fail records the typed reason and error; cancel and interrupt record why", () => {
    expect(applyRunEvent(run("running"), { kind: "fail", reason: "context_overflow", error: "too long" }, T1)).toMatchObject({
      status: "failed",
      reason: "context_overflow",
      error: "too long",
    });
    expect(applyRunEvent(run("queued"), { kind: "cancel", why: "stopped" }, T1)).toMatchObject({
      status: "cancelled",
      error: "stopped",
      reason: null,
    });
    expect(applyRunEvent(run("running"), { kind: "interrupt", why: "bye" }, T1)).toMatchObject({ status: "interrupted", error: "bye" });
  });

  it("does not mutate its input", () => {
    const before = run("queued");
    const copy = structuredClone(before);
    applyRunEvent(before, { kind: "start" }, T1);
    expect(before).toEqual(copy);
  });

  it("at start a running run becomes interrupted (never re-run); other states are kept", () => {
    expect(recoverRun(run("running"), T1)).toMatchObject({
      status: "interrupted",
      error: INTERRUPTED_AT_START,
      ended_at: new Date(T1).toISOString(),
    });
    for (const state of RUN_STATES.filter((s) => s !== "running")) {
      const r = run(state);
      expect(recoverRun(r, T1)).toBe(r);
    }
  });

  it("knows its states", () => {
    expect(RUN_STATES.filter(isTerminalRun)).toEqual(["completed", "failed", "cancelled", "interrupted"]);
    expect(isRunState("running")).toBe(true);
    expect(isRunState("settled")).toBe(false);
    expect(isRunState(3)).toBe(false);
  });
});
