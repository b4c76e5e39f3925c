import { describe, expect, it } from "vitest";
import { taskRecord } from "../../../test/a2a/task-record.js";
import type { TaskRecord } from "./task.js";
import {
  agentOutcome,
  endsStream,
  incomingMessage,
  MAX_TASK_TEXT_CHARS,
  taskJson,
  taskStateFromWire,
  taskUpdateEvents,
  wireTaskState,
} from "./wire.js";

const user = { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "hello" }] };

const task = (over: Partial<TaskRecord> = {}) => taskRecord({ input: "hello", message_json: JSON.stringify(user), ...over });

describe("a caller's message", () => {
  it("is its text parts joined, with its ids and the sender a Hermes gateway states", () => {
    expect(
      incomingMessage({
        messageId: "m-1",
        contextId: "c-1",
        role: "ROLE_USER",
        parts: [{ text: "one", mediaType: "text/plain" }, { text: "two" }],
        metadata: { hermes_sender: { name: "Alice", handle: "alice@gw" } },
      }),
    ).toEqual({ message_id: "m-1", context_id: "c-1", task_id: "", text: "one\ntwo", sender: { name: "Alice", handle: "alice@gw" } });
    expect(incomingMessage({ messageId: "m", parts: [{ text: "x" }], metadata: { hermes_sender: "forged" } }).sender).toBeUndefined();
  });

  it.each([
    [{ parts: [{ text: "x" }] }, "invalid_params", /messageId/],
    [{ messageId: "has space", parts: [{ text: "x" }] }, "invalid_params", /messageId/],
    [{ messageId: "m" }, "invalid_params", /has no text/],
    [{ messageId: "m", parts: [{ text: "  \n" }] }, "invalid_params", /has no text/],
    [{ messageId: "m", parts: [{ text: "x" }, { raw: "AAAA" }] }, "invalid_params", /parts\[1\] is a file part/],
    [{ messageId: "m", parts: [{ data: { a: 1 } }] }, "invalid_params", /is a data part/],
    [{ messageId: "m", role: "ROLE_AGENT", parts: [{ text: "x" }] }, "invalid_params", /ROLE_USER/],
    [{ messageId: "m", parts: [{ text: "x".repeat(MAX_TASK_TEXT_CHARS + 1) }] }, "payload_too_large", /limit is 65536/],
    ["not an object", "invalid_params", /message/],
  ])("refuses %j (%s)", (wire, reason, text) => {
    expect(() => incomingMessage(wire)).toThrow(expect.objectContaining({ reason, message: expect.stringMatching(text) }));
  });

  it("marks a file or data part as a content type it does not take", () => {
    expect(() => incomingMessage({ messageId: "m", parts: [{ url: "https://x" }] })).toThrow(
      expect.objectContaining({ data: expect.objectContaining({ content_type: true, part: "url" }) }),
    );
  });
});

describe("a task on the wire", () => {
  it("maps every state to its 1.0 name and back", () => {
    for (const state of ["submitted", "working", "input-required", "completed", "failed", "canceled"] as const) {
      expect(taskStateFromWire(wireTaskState(state))).toBe(state);
    }
    expect(taskStateFromWire("TASK_STATE_REJECTED")).toBeUndefined();
  });

  it("a completed task: the reply as status message, artifact and history; historyLength keeps the newest", () => {
    const done = task({ state: "completed", reply: "hi back", ended_at: "2026-12-01T09:00:02.000Z" });
    const json = taskJson(done) as { status: Record<string, unknown>; artifacts: unknown[]; history: unknown[]; metadata: unknown };
    expect(json.status).toEqual({
      state: "TASK_STATE_COMPLETED",
      message: {
        messageId: "t-1-reply",
        contextId: "c-1",
        taskId: "t-1",
        role: "ROLE_AGENT",
        parts: [{ text: "hi back", mediaType: "text/plain" }],
      },
      timestamp: "2026-12-01T09:00:01.000Z",
    });
    expect(json.artifacts).toEqual([{ artifactId: "t-1-reply", name: "reply", parts: [{ text: "hi back", mediaType: "text/plain" }] }]);
    expect(json.history).toEqual([{ ...user, taskId: "t-1", contextId: "c-1" }, json.status["message"]]);
    expect((taskJson(done, 1) as { history: unknown[] }).history).toEqual([json.status["message"]]);
    expect((taskJson(done, 0) as { history: unknown[] }).history).toEqual([]);
    expect(json.metadata).toEqual({ profile: "alice" });
  });

  it("a failed task carries its typed reason as text, data and metadata", () => {
    const failed = task({ state: "failed", reason: "provider_quota_limit", error: "no credits" });
    expect((taskJson(failed) as { status: unknown }).status).toMatchObject({
      state: "TASK_STATE_FAILED",
      message: {
        parts: [
          { text: "The turn failed [reason: provider_quota_limit]: no credits" },
          { data: { reason: "provider_quota_limit", error: "no credits" } },
        ],
        metadata: { reason: "provider_quota_limit" },
      },
    });
  });

  it("tells subscribers each change; a stream ends at an end or at input-required", () => {
    expect(taskUpdateEvents(task({ state: "working" }))).toEqual([
      { statusUpdate: { taskId: "t-1", contextId: "c-1", status: { state: "TASK_STATE_WORKING", timestamp: "2026-12-01T09:00:01.000Z" } } },
    ]);
    const waiting = taskUpdateEvents(task({ state: "input-required", waiting_for: "a shell command" }));
    expect(JSON.stringify(waiting)).toContain("Waiting for an operator to approve: a shell command");
    const done = taskUpdateEvents(task({ state: "completed", reply: "r" }));
    expect(done.map((e) => Object.keys(e)[0])).toEqual(["artifactUpdate", "statusUpdate"]);
    expect(done[0]).toMatchObject({ artifactUpdate: { append: false, lastChunk: true } });
    expect(["submitted", "working", "input-required", "completed", "failed", "canceled"].filter((s) => endsStream(s as never))).toEqual([
      "input-required",
      "completed",
      "failed",
      "canceled",
    ]);
  });
});

describe("an agent's answer", () => {
  const agentTask = (state: string, extra: Record<string, unknown> = {}) => ({
    task: { id: "x", status: { state, message: { parts: [{ text: "said" }] } }, ...extra },
  });

  it.each([
    [{ message: { parts: [{ text: "direct" }] } }, { kind: "reply", reply: "direct" }],
    [
      agentTask("TASK_STATE_COMPLETED", { artifacts: [{ parts: [{ text: "a" }] }, { parts: [{ text: "b" }] }] }),
      { kind: "reply", reply: "a\nb" },
    ],
    [agentTask("TASK_STATE_COMPLETED"), { kind: "reply", reply: "said" }],
    [agentTask("TASK_STATE_INPUT_REQUIRED"), { kind: "reply", reply: "said" }],
    [agentTask("TASK_STATE_FAILED"), { kind: "failed", reason: "unknown", error: "said" }],
    [agentTask("TASK_STATE_REJECTED"), { kind: "failed", reason: "unknown", error: "the agent rejected the task: said" }],
    [
      agentTask("TASK_STATE_AUTH_REQUIRED"),
      { kind: "failed", reason: "provider_auth_or_access", error: "the agent wants more credentials: said" },
    ],
    [agentTask("TASK_STATE_CANCELED"), { kind: "canceled", error: "said" }],
    [agentTask("TASK_STATE_WORKING"), { kind: "open", state: "TASK_STATE_WORKING", task_id: "x" }],
  ])("%j → %j", (result, outcome) => {
    expect(agentOutcome(result)).toEqual(outcome);
  });

  it("reads a Hermes gateway's typed reason back from a failed task", () => {
    const failed = taskJson(task({ state: "failed", reason: "provider_rate_limit", error: "429" }));
    expect(agentOutcome({ task: failed })).toMatchObject({ kind: "failed", reason: "provider_rate_limit" });
    const dataOnly = {
      task: { id: "x", status: { state: "TASK_STATE_FAILED", message: { parts: [{ data: { reason: "context_overflow" } }] } } },
    };
    expect(agentOutcome(dataOnly)).toMatchObject({ reason: "context_overflow" });
    const madeUp = { task: { id: "x", status: { state: "TASK_STATE_FAILED", message: { metadata: { reason: "not_a_reason" } } } } };
    expect(agentOutcome(madeUp)).toMatchObject({ reason: "unknown" });
  });

  it("refuses what is not an A2A task or message", () => {
    for (const garbage of [undefined, "html", { task: { id: 1 } }, { result: {} }]) {
      expect(() => agentOutcome(garbage)).toThrow(expect.objectContaining({ reason: "unknown" }));
    }
  });
});
