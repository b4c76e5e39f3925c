import { DELIVERY_REASONS } from "@hermes/contract";
import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import { failRun, interruptedRun, type RoutineRun, routineTurnMessage, settleRun } from "./run.js";

describe("runs", () => {
  const running: RoutineRun = {
    run_id: "run1",
    routine_id: "r1",
    state: "running",
    trigger: "schedule",
    scheduled_for: "2026-05-04T08:00:00.000Z",
    started_at: "2026-05-04T08:00:00.010Z",
    ended_at: null,
    reason: null,
    error: null,
    reply: null,
  };
  const end = Date.parse("2026-05-04T08:00:05Z");

  it("settles with the reply", () => {
    expect(settleRun(running, "3 new mails", end)).toEqual({
      ...running,
      state: "settled",
      reply: "3 new mails",
      ended_at: "2026-05-04T08:00:05.000Z",
    });
  });

  it.each(DELIVERY_REASONS.map((r) => [r]))("fails with the typed reason %s", (reason) => {
    expect(failRun(running, { reason, error: "boom" }, end)).toMatchObject({
      state: "failed",
      reason,
      error: "boom",
      ended_at: "2026-05-04T08:00:05.000Z",
    });
  });

  it("a run found running at start-up is failed runtime_offline, never re-run", () => {
    expect(interruptedRun(running, end)).toMatchObject({
      state: "failed",
      reason: "runtime_offline",
      error: expect.stringContaining("not run again"),
    });
  });

  it("only a running run can end", () => {
    const settled = settleRun(running, "ok", end);
    expect(thrownHermesError(() => settleRun(settled, "again", end)).reason).toBe("refused");
    expect(thrownHermesError(() => failRun({ ...running, state: "missed" }, { reason: "unknown", error: "x" }, end)).message).toContain(
      "is missed; only a running run can end",
    );
  });

  it("the turn message names the routine and its local time, then the prompt verbatim", () => {
    const ref = { profile: "alice", name: "Morning summary" };
    expect(routineTurnMessage(ref, "Europe/Berlin", "schedule", Date.parse("2026-03-29T06:00:00Z"), "Summarize.")).toBe(
      "Routine [bot:alice] Morning summary scheduled for 2026-03-29 08:00 Europe/Berlin:\nSummarize.",
    );
    expect(routineTurnMessage(ref, "UTC", "catch_up", Date.parse("2026-03-29T06:00:30Z"), "Go")).toBe(
      "Routine [bot:alice] Morning summary scheduled for 2026-03-29 06:00:30 UTC (catching up after missed runs):\nGo",
    );
    expect(routineTurnMessage(ref, "UTC", "manual", null, "Go")).toBe("Routine [bot:alice] Morning summary (run now):\nGo");
  });
});
