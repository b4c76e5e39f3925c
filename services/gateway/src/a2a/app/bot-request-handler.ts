import {
  type AgentCard,
  type CancelTaskRequest,
  type GetTaskRequest,
  type ListTasksRequest,
  type ListTasksResponse,
  Message,
  type SendMessageRequest,
  StreamResponse,
  type SubscribeToTaskRequest,
  Task,
  type TaskPushNotificationConfig,
  taskStateToJSON,
} from "@a2a-js/sdk";
import {
  A2AError,
  ContentTypeNotSupportedError,
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import type { A2ARequestHandler } from "@a2a-js/sdk/server";
import { toHermesError } from "@hermes/common";
import { type A2aCaller, isTerminalTask, type TaskRecord } from "../core/task.js";
import { endsStream, incomingMessage, taskJson, taskStateFromWire, taskUpdateEvents } from "../core/wire.js";
import { type A2aTasks, ownTask } from "./a2a-tasks.js";

/** One request to one bot: who calls, the bot's card, and the signal of the caller's connection. */
export interface BotCall {
  profile: string;
  caller: A2aCaller;
  card: AgentCard;
  /** Aborted when the caller's connection closes: waits and streams end, the task goes on. */
  signal: AbortSignal;
}

/** The most tasks one ListTasks page holds. */
const MAX_PAGE = 100;

/**
 * A typed failure as the A2A error the SDK's transports put on the wire (JSON-RPC code, 1.0
 * ErrorInfo), with the reason in the text and in the ErrorInfo's metadata.
 */
export function toA2aError(err: unknown): Error {
  if (err instanceof A2AError) return err;
  const e = toHermesError(err);
  const options = { message: `${e.message} [${e.reason}]`, metadata: { reason: e.reason }, cause: e };
  switch (e.reason) {
    case "not_found":
      return new TaskNotFoundError(options);
    case "refused":
      if (e.data["not_cancelable"] === true) return new TaskNotCancelableError(options);
      return new UnsupportedOperationError(options);
    case "invalid_params":
      if (e.data["content_type"] === true) return new ContentTypeNotSupportedError(options);
      return new RequestMalformedError(options);
    case "payload_too_large":
    case "idempotency_conflict":
    case "invalid_name":
      return new RequestMalformedError(options);
    default:
      return new A2AError(options);
  }
}

/** Calls `fn`, turning a typed failure into the A2A error the transports expect. */
async function mapped<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toA2aError(err);
  }
}

/**
 * The protocol's operations for one bot, over the task service: what the SDK's JSON-RPC transports
 * (1.0 and the 0.3 names) call. Messages become tasks (a2a-tasks.ts); tasks, events and errors go
 * out in the SDK's types, built from the core's wire JSON.
 */
export class BotRequestHandler implements A2ARequestHandler {
  constructor(
    private readonly tasks: A2aTasks,
    private readonly call: BotCall,
  ) {}

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(this.call.card);
  }

  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new ExtendedAgentCardNotConfiguredError("this agent has no extended card; its card is the whole story"));
  }

  private submit(params: SendMessageRequest): TaskRecord {
    if (!params.message) throw new RequestMalformedError("params.message is required");
    const wire = Message.toJSON(params.message) as Record<string, unknown>;
    const message = incomingMessage(wire);
    const { profile, caller } = this.call;
    return this.tasks.submit({ profile, caller, message, message_json: JSON.stringify(wire) }).task;
  }

  sendMessage(params: SendMessageRequest): Promise<Task> {
    return mapped(async () => {
      const task = this.submit(params);
      const ready = params.configuration?.returnImmediately
        ? task
        : await this.tasks.wait(task.task_id, (t) => endsStream(t.state), this.call.signal);
      return Task.fromJSON(taskJson(ready, params.configuration?.historyLength));
    });
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const task = await mapped(() => this.submit(params));
    yield* this.follow(task.task_id, endsStream);
  }

  getTask(params: GetTaskRequest): Promise<Task> {
    return mapped(() => Task.fromJSON(taskJson(ownTask(this.tasks, params.id, this.call.caller), params.historyLength)));
  }

  cancelTask(params: CancelTaskRequest): Promise<Task> {
    return mapped(async () => {
      ownTask(this.tasks, params.id, this.call.caller);
      return Task.fromJSON(taskJson(await this.tasks.cancel(params.id)));
    });
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const task = await mapped(() => ownTask(this.tasks, params.id, this.call.caller));
    if (isTerminalTask(task.state)) {
      throw new UnsupportedOperationError(`task ${task.task_id} has ended (${task.state}); read it with GetTask`);
    }
    yield* this.follow(task.task_id, (state) => isTerminalTask(state));
  }

  listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    return mapped(() => {
      const pageSize = Math.min(Math.max(params.pageSize ?? 50, 1), MAX_PAGE);
      const offset = /^\d{1,9}$/.test(params.pageToken) ? Number(params.pageToken) : 0;
      const wanted = taskStateToJSON(params.status);
      const state = taskStateFromWire(wanted);
      if (wanted !== "TASK_STATE_UNSPECIFIED" && state === undefined) return { tasks: [], nextPageToken: "", pageSize, totalSize: 0 };
      const page = this.tasks.list({
        caller: this.call.caller.id,
        profile: this.call.profile,
        ...(params.contextId ? { context_id: params.contextId } : {}),
        ...(state ? { state } : {}),
        limit: pageSize + 1,
        offset,
      });
      const more = page.length > pageSize;
      const tasks = page.slice(0, pageSize).map((t) => Task.fromJSON(taskJson(t, params.historyLength)));
      return { tasks, nextPageToken: more ? String(offset + pageSize) : "", pageSize, totalSize: offset + tasks.length + (more ? 1 : 0) };
    });
  }

  /**
   * The task now (one `task` event), then its changes as status and artifact events until `last`
   * says a state ends the stream, or the caller goes away. Changes are queued from the moment the
   * snapshot is taken, so none falls between the two.
   */
  private async *follow(taskId: string, last: (state: TaskRecord["state"]) => boolean): AsyncGenerator<StreamResponse, void, undefined> {
    const queue: TaskRecord[] = [];
    let wake: (() => void) | undefined;
    const unsubscribe = this.tasks.subscribe(taskId, (t) => {
      queue.push(t);
      wake?.();
    });
    const onAbort = () => wake?.();
    this.call.signal.addEventListener("abort", onAbort);
    try {
      const now = this.tasks.get(taskId);
      yield StreamResponse.fromJSON({ task: taskJson(now) });
      let state = now.state;
      while (!last(state) && !this.call.signal.aborted) {
        const next = queue.shift();
        if (next === undefined) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        for (const event of taskUpdateEvents(next)) yield StreamResponse.fromJSON(event);
        state = next.state;
      }
    } finally {
      unsubscribe();
      this.call.signal.removeEventListener("abort", onAbort);
    }
  }

  createTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    return Promise.reject(new PushNotificationNotSupportedError("push notifications are not offered: stream or resubscribe instead"));
  }

  getTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    return this.createTaskPushNotificationConfig();
  }

  listTaskPushNotificationConfigs(): Promise<never> {
    return Promise.reject(new PushNotificationNotSupportedError("push notifications are not offered"));
  }

  deleteTaskPushNotificationConfig(): Promise<void> {
    return Promise.reject(new PushNotificationNotSupportedError("push notifications are not offered"));
  }
}
