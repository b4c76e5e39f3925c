import { createHash } from "node:crypto";
import { HermesError, isoTime } from "@hermes/common/pure";
import type { DeliveryReason } from "@hermes/contract";

/**
 * An A2A task: one message from an A2A caller, run as one turn in a bot's canonical Bot Chat.
 *
 *   submitted ──start──▶ working ──complete──▶ completed
 *       │                  │ ▲
 *       │     approval_wait│ │approval_resolved
 *       │                  ▼ │
 *       │              input-required
 *       │                  │ (and working) ──fail──▶ failed ──cancel──▶ canceled
 *       ├──cancel──▶ canceled          (never started)
 *       └──fail──▶ failed              (could not start: the profile went away, the gateway restarted)
 *
 * States carry the protocol's names (the 0.3 spelling; the 1.0 wire spells them TASK_STATE_…).
 * A task never runs twice: one that was not finished when the gateway stopped is failed at the
 * next start with `runtime_offline` (its turn may have had effects, e.g. messages sent).
 */
export const TASK_STATES = ["submitted", "working", "input-required", "completed", "failed", "canceled"] as const;
export type TaskState = (typeof TASK_STATES)[number];

const TERMINAL: ReadonlySet<TaskState> = new Set(["completed", "failed", "canceled"]);

export function isTerminalTask(state: TaskState): boolean {
  return TERMINAL.has(state);
}

export function isTaskState(value: unknown): value is TaskState {
  return typeof value === "string" && (TASK_STATES as readonly string[]).includes(value);
}

/** Who called: the name behind the key (`a2a` for the gateway's own API key, else a configured caller). */
export interface A2aCaller {
  /** Scopes tasks, contexts and messageIds: a caller sees only its own. */
  id: string;
  /** For the attribution prefix. */
  name: string;
}

export interface TaskRecord {
  task_id: string;
  /** The profile whose canonical Bot Chat runs the turn. */
  profile: string;
  session_id: string;
  context_id: string;
  caller: string;
  /** The caller's messageId: the same one again answers with this task. */
  message_id: string;
  /** What "the same message" means for idempotency (taskFingerprint). */
  fingerprint: string;
  state: TaskState;
  /** The message text as the caller sent it (without the attribution prefix). */
  input: string;
  /** The caller's message as it arrived (1.0 wire JSON), for the task's history. */
  message_json: string;
  reply: string | null;
  reason: DeliveryReason | null;
  error: string | null;
  /** While input-required: what the turn waits for (an operator's approval of a tool call). */
  waiting_for: string | null;
  created_at: string;
  updated_at: string;
  ended_at: string | null;
}

export type TaskEvent =
  | { kind: "start" }
  | { kind: "approval_wait"; what: string }
  | { kind: "approval_resolved" }
  | { kind: "complete"; reply: string }
  | { kind: "fail"; reason: DeliveryReason; error: string }
  | { kind: "cancel"; why: string };

/** The states each event may leave from. Everything else is an illegal transition. */
const ALLOWED: Record<TaskEvent["kind"], readonly TaskState[]> = {
  start: ["submitted"],
  approval_wait: ["working"],
  approval_resolved: ["input-required"],
  complete: ["working", "input-required"],
  fail: ["submitted", "working", "input-required"],
  cancel: ["submitted", "working", "input-required"],
};

export function canApplyTaskEvent(state: TaskState, event: TaskEvent["kind"]): boolean {
  return ALLOWED[event].includes(state);
}

/** Applies an event; refuses (typed) one the machine does not allow, e.g. cancelling a completed task. */
export function applyTaskEvent(task: TaskRecord, event: TaskEvent, now: number): TaskRecord {
  if (!canApplyTaskEvent(task.state, event.kind)) {
    throw new HermesError("refused", `task ${task.task_id} is ${task.state}; it cannot ${event.kind.replace("_", " ")}`, {
      data: { task_id: task.task_id, state: task.state, event: event.kind },
    });
  }
  const at = isoTime(now);
  const moved = { ...task, updated_at: at, waiting_for: null };
  switch (event.kind) {
    case "start":
    case "approval_resolved":
      return { ...moved, state: "working" };
    case "approval_wait":
      return { ...moved, state: "input-required", waiting_for: event.what };
    case "complete":
      return { ...moved, state: "completed", reply: event.reply, ended_at: at };
    case "fail":
      return { ...moved, state: "failed", reason: event.reason, error: event.error, ended_at: at };
    case "cancel":
      return { ...moved, state: "canceled", error: event.why, ended_at: at };
  }
}

export const INTERRUPTED_AT_START =
  "the gateway stopped before this task ended; it was not re-run (its turn may have had effects): send a new message to try again";

/** Start-up: a task that had not ended when the process went away fails with runtime_offline (never re-run). */
export function recoverTask(task: TaskRecord, now: number): TaskRecord {
  if (isTerminalTask(task.state)) return task;
  return applyTaskEvent(task, { kind: "fail", reason: "runtime_offline", error: INTERRUPTED_AT_START }, now);
}

/** Same bot and same text: a resent messageId with another text is a conflict, not a replay. */
export function taskFingerprint(profile: string, text: string): string {
  // The profile's length first: no split of (profile, text) reads as another.
  return createHash("sha256").update(`${profile.length}:${profile}`).update(text).digest("hex");
}

/** What a messageId seen before decides: the task it started, or a conflict when the message differs. */
export function decideReplay(existing: Pick<TaskRecord, "task_id" | "fingerprint" | "message_id"> | undefined, fingerprint: string) {
  if (existing === undefined) return { kind: "new" as const };
  if (existing.fingerprint === fingerprint) return { kind: "replay" as const, task_id: existing.task_id };
  throw new HermesError(
    "idempotency_conflict",
    `messageId ${existing.message_id} already started task ${existing.task_id} with another message (or for another bot); use a new messageId for a new message`,
    { data: { message_id: existing.message_id, task_id: existing.task_id } },
  );
}

/** A contextId names one conversation, which lives in one session: a context of another bot is refused. */
export function decideContext(bound: { profile: string; session_id: string } | undefined, profile: string, contextId: string) {
  if (bound === undefined) return { kind: "new" as const };
  if (bound.profile === profile) return { kind: "bound" as const, session_id: bound.session_id };
  throw new HermesError(
    "invalid_params",
    `contextId ${contextId} is a conversation with another bot (${bound.profile}); start a new context (omit contextId) to talk to ${profile}`,
    { data: { context_id: contextId, profile: bound.profile } },
  );
}
