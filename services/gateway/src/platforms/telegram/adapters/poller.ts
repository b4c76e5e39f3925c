import { performance } from "node:perf_hooks";
import type { Logger } from "@hermes/common";
import type { ApiFailure } from "../core/api-failure.js";
import type { TelegramPlatformConfig } from "../core/config.js";
import { classifyUpdate, TELEGRAM_COMMANDS, type TelegramChat, type TelegramWork } from "../core/intake.js";
import {
  CONFLICT_MESSAGE,
  DEFAULT_POLLER_SETTINGS,
  initialPollerState,
  type PollerEffect,
  type PollerError,
  type PollerEvent,
  type PollerSettings,
  type PollerState,
  type PollerStatus,
  stepPoller,
} from "../core/poller.js";
import type { BotApi, BotIdentity } from "./bot-api.js";

/** Where the poller's offset lives: the update_id after the last update handled. */
export interface TelegramOffsetStore {
  load(): number | undefined;
  /**
   * Stores the next offset. Synchronous and durable when it returns, so a SQLite store can run it
   * inside the transaction that records an update's intake.
   */
  save(offset: number): void;
}

export type { TelegramWork };

export interface TelegramWorkHandler {
  /**
   * Takes over one turn or command, in update order. Resolve once the work is durably accepted
   * (the turn itself may run on afterwards, in the chat's session lane), and call `commitOffset()`
   * inside the same transaction that records the intake, so a crash keeps both or neither. If it
   * was not called, the poller commits after `accept` resolves. Rejecting before committing means
   * "not taken": the same update is offered again after a back-off.
   */
  accept(work: TelegramWork, commitOffset: () => void): Promise<void>;
}

/** The chats already told that the bot does not answer there (each is refused once). */
export interface RefusalMemory {
  has(chatId: string): boolean;
  add(chatId: string): void;
}

/** Stops watching a singleton and releases it; a promise is awaited. */
export type Unwatch = (() => void) | (() => Promise<void>);

/** A mesh coordinator's named singletons: exactly one gateway holds a name at a time. */
export interface SingletonCoordinator {
  /**
   * Reports (possibly at once) whether this gateway holds `name`, and every change, until the
   * returned function is called, which also releases the name (resolving once it is released).
   */
  watch(name: string, onChange: (held: boolean) => void): Unwatch;
}

/** What `@hermes/coordinator`'s Coordinator offers for singletons (`coordinator.singleton(name, {onAcquired, onLost})`). */
export interface CoordinatorSingletons {
  singleton(name: string, handlers: { onAcquired(): void; onLost(): void }): { release(): Promise<void> };
}

/** The poller's view of a mesh coordinator: held from `onAcquired` to `onLost`; stopping releases the name. */
export function coordinatorSingletons(coordinator: CoordinatorSingletons): SingletonCoordinator {
  return {
    watch(name, onChange) {
      const handle = coordinator.singleton(name, { onAcquired: () => onChange(true), onLost: () => onChange(false) });
      return () => handle.release();
    },
  };
}

/** Timers, injectable so tests fire them by hand and read the delay asked for. */
export interface Scheduler {
  set(fire: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realScheduler: Scheduler = {
  set: (fire, ms) => setTimeout(fire, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Sends the platform's own answers (help, refusals…); TelegramReplier fits. */
export interface ReplySender {
  send(chat: TelegramChat, text: string, signal?: AbortSignal): Promise<unknown>;
}

export interface TelegramPollerOptions {
  api: BotApi;
  offsets: TelegramOffsetStore;
  handler: TelegramWorkHandler;
  replies: ReplySender;
  config: Pick<TelegramPlatformConfig, "allow_all" | "allowed_chats" | "poll_timeout_seconds" | "token_env">;
  logger: Pick<Logger, "info" | "warn" | "error">;
  /** With a coordinator, poll only while holding the token's singleton; without one, 409 Conflict is the guard. */
  coordinator?: SingletonCoordinator | undefined;
  refused?: RefusalMemory | undefined;
  random?: (() => number) | undefined;
  scheduler?: Scheduler | undefined;
  settings?: Partial<Omit<PollerSettings, "poll_timeout_seconds" | "token_env" | "coordinated">> | undefined;
}

export interface TelegramPollerStatus {
  state: PollerStatus;
  offset: number | undefined;
  bot: BotIdentity | undefined;
  /** The singleton's name when a coordinator decides who polls. */
  singleton: string | undefined;
  /** Set in state `conflict`: "another process polls this bot token". */
  conflict: string | undefined;
  last_error: PollerError | undefined;
  /** The wait in progress (429 retry_after, back-off). */
  waiting_ms: number | undefined;
  counters: {
    updates_received: number;
    turns: number;
    commands: number;
    replies: number;
    refusals: number;
    ignored: Record<string, number>;
    errors: Record<string, number>;
  };
}

const LOG_FIELDS = { platform: "telegram" };
/** A stop waits this long at most for its confirming call. */
const CONFIRM_TIMEOUT_MS = 5000;

/**
 * Runs the pure poller state machine against the Bot API with real timers: it performs each
 * effect (getMe and setMyCommands, getUpdates, handing an update over, waits) and feeds the
 * outcome back as the next event. Each update is classified by the intake; turns and `/model` go
 * to the handler, the platform's own replies (help, unknown command, too long, one refusal per
 * chat) are sent here after the offset moved past them.
 */
export class TelegramPoller {
  private state: PollerState = initialPollerState();
  private readonly settings: PollerSettings;
  private readonly random: () => number;
  private readonly scheduler: Scheduler;
  private readonly refused: RefusalMemory;
  private bot: BotIdentity | undefined;
  private inFlight: AbortController | undefined;
  private timer: unknown;
  private unwatch: Unwatch | undefined;
  private readonly background = new Set<Promise<unknown>>();
  /** Ends the retries of replies still being sent when the poller stops. */
  private readonly stopReplies = new AbortController();
  private readonly stoppedWaiters: (() => void)[] = [];
  private readonly counters: TelegramPollerStatus["counters"] = {
    updates_received: 0,
    turns: 0,
    commands: 0,
    replies: 0,
    refusals: 0,
    ignored: {},
    errors: {},
  };

  constructor(private readonly options: TelegramPollerOptions) {
    this.settings = {
      ...DEFAULT_POLLER_SETTINGS,
      ...options.settings,
      poll_timeout_seconds: options.config.poll_timeout_seconds,
      token_env: options.config.token_env,
      coordinated: options.coordinator !== undefined,
    };
    this.random = options.random ?? Math.random;
    this.scheduler = options.scheduler ?? realScheduler;
    this.refused = options.refused ?? new Set<string>();
  }

  start(): void {
    if (this.state.started) return;
    const offset = this.options.offsets.load();
    if (this.options.coordinator) {
      this.unwatch = this.options.coordinator.watch(this.options.api.singletonName, (held) => this.dispatch({ type: "singleton", held }));
    }
    this.dispatch({ type: "start", offset });
  }

  /** Stops polling: a handle in progress finishes, Telegram is told the final offset, then the singleton is released. */
  async stop(): Promise<void> {
    const stopped = new Promise<void>((resolve) => this.stoppedWaiters.push(resolve));
    this.dispatch({ type: "stop" });
    this.settleStopped();
    await stopped;
    const unwatch = this.unwatch;
    this.unwatch = undefined;
    await unwatch?.();
    this.stopReplies.abort();
    await Promise.allSettled([...this.background]);
  }

  status(): TelegramPollerStatus {
    const s = this.state;
    return {
      state: s.status,
      offset: s.offset,
      bot: this.bot,
      singleton: this.options.coordinator ? this.options.api.singletonName : undefined,
      conflict: s.status === "conflict" ? CONFLICT_MESSAGE : undefined,
      last_error: s.last_error,
      waiting_ms: s.activity === "wait" ? s.scheduled_delay_ms : undefined,
      counters: structuredClone(this.counters),
    };
  }

  private dispatch(event: PollerEvent): void {
    const step = stepPoller(this.state, event, this.settings, this.random);
    this.state = step.state;
    for (const effect of step.effects) this.perform(effect);
    this.settleStopped();
  }

  private settleStopped(): void {
    if (this.state.status !== "stopped" || this.state.activity !== "idle") return;
    for (const resolve of this.stoppedWaiters.splice(0)) resolve();
  }

  private perform(effect: PollerEffect): void {
    switch (effect.type) {
      case "prepare":
        this.callApi(
          effect.op,
          (signal) => this.prepare(signal),
          () => ({ type: "prepared", op: effect.op }),
        );
        return;
      case "poll": {
        const began = performance.now();
        this.callApi(
          effect.op,
          (signal) => this.options.api.getUpdates({ offset: effect.offset, timeout_seconds: effect.timeout_seconds }, signal),
          (updates) => {
            this.counters.updates_received += updates.length;
            return { type: "polled", op: effect.op, updates, elapsed_ms: performance.now() - began };
          },
        );
        return;
      }
      case "handle":
        this.handle(effect.update, effect.next_offset, effect.skip).then(
          () => this.dispatch({ type: "handled", op: effect.op }),
          (err: unknown) =>
            this.dispatch({ type: "handle_failed", op: effect.op, message: err instanceof Error ? err.message : String(err) }),
        );
        return;
      case "wait":
        this.timer = this.scheduler.set(() => this.dispatch({ type: "timer", op: effect.op }), effect.ms);
        return;
      case "cancel":
        this.inFlight?.abort();
        this.inFlight = undefined;
        if (this.timer !== undefined) this.scheduler.clear(this.timer);
        this.timer = undefined;
        return;
      case "confirm":
        // Its outcome does not matter: a failed confirmation only means Telegram re-sends a few
        // updates, which the stored offset then skips.
        void this.options.api
          .getUpdates({ offset: effect.offset, timeout_seconds: 0, limit: 1 }, AbortSignal.timeout(CONFIRM_TIMEOUT_MS))
          .then(() => this.dispatch({ type: "confirmed", op: effect.op }));
        return;
      case "log":
        this.options.logger[effect.level]({ ...LOG_FIELDS, ...(this.bot?.username ? { bot: this.bot.username } : {}) }, effect.message);
        return;
    }
  }

  /** Runs one cancellable call; its outcome becomes the next event (a cancelled call's is stale and ignored). */
  private callApi<T>(
    op: number,
    call: (signal: AbortSignal) => Promise<{ ok: true; value: T } | { ok: false; failure: ApiFailure }>,
    success: (value: T) => PollerEvent,
  ): void {
    const controller = new AbortController();
    this.inFlight = controller;
    void call(controller.signal).then((outcome) => {
      if (this.inFlight === controller) this.inFlight = undefined;
      if (controller.signal.aborted) return;
      if (outcome.ok) {
        this.dispatch(success(outcome.value));
      } else {
        this.counters.errors[outcome.failure.kind] = (this.counters.errors[outcome.failure.kind] ?? 0) + 1;
        this.dispatch({ type: "call_failed", op, failure: outcome.failure });
      }
    });
  }

  /** getMe (who we are, for the intake), no webhook, the command menu. */
  private async prepare(signal: AbortSignal): Promise<{ ok: true; value: undefined } | { ok: false; failure: ApiFailure }> {
    const me = await this.options.api.getMe(signal);
    if (!me.ok) return me;
    this.bot = me.value;
    for (const step of [() => this.options.api.deleteWebhook(signal), () => this.options.api.setMyCommands(TELEGRAM_COMMANDS, signal)]) {
      const outcome = await step();
      if (!outcome.ok) return outcome;
    }
    this.options.logger.info({ ...LOG_FIELDS, bot: me.value.username }, "telegram bot connected");
    return { ok: true, value: undefined };
  }

  private async handle(update: unknown, nextOffset: number, skip: boolean): Promise<void> {
    const commit = () => this.options.offsets.save(nextOffset);
    if (skip) {
      commit();
      return;
    }
    const decision = classifyUpdate(update, {
      access: this.options.config,
      refused_chats: this.refused,
      bot: this.bot,
    });
    switch (decision.kind) {
      case "ignore":
        this.counters.ignored[decision.reason] = (this.counters.ignored[decision.reason] ?? 0) + 1;
        commit();
        return;
      case "refuse":
        commit();
        this.refused.add(decision.chat.id);
        this.counters.refusals += 1;
        this.options.logger.info(
          { ...LOG_FIELDS, chat_id: decision.chat.id },
          "refused a chat that is not in platforms.telegram.allowed_chats (once; it gets silence from now on)",
        );
        this.reply(decision.chat, decision.text);
        return;
      case "reply":
        commit();
        this.counters.replies += 1;
        this.reply(decision.chat, decision.text);
        return;
      case "turn":
      case "command": {
        this.counters[decision.kind === "turn" ? "turns" : "commands"] += 1;
        let committed = false;
        try {
          await this.options.handler.accept(decision, () => {
            commit();
            committed = true;
          });
        } catch (err) {
          if (!committed) throw err;
          // The intake is durable; offering the update again would answer it twice.
          this.options.logger.warn({ ...LOG_FIELDS, err }, "the turn handler failed after accepting an update");
        }
        if (!committed) commit();
        return;
      }
    }
  }

  /** Sent after the offset moved past the update: at most once, and never holding up the poll. */
  private reply(chat: TelegramChat, text: string): void {
    const sending = this.options.replies.send(chat, text, this.stopReplies.signal).catch((err: unknown) => {
      this.options.logger.warn({ ...LOG_FIELDS, err }, "sending a reply failed");
    });
    this.background.add(sending);
    void sending.finally(() => this.background.delete(sending));
  }
}
