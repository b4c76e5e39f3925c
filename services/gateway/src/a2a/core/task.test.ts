import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { taskRecord } from "../../../test/a2a/task-record.js";
import {
  applyTaskEvent,
  canApplyTaskEvent,
  decideContext,
  decideReplay,
  INTERRUPTED_AT_START,
  isTerminalTask,
  recoverTask,
  TASK_STATES,
  type TaskEvent,
  type TaskState,
  taskFingerprint,
} from "./task.js";

const T0 = Date.parse("2026-12-01T10:00:00.000Z");

const task = (state: TaskState = "submitted") => taskRecord({ state });

const EVENTS: Record<TaskEvent["kind"], TaskEvent> = {
  start: { kind: "start" },
  approval_wait: { kind: "approval_wait", what: "run_shell(ls)" },
  approval_resolved: { kind: "approval_resolved" },
  complete: { kind: "complete", reply: "done" },
  fail: { kind: "fail", reason: "provider_rate_limit", error: "429" },
  cancel: { kind: "cancel", why: "asked to" },
};

/** An ended task takes no event. */
const ENDED: Record<TaskEvent["kind"], "refused"> = {
  start: "refused",
  approval_wait: "refused",
  approval_resolved: "refused",
  complete: "refused",
  fail: "refused",
  cancel: "refused",
};

/** state × event → the state it leads to, or "refused". */
const TABLE: Record<TaskState, Record<TaskEvent["kind"], TaskState | "refused">> = {
  submitted: { ...ENDED, start: "working", fail: "failed", cancel: "canceled" },
  working: { ...ENDED, approval_wait: "input-required", complete: "completed", fail: "failed", cancel: "canceled" },
  "input-required": { ...ENDED, approval_resolved: "working", complete: "completed", fail: "failed", cancel: "canceled" },
  completed: ENDED,
  failed: ENDED,
  canceled: ENDED,
};

describe("the task machine", () => {
  for (const state of TASK_STATES) {
    for (const [kind, expected] of Object.entries(TABLE[state]) as [TaskEvent["kind"], TaskState | "refused"][]) {
      it(`${state} + ${kind} → ${expected}`, () => {
        expect(canApplyTaskEvent(state, kind)).toBe(expected !== "refused");
        if (expected === "refused") {
          expect(() => applyTaskEvent(task(state), EVENTS[kind], T0)).toThrow(HermesError);
          return;
        }
        const next = applyTaskEvent(task(state), EVENTS[kind], T0);
        expect(next.state).toBe(expected);
        expect(next.updated_at).toBe("2026-12-01T10:00:00.000Z");
        expect(next.ended_at).toBe(isTerminalTask(expected) ? "2026-12-01T10:00:00.000Z" : null);
      });
    }
  }

  it("keeps what each end says: the reply, the typed reason, why it was canceled; what the turn waits for only while it waits", () => {
    const working = applyTaskEvent(task(), EVENTS.start, T0);
    const waiting = applyTaskEvent(working, EVENTS.approval_wait, T0);
    expect(waiting.waiting_for).toBe("run_shell(ls)");
    expect(applyTaskEvent(waiting, EVENTS.approval_resolved, T0).waiting_for).toBeNull();
    expect(applyTaskEvent(working, EVENTS.complete, T0)).toMatchObject({ reply: "done", reason: null });
    expect(applyTaskEvent(working, EVENTS.fail, T0)).toMatchObject({ reason: "provider_rate_limit", error: "429" });
    expect(applyTaskEvent(waiting, EVENTS.cancel, T0)).toMatchObject({ state: "canceled", error: "asked to", waiting_for: null });
    expect(() => applyTaskEvent(task("completed"), EVENTS.cancel, T0)).toThrow(/is completed; it cannot cancel/);
  });

  it("at start, a task that had not ended fails with runtime_offline; an ended one stays as it was", () => {
    for (const state of ["submitted", "working", "input-required"] as const) {
      expect(recoverTask(task(state), T0)).toMatchObject({ state: "failed", reason: "runtime_offline", error: INTERRUPTED_AT_START });
    }
    for (const state of ["completed", "failed", "canceled"] as const) expect(recoverTask(task(state), T0)).toEqual(task(state));
  });
});

describe("idempotency and contexts", () => {
  it("a messageId seen before replays its task when the message is the same, and is a conflict when not", () => {
    const stored = task();
    expect(decideReplay(undefined, stored.fingerprint)).toEqual({ kind: "new" });
    expect(decideReplay(stored, taskFingerprint("alice", "hi"))).toEqual({ kind: "replay", task_id: "t-1" });
    for (const other of [taskFingerprint("alice", "hi!"), taskFingerprint("bob", "hi")]) {
      expect(() => decideReplay(stored, other)).toThrow(expect.objectContaining({ reason: "idempotency_conflict" }));
    }
    expect(taskFingerprint("a", "b\0c")).not.toBe(taskFingerprint("a\0b", "c"));
  });

  it("a contextId stays with the bot and session it began with", () => {
    expect(decideContext(undefined, "alice", "c")).toEqual({ kind: "new" });
    expect(decideContext({ profile: "alice", session_id: "s-9" }, "alice", "c")).toEqual({ kind: "bound", session_id: "s-9" });
    expect(() => decideContext({ profile: "bob", session_id: "s-9" }, "alice", "c")).toThrow(
      expect.objectContaining({ reason: "invalid_params", data: { context_id: "c", profile: "bob" } }),
    );
  });
});
