import { HermesError, isoTime } from "@hermes/common/pure";
import type { DeliveryReason } from "@hermes/contract";

/**
 * Peer runs: one turn in a profile's canonical Bot Chat, started by another gateway.
 *
 *   queued ──start──▶ running ──complete──▶ completed
 *     │                 ├──fail──▶ failed
 *     │                 ├──cancel (peer stop)──▶ cancelled
 *     │                 └──interrupt (gateway stopped / restarted mid-turn)──▶ interrupted
 *     ├──cancel──▶ cancelled        (stopped before it started)
 *     └──fail──▶ failed             (could not start: the profile went away)
 *
 * An interrupted run is never re-run: its turn may have had effects (messages sent). A queued
 * one never started, so it is queued again after a restart.
 */
export const RUN_STATES = ["queued", "running", "completed", "failed", "cancelled", "interrupted"] as const;
export type RunState = (typeof RUN_STATES)[number];

export const TERMINAL_RUN_STATES: ReadonlySet<RunState> = new Set(["completed", "failed", "cancelled", "interrupted"]);

export function isTerminalRun(state: RunState): boolean {
  return TERMINAL_RUN_STATES.has(state);
}

export function isRunState(value: unknown): value is RunState {
  return typeof value === "string" && (RUN_STATES as readonly string[]).includes(value);
}

/** `dm` waits for the reply in the same call; `run` answers with the id at once. The turn is the same. */
export type RunKind = "dm" | "run";

export interface RunRecord {
  run_id: string;
  kind: RunKind;
  status: RunState;
  /** The profile on this gateway whose canonical Bot Chat runs it. */
  profile: string;
  session_id: string;
  sender_profile: string;
  sender_gateway: string;
  /** Display name for the attribution prefix (the sender profile when blank). */
  sender_name: string;
  /** The message verbatim, without the attribution prefix. */
  input: string;
  /** What "the same input" means for idempotency (see runFingerprint). */
  fingerprint: string;
  idempotency_key: string | null;
  reply: string | null;
  reason: DeliveryReason | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
}

export type RunEvent =
  | { kind: "start" }
  | { kind: "complete"; reply: string }
  | { kind: "fail"; reason: DeliveryReason; error: string }
  | { kind: "cancel"; why: string }
  | { kind: "interrupt"; why: string };

/** The states each event may leave from. Everything else is an illegal transition. */
const ALLOWED: Record<RunEvent["kind"], readonly RunState[]> = {
  start: ["queued"],
  complete: ["running"],
  fail: ["queued", "running"],
  cancel: ["queued", "running"],
  interrupt: ["running"],
};

export function canApply(state: RunState, event: RunEvent["kind"]): boolean {
  return ALLOWED[event].includes(state);
}

/** Applies an event; refuses (typed) one the state machine does not allow, e.g. completing a cancelled run. */
export function applyRunEvent(run: RunRecord, event: RunEvent, now: number): RunRecord {
  if (!canApply(run.status, event.kind)) {
    throw new HermesError("refused", `run ${run.run_id} is ${run.status}; it cannot ${event.kind}`, {
      data: { run_id: run.run_id, status: run.status, event: event.kind },
    });
  }
  const at = isoTime(now);
  switch (event.kind) {
    case "start":
      return { ...run, status: "running", started_at: at };
    case "complete":
      return { ...run, status: "completed", reply: event.reply, reason: null, error: null, ended_at: at };
    case "fail":
      return { ...run, status: "failed", reason: event.reason, error: event.error, ended_at: at };
    case "cancel":
      return { ...run, status: "cancelled", error: event.why, ended_at: at };
    case "interrupt":
      return { ...run, status: "interrupted", error: event.why, ended_at: at };
  }
}

export const INTERRUPTED_AT_START = "the gateway stopped while this run was running; it was not re-run (its turn may have had effects)";

/**
 * Start-up: a run that was running when the process went away has an unknown outcome and becomes
 * interrupted (never re-run); every other state is kept (queued ones are queued again).
 */
export function recoverRun(run: RunRecord, now: number): RunRecord {
  return run.status === "running" ? applyRunEvent(run, { kind: "interrupt", why: INTERRUPTED_AT_START }, now) : run;
}
