import { randomUUID } from "node:crypto";
import { type Clock, HermesError, isoTime, type Logger } from "@hermes/common";
import { Counter, Gauge, type Registry } from "prom-client";
import type { ChatService } from "../../agents/app/chat.js";
import { attemptFailure } from "../../delivery/app/failure.js";
import { attributedMessage } from "../../delivery/core/envelope.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { SessionService } from "../../identity/app/sessions.js";
import {
  type A2aCaller,
  applyTaskEvent,
  decideContext,
  decideReplay,
  isTerminalTask,
  recoverTask,
  type TaskEvent,
  type TaskRecord,
  taskFingerprint,
} from "../core/task.js";
import type { IncomingMessage } from "../core/wire.js";
import type { A2aTasksStore, TaskSummary } from "../store/tasks-store.js";

export interface A2aTasksSettings {
  /** A turn still running after this long is cancelled and its task fails with delivery_timeout. */
  turnTimeoutMs: number;
  /** A task that ended this long ago is deleted (its messageId then starts a new task). */
  retentionMs: number;
  /** How often the retention sweep runs. */
  pruneEveryMs: number;
  /** How long a cancel of a running turn waits for it to unwind before answering with the task as it stands. */
  cancelSettleMs: number;
}

export const DEFAULT_A2A_TASKS_SETTINGS: A2aTasksSettings = {
  turnTimeoutMs: 600_000,
  retentionMs: 7 * 24 * 3600_000,
  pruneEveryMs: 3600_000,
  cancelSettleMs: 10_000,
};

/**
 * The seam to tool approvals: a turn in a session whose tool call waits for an operator's approval.
 * While one waits, the task of that turn is `input-required`; when it is decided, `working` again.
 * The gateway passes none until its approvals service exists: tasks then never enter input-required.
 */
export interface TurnApprovals {
  /** Calls `listener` while a turn of `sessionId` runs; returns the unsubscribe. */
  watch(sessionId: string, listener: (event: { kind: "waiting"; what: string } | { kind: "resolved" }) => void): () => void;
}

export interface A2aTasksDeps {
  store: A2aTasksStore;
  profiles: ProfileService;
  sessions: SessionService;
  chat: ChatService;
  clock: Clock;
  logger: Logger;
  approvals?: TurnApprovals | undefined;
  registry?: Registry | undefined;
  settings?: Partial<A2aTasksSettings> | undefined;
}

export interface SubmitRequest {
  /** The bot (a profile of this gateway, already resolved by the caller). */
  profile: string;
  caller: A2aCaller;
  message: IncomingMessage;
  /** The caller's message as it arrived (1.0 wire JSON), kept for the task's history. */
  message_json: string;
}

/** A task not ended yet, and who follows it. */
interface LiveTask {
  record: TaskRecord;
  listeners: Set<(task: TaskRecord) => void>;
  controller?: AbortController;
  /** Set by a cancel: the turn's failure is then a cancellation. */
  canceledBecause?: string;
}

const CANCELED_BY_CALLER = "canceled by the caller (CancelTask)";
const INTERRUPTED_BY_STOP = "the gateway stopped while this task ran; it was not re-run (its turn may have had effects)";

/**
 * A2A tasks: each admitted message is one turn in its bot's canonical Bot Chat, attributed to the
 * caller, queued behind the turns already there (never refused). A task's row is written when it is
 * admitted (with its messageId, so the same message answers with the same task, also after a
 * restart) and when it ends; `working` and `input-required` live here in memory, with the
 * subscribers that follow a task (streams, blocking sends, cancels).
 */
export class A2aTasks {
  private readonly settings: A2aTasksSettings;
  private readonly live = new Map<string, LiveTask>();
  private readonly ended: Counter<"state" | "reason">;
  private stopping = false;
  private pruneTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: A2aTasksDeps) {
    this.settings = { ...DEFAULT_A2A_TASKS_SETTINGS, ...deps.settings };
    const registers = deps.registry ? [deps.registry] : [];
    this.ended = new Counter({
      name: "hermes_a2a_tasks_total",
      help: "A2A tasks that reached an end state, by state and reason",
      labelNames: ["state", "reason"] as const,
      registers,
    });
    const live = this.live;
    new Gauge({
      name: "hermes_a2a_tasks_active",
      help: "A2A tasks admitted here and not ended, by state",
      labelNames: ["state"] as const,
      registers,
      collect() {
        this.reset();
        for (const t of live.values()) this.inc({ state: t.record.state });
      },
    });
  }

  private get store(): A2aTasksStore {
    return this.deps.store;
  }

  private now(): number {
    return this.deps.clock.now();
  }

  /** Start-up: tasks that had not ended fail with runtime_offline (never re-run); then the retention sweep starts. */
  start(): { interrupted: number } {
    let interrupted = 0;
    for (const task of this.store.open()) {
      const next = recoverTask(task, this.now());
      if (this.store.transition(next, task.state)) {
        interrupted++;
        this.ended.inc({ state: next.state, reason: next.reason ?? "none" });
        this.deps.logger.warn({ task_id: task.task_id, profile: task.profile }, "a2a task had not ended at restart: failed");
      }
    }
    this.prune();
    this.pruneTimer = setInterval(() => this.prune(), this.settings.pruneEveryMs).unref();
    return { interrupted };
  }

  /**
   * Admits a message: the same messageId (from the same caller, to the same bot) answers with its
   * task; a contextId keeps its conversation in the session it began in; anything new becomes a
   * task queued in the bot's canonical Bot Chat. The check and the insert run without an await in
   * between, so concurrent duplicates find each other; the unique index backs that up.
   */
  submit(request: SubmitRequest): { task: TaskRecord; replayed: boolean } {
    if (this.stopping) throw new HermesError("runtime_offline", "the gateway is stopping; send the message again when it is back");
    const { profile, caller, message } = request;
    this.deps.profiles.assertIdentitySettled(profile);
    const fingerprint = taskFingerprint(profile, message.text);
    const replay = decideReplay(this.store.byMessage(caller.id, profile, message.message_id), fingerprint);
    if (replay.kind === "replay") return { task: this.get(replay.task_id), replayed: true };
    if (message.task_id !== "") {
      throw new HermesError(
        "refused",
        `task ${message.task_id} takes no further messages here: each message is its own task; send it without taskId (keep the contextId to stay in the conversation)`,
        { data: { task_id: message.task_id, unsupported: true } },
      );
    }
    const contextId = message.context_id || randomUUID();
    const bound = message.context_id
      ? decideContext(this.store.context(caller.id, contextId), profile, contextId)
      : { kind: "new" as const };
    const session =
      (bound.kind === "bound" ? this.deps.sessions.store.byId(bound.session_id) : undefined) ?? this.deps.sessions.botChat(profile);
    const at = isoTime(this.now());
    const task: TaskRecord = {
      task_id: randomUUID(),
      profile,
      session_id: session.session_id,
      context_id: contextId,
      caller: caller.id,
      message_id: message.message_id,
      fingerprint,
      state: "submitted",
      input: message.text,
      message_json: request.message_json,
      reply: null,
      reason: null,
      error: null,
      waiting_for: null,
      created_at: at,
      updated_at: at,
      ended_at: null,
    };
    this.store.insert(task);
    const live: LiveTask = { record: task, listeners: new Set() };
    this.live.set(task.task_id, live);
    this.deps.logger.info({ task_id: task.task_id, profile, caller: caller.id, context_id: contextId }, "a2a task queued");
    this.schedule(task, caller, message.sender);
    return { task, replayed: false };
  }

  /** The task as it is now (in memory while it runs, else its row); not_found when there is none. */
  get(taskId: string): TaskRecord {
    const task = this.live.get(taskId)?.record ?? this.store.get(taskId);
    if (!task) {
      const days = Math.round(this.settings.retentionMs / 86_400_000);
      throw new HermesError("not_found", `no task ${taskId} here (tasks are kept for ${days} days after they end)`, {
        data: { task_id: taskId },
      });
    }
    return task;
  }

  /** A caller's tasks with a bot, newest first (in-flight ones as they are now). */
  list(filter: Parameters<A2aTasksStore["list"]>[0]): TaskRecord[] {
    return this.store.list(filter).map((t) => this.live.get(t.task_id)?.record ?? t);
  }

  /** The newest tasks of every bot (status, the console), in-flight ones as they are now. */
  recent(limit: number): TaskSummary[] {
    return this.store.recent(limit).map((t) => {
      const live = this.live.get(t.task_id)?.record;
      return live ? { ...t, state: live.state, updated_at: live.updated_at } : t;
    });
  }

  /**
   * Follows a task: `listener` gets the task after each change until it ends. Returns the
   * unsubscribe; a task that has already ended has nothing to follow (a no-op).
   */
  subscribe(taskId: string, listener: (task: TaskRecord) => void): () => void {
    const live = this.live.get(taskId);
    if (!live) return () => {};
    live.listeners.add(listener);
    return () => live.listeners.delete(listener);
  }

  /**
   * Resolves with the task once `until` holds for it (or it has ended), or as it stands when
   * `signal` aborts.
   */
  wait(taskId: string, until: (task: TaskRecord) => boolean, signal?: AbortSignal): Promise<TaskRecord> {
    const task = this.get(taskId);
    if (until(task) || isTerminalTask(task.state) || signal?.aborted) return Promise.resolve(task);
    return new Promise((resolve) => {
      const done = (t: TaskRecord) => {
        unsubscribe();
        signal?.removeEventListener("abort", onAbort);
        resolve(t);
      };
      const onAbort = () => done(this.get(taskId));
      const unsubscribe = this.subscribe(taskId, (t) => {
        if (until(t) || isTerminalTask(t.state)) done(t);
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Cancels a task: a queued one at once (its turn never starts); a running turn is stopped and this
   * resolves once it has unwound (or after cancelSettleMs, as it stands). A canceled task is
   * returned as it is; one that completed or failed cannot be canceled (`refused`).
   */
  async cancel(taskId: string): Promise<TaskRecord> {
    const task = this.get(taskId);
    if (task.state === "canceled") return task;
    if (isTerminalTask(task.state)) {
      throw new HermesError(
        "refused",
        `task ${taskId} has already ${task.state === "completed" ? "completed" : "failed"}; it cannot be canceled`,
        {
          data: { task_id: taskId, state: task.state, not_cancelable: true },
        },
      );
    }
    const live = this.live.get(taskId)!;
    if (task.state === "submitted") return this.end(live, { kind: "cancel", why: CANCELED_BY_CALLER }) ?? this.get(taskId);
    live.canceledBecause ??= CANCELED_BY_CALLER;
    live.controller?.abort(new HermesError("runtime_offline", CANCELED_BY_CALLER));
    this.deps.logger.info({ task_id: taskId }, "a2a task cancel requested");
    return this.wait(taskId, () => false, AbortSignal.timeout(this.settings.cancelSettleMs));
  }

  /** Queues the task's turn in its session's lane. */
  private schedule(task: TaskRecord, caller: A2aCaller, sender: IncomingMessage["sender"]): void {
    let lane: Promise<void>;
    try {
      lane = this.deps.chat.exclusive(task.session_id, () => this.execute(task.task_id, caller, sender));
    } catch (err) {
      this.notStarted(task.task_id, err);
      return;
    }
    lane.catch((err: unknown) => this.notStarted(task.task_id, err));
  }

  /** The lane dropped the task before it started: while the gateway stops its row stays open (failed at the next start). */
  private notStarted(taskId: string, err: unknown): void {
    if (this.stopping) return;
    const live = this.live.get(taskId);
    if (live?.record.state !== "submitted") return;
    const failure = attemptFailure(err);
    this.end(live, { kind: "fail", reason: failure.reason, error: `the task could not start: ${failure.error}` });
  }

  /** The turn, inside the session's lane. */
  private async execute(taskId: string, caller: A2aCaller, sender: IncomingMessage["sender"]): Promise<void> {
    const live = this.live.get(taskId);
    if (live?.record.state !== "submitted") return; // canceled while it waited
    this.move(live, { kind: "start" });
    const controller = new AbortController();
    live.controller = controller;
    const timeout = AbortSignal.timeout(this.settings.turnTimeoutMs);
    const signal = AbortSignal.any([controller.signal, timeout]);
    const task = live.record;
    const stopWatching = this.deps.approvals?.watch(task.session_id, (event) =>
      this.move(live, event.kind === "waiting" ? { kind: "approval_wait", what: event.what } : { kind: "approval_resolved" }),
    );
    try {
      const session = this.deps.sessions.store.byId(task.session_id) ?? this.deps.sessions.botChat(task.profile);
      // Attributed like a teammate's message; a Hermes gateway's statement of its bot is kept under the caller's name.
      const from = sender ? { name: sender.name, handle: `${sender.handle} via ${caller.id}` } : { name: caller.name, handle: caller.id };
      const out = await this.deps.chat.runLocked(task.profile, session, attributedMessage(from, task.input), {
        signal,
        user_meta: { a2a_task_id: taskId, from: from.handle },
        commands: false,
        obligation: false,
        // The session is touched in the commit that ends the task (one commit fewer per task).
        touch: false,
      });
      this.end(live, { kind: "complete", reply: out.reply });
    } catch (err) {
      const failure = attemptFailure(err);
      if (live.canceledBecause !== undefined) this.end(live, { kind: "cancel", why: live.canceledBecause });
      else if (this.stopping && (failure.cancelled || failure.reason === "runtime_offline")) {
        this.end(live, { kind: "fail", reason: "runtime_offline", error: INTERRUPTED_BY_STOP });
      } else if (timeout.aborted) {
        const seconds = Math.round(this.settings.turnTimeoutMs / 1000);
        this.end(live, { kind: "fail", reason: "delivery_timeout", error: `the turn did not finish within ${seconds} s` });
      } else this.end(live, { kind: "fail", reason: failure.reason, error: failure.error });
    } finally {
      stopWatching?.();
    }
  }

  /** A change that lives in memory (working, input-required): subscribers hear it; the row keeps its admission. */
  private move(live: LiveTask, event: TaskEvent): void {
    if (isTerminalTask(live.record.state)) return;
    try {
      live.record = applyTaskEvent(live.record, event, this.now());
    } catch (err) {
      this.deps.logger.warn({ err, task_id: live.record.task_id }, "a2a task event ignored");
      return;
    }
    this.tell(live);
  }

  /**
   * Records an end if the row is still open, tells the subscribers and forgets the task. When the
   * row was ended by something else first, the stored end stands.
   */
  private end(live: LiveTask, event: TaskEvent): TaskRecord | undefined {
    const from = live.record;
    if (isTerminalTask(from.state)) return undefined;
    const next = applyTaskEvent(from, event, this.now());
    const log = this.deps.logger.child({ task_id: from.task_id, profile: from.profile });
    let stored = false;
    try {
      stored = this.store.db.transaction(() => {
        const ended = this.store.transition(next, "submitted");
        // The turn (when it ran) is the session's latest activity: its row and routing entry, in the same commit.
        const session = from.state === "submitted" ? undefined : this.deps.sessions.store.byId(from.session_id);
        if (ended && session) this.deps.sessions.touchRow(session);
        return ended;
      })();
    } catch (err) {
      log.error({ err }, "recording the end of an a2a task failed; it fails at the next start");
    }
    live.record = stored ? next : (this.store.get(from.task_id) ?? next);
    this.live.delete(from.task_id);
    if (stored) {
      this.ended.inc({ state: next.state, reason: next.reason ?? "none" });
      log.info({ state: next.state, reason: next.reason ?? undefined }, `a2a task ${next.state}`);
    }
    this.tell(live);
    return stored ? next : undefined;
  }

  private tell(live: LiveTask): void {
    for (const listener of [...live.listeners]) {
      try {
        listener(live.record);
      } catch (err) {
        this.deps.logger.error({ err, task_id: live.record.task_id }, "an a2a task subscriber failed");
      }
    }
  }

  /** Retention: deletes tasks that ended more than retentionMs ago. */
  prune(): number {
    try {
      return this.store.prune(isoTime(this.now() - this.settings.retentionMs));
    } catch (err) {
      this.deps.logger.warn({ err }, "pruning a2a tasks failed; will retry");
      return 0;
    }
  }

  /** Graceful stop, first step: no new tasks. Running turns end with the turn engine (failed runtime_offline). */
  beginStop(): void {
    this.stopping = true;
    clearInterval(this.pruneTimer);
  }

  /** Tasks in flight now (status, tests). */
  get activeCount(): number {
    return this.live.size;
  }
}

/** A task id as the caller's key may see it: another caller's task is as unknown as a missing one. */
export function ownTask(tasks: A2aTasks, taskId: string, caller: A2aCaller): TaskRecord {
  const task = tasks.get(taskId);
  if (task.caller !== caller.id) throw new HermesError("not_found", `no task ${taskId} here`, { data: { task_id: taskId } });
  return task;
}
