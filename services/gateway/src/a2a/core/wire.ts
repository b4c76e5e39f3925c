import { HermesError } from "@hermes/common/pure";
import { isDeliveryReason, messageLength } from "@hermes/contract";
import { z } from "zod";
import { isTerminalTask, type TaskRecord, type TaskState } from "./task.js";

/**
 * The A2A messages and tasks as JSON in the protocol's 1.0 wire form (the shape the SDK's
 * `Message.fromJSON`/`Task.toJSON` read and write; the 0.3 names are the SDK transport's business).
 * Plain objects here, so the mapping of turns, replies and typed reasons is table-tested without
 * the SDK.
 */

/** The longest message text a task accepts (as a chat turn). */
export const MAX_TASK_TEXT_CHARS = 64 * 1024;

const WIRE_STATES: Record<TaskState, string> = {
  submitted: "TASK_STATE_SUBMITTED",
  working: "TASK_STATE_WORKING",
  "input-required": "TASK_STATE_INPUT_REQUIRED",
  completed: "TASK_STATE_COMPLETED",
  failed: "TASK_STATE_FAILED",
  canceled: "TASK_STATE_CANCELED",
};

export function wireTaskState(state: TaskState): string {
  return WIRE_STATES[state];
}

/** A 1.0 wire state as a task state here (undefined for the ones tasks here never take, e.g. TASK_STATE_REJECTED). */
export function taskStateFromWire(wire: string): TaskState | undefined {
  return (Object.keys(WIRE_STATES) as TaskState[]).find((s) => WIRE_STATES[s] === wire);
}

/** An id a caller chooses (messageId, contextId): visible text, bounded. */
const callerId = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[^\p{Cc}\s]+$/u, "visible characters, no spaces");

const partSchema = z
  .object({
    text: z.string().optional(),
    raw: z.unknown().optional(),
    url: z.unknown().optional(),
    data: z.unknown().optional(),
  })
  .loose();

/** What a Hermes gateway states about the bot that wrote a message it sends (attribution only). */
const senderSchema = z.object({ name: z.string().max(128), handle: z.string().min(1).max(200) }).strict();

const incomingSchema = z
  .object({
    messageId: callerId,
    contextId: callerId.optional(),
    taskId: z.string().max(256).optional(),
    role: z.string().optional(),
    parts: z.array(partSchema).max(64).default([]),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();

export interface IncomingMessage {
  message_id: string;
  /** Empty: a new conversation. */
  context_id: string;
  /** Set when the caller names an existing task (a follow-up): tasks here take no follow-ups. */
  task_id: string;
  text: string;
  /** The sending bot, when a Hermes gateway states it (`metadata.hermes_sender`). */
  sender: { name: string; handle: string } | undefined;
}

/** Metadata key under which a Hermes gateway names the bot a message comes from. */
export const SENDER_METADATA_KEY = "hermes_sender";

/**
 * The caller's message as a turn's input: its text parts joined. A message without text, with a
 * file or data part, or with more text than a turn takes is refused with a typed error.
 */
export function incomingMessage(wire: unknown): IncomingMessage {
  const parsed = incomingSchema.safeParse(wire);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? `message.${issue.path.map(String).join(".")}` : "message";
    throw new HermesError("invalid_params", `${where}: ${issue.message}`, { data: { field: where } });
  }
  const m = parsed.data;
  if (m.role !== undefined && m.role !== "ROLE_USER") {
    throw new HermesError("invalid_params", `message.role must be ROLE_USER (user), got ${m.role}`, { data: { field: "message.role" } });
  }
  const texts: string[] = [];
  for (const [i, part] of m.parts.entries()) {
    const kind = ["raw", "url", "data"].find((k) => part[k as "raw"] !== undefined);
    if (kind !== undefined) {
      throw new HermesError(
        "invalid_params",
        `message.parts[${i}] is a ${kind === "data" ? "data" : "file"} part; this agent reads text parts only (text/plain)`,
        { data: { field: `message.parts.${i}`, part: kind, content_type: true } },
      );
    }
    if (part.text !== undefined) texts.push(part.text);
  }
  const text = texts.join("\n");
  if (text.trim().length === 0) {
    throw new HermesError("invalid_params", "the message has no text: send at least one text part (parts: [{text: …}])", {
      data: { field: "message.parts" },
    });
  }
  const length = messageLength(text);
  if (length > MAX_TASK_TEXT_CHARS) {
    throw new HermesError("payload_too_large", `the message text is ${length} characters; the limit is ${MAX_TASK_TEXT_CHARS}`, {
      data: { limit: MAX_TASK_TEXT_CHARS, length },
    });
  }
  const sender = senderSchema.safeParse(m.metadata?.[SENDER_METADATA_KEY]);
  return {
    message_id: m.messageId,
    context_id: m.contextId ?? "",
    task_id: m.taskId ?? "",
    text,
    sender: sender.success ? sender.data : undefined,
  };
}

type Json = Record<string, unknown>;

function agentMessage(t: TaskRecord, suffix: string, parts: Json[], metadata?: Json): Json {
  return {
    messageId: `${t.task_id}-${suffix}`,
    contextId: t.context_id,
    taskId: t.task_id,
    role: "ROLE_AGENT",
    parts,
    ...(metadata ? { metadata } : {}),
  };
}

const text = (value: string): Json => ({ text: value, mediaType: "text/plain" });

/** The failure as the status message says it: readable text, and the typed reason as data and metadata. */
export function failureText(reason: string, error: string | null): string {
  return `The turn failed [reason: ${reason}]: ${error ?? "no error text was recorded"}`;
}

/** The status message of a task in each state (none while submitted or working). */
function statusMessage(t: TaskRecord): Json | undefined {
  switch (t.state) {
    case "submitted":
    case "working":
      return undefined;
    case "input-required":
      return agentMessage(t, "waiting", [text(`Waiting for an operator to approve: ${t.waiting_for ?? "a tool call"}`)]);
    case "completed":
      return agentMessage(t, "reply", [text(t.reply ?? "")]);
    case "failed": {
      const reason = t.reason ?? "unknown";
      return agentMessage(
        t,
        "failure",
        [text(failureText(reason, t.error)), { data: { reason, error: t.error }, mediaType: "application/json" }],
        { reason },
      );
    }
    case "canceled":
      return agentMessage(t, "canceled", [text(`Canceled: ${t.error ?? "canceled"}`)]);
  }
}

function statusJson(t: TaskRecord): Json {
  const message = statusMessage(t);
  return { state: wireTaskState(t.state), ...(message ? { message } : {}), timestamp: t.updated_at };
}

function replyArtifact(t: TaskRecord): Json {
  return { artifactId: `${t.task_id}-reply`, name: "reply", parts: [text(t.reply ?? "")] };
}

/** The caller's message as stored, tied to its task and context. */
function userMessage(t: TaskRecord): Json {
  const stored = JSON.parse(t.message_json) as Json;
  return { ...stored, taskId: t.task_id, contextId: t.context_id };
}

/**
 * A task as the protocol shows it: status (with the reply, the wait or the typed failure as its
 * message), the reply as an artifact once completed, and the history (the caller's message, then
 * the reply), the newest `historyLength` of it when given (0: none).
 */
export function taskJson(t: TaskRecord, historyLength?: number): Json {
  const history = [userMessage(t)];
  if (t.state === "completed") history.push(agentMessage(t, "reply", [text(t.reply ?? "")]));
  const kept = historyLength === undefined ? history : historyLength <= 0 ? [] : history.slice(-historyLength);
  return {
    id: t.task_id,
    contextId: t.context_id,
    status: statusJson(t),
    artifacts: t.state === "completed" ? [replyArtifact(t)] : [],
    history: kept,
    metadata: { profile: t.profile },
  };
}

/** The stream events (1.0 `StreamResponse` JSON) that tell a subscriber a task moved to `t`'s state. */
export function taskUpdateEvents(t: TaskRecord): Json[] {
  const ids = { taskId: t.task_id, contextId: t.context_id };
  const status = { statusUpdate: { ...ids, status: statusJson(t) } };
  if (t.state !== "completed") return [status];
  return [{ artifactUpdate: { ...ids, artifact: replyArtifact(t), append: false, lastChunk: true } }, status];
}

/** A stream ends after a terminal state or input-required (the caller resubscribes to follow on). */
export function endsStream(state: TaskState): boolean {
  return isTerminalTask(state) || state === "input-required";
}

/**
 * What an A2A agent's answer means for a delivery: the text of a completed task (its artifacts,
 * else its status message) or of a direct message; a failed task's typed reason when the agent
 * states one (a Hermes gateway does), else `unknown` with its text.
 */
export type AgentOutcome =
  | { kind: "reply"; reply: string }
  | { kind: "failed"; reason: string; error: string }
  | { kind: "canceled"; error: string }
  | { kind: "open"; state: string; task_id: string };

const wirePart = z.object({ text: z.string().optional(), data: z.unknown().optional() }).loose();
const wireMessage = z.object({ parts: z.array(wirePart).optional(), metadata: z.record(z.string(), z.unknown()).optional() }).loose();
const wireTask = z
  .object({
    id: z.string(),
    status: z.object({ state: z.string(), message: wireMessage.optional() }).loose(),
    artifacts: z.array(z.object({ parts: z.array(wirePart).optional() }).loose()).optional(),
  })
  .loose();

function partsText(parts: readonly z.infer<typeof wirePart>[] | undefined): string {
  return (parts ?? [])
    .map((p) => p.text)
    .filter((t): t is string => t !== undefined)
    .join("\n");
}

function statedReason(message: z.infer<typeof wireMessage> | undefined): string | undefined {
  const fromMeta = message?.metadata?.["reason"];
  if (isDeliveryReason(fromMeta)) return fromMeta;
  for (const part of message?.parts ?? []) {
    const data = part.data as { reason?: unknown } | undefined;
    if (data && isDeliveryReason(data.reason)) return data.reason;
  }
  return undefined;
}

/** Reads an agent's SendMessage result (`{task}` or `{message}`, 1.0 JSON); anything else is refused as not A2A. */
export function agentOutcome(result: unknown): AgentOutcome {
  const r = (result ?? {}) as { task?: unknown; message?: unknown };
  if (r.message !== undefined) {
    const m = wireMessage.safeParse(r.message);
    if (m.success) return { kind: "reply", reply: partsText(m.data.parts) };
  }
  const t = wireTask.safeParse(r.task);
  if (!t.success) throw new HermesError("unknown", "the agent answered something that is not an A2A task or message");
  const task = t.data;
  const said = partsText(task.status.message?.parts);
  switch (task.status.state) {
    case "TASK_STATE_COMPLETED": {
      const artifacts = (task.artifacts ?? []).map((a) => partsText(a.parts)).filter((s) => s.length > 0);
      return { kind: "reply", reply: artifacts.length > 0 ? artifacts.join("\n") : said };
    }
    case "TASK_STATE_FAILED":
      return { kind: "failed", reason: statedReason(task.status.message) ?? "unknown", error: said || "the agent reported a failure" };
    case "TASK_STATE_REJECTED":
      return { kind: "failed", reason: "unknown", error: `the agent rejected the task${said ? `: ${said}` : ""}` };
    case "TASK_STATE_AUTH_REQUIRED":
      return { kind: "failed", reason: "provider_auth_or_access", error: `the agent wants more credentials${said ? `: ${said}` : ""}` };
    case "TASK_STATE_CANCELED":
      return { kind: "canceled", error: said || "the agent canceled the task" };
    case "TASK_STATE_INPUT_REQUIRED":
      // The agent asks something back: that question is its answer to this message.
      return { kind: "reply", reply: said };
    default:
      return { kind: "open", state: task.status.state, task_id: task.id };
  }
}
