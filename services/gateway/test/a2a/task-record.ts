import { type TaskRecord, taskFingerprint } from "../../src/a2a/core/task.js";

/** A task of bot `alice` from the `a2a` caller, submitted and never run, with `over` on top. */
export function taskRecord(over: Partial<TaskRecord> = {}): TaskRecord {
  return {
    task_id: "t-1",
    profile: "alice",
    session_id: "s-1",
    context_id: "c-1",
    caller: "a2a",
    message_id: "m-1",
    fingerprint: taskFingerprint("alice", "hi"),
    state: "submitted",
    input: "hi",
    message_json: "{}",
    reply: null,
    reason: null,
    error: null,
    waiting_for: null,
    created_at: "2026-12-01T09:00:00.000Z",
    updated_at: "2026-12-01T09:00:01.000Z",
    ended_at: null,
    ...over,
  };
}
