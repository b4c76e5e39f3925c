import { type Clock, type Db, isoTime, type Logger, settlesWithin, toHermesError } from "@hermes/common";
import type { Registry } from "prom-client";
import type { ChatService } from "../../../agents/app/chat.js";
import type { ProfileService } from "../../../identity/app/profiles.js";
import type { SessionService } from "../../../identity/app/sessions.js";
import type { SessionRow } from "../../../identity/store/sessions-store.js";
import { BotApi } from "../adapters/bot-api.js";
import { type SingletonCoordinator, TelegramPoller, type TelegramPollerStatus, type TelegramWorkHandler } from "../adapters/poller.js";
import { TelegramReplier } from "../adapters/replies.js";
import { botIdOfToken, type TelegramPlatformConfig } from "../core/config.js";
import type { TelegramChat, TelegramWork } from "../core/intake.js";
import { failureReply, interruptedReply } from "../core/outbound.js";
import { TELEGRAM_PLATFORM, telegramOrigin, telegramOverrideLocation } from "../core/routing.js";
import { type InboxEntry, TelegramStore } from "../store/telegram-store.js";
import { registerTelegramMetrics } from "./telegram-metrics.js";

export interface TelegramBotDeps {
  db: Db;
  config: TelegramPlatformConfig;
  /** From the variable named by `token_env`; it never leaves BotApi in a message. */
  token: string;
  chat: ChatService;
  sessions: SessionService;
  profiles: ProfileService;
  clock: Clock;
  logger: Logger;
  registry?: Registry | undefined;
  /** A mesh coordinator: poll only while holding the bot's singleton. Without one, 409 Conflict is the guard. */
  singletons?: SingletonCoordinator | undefined;
}

export interface TelegramBotStatus extends TelegramPollerStatus {
  profile: string;
  /** Messages Telegram accepted from this gateway (answers, failure answers, the platform's own replies). */
  replies_sent: number;
  /** Failures by where (a Bot API call of the poller, an answer that could not be sent after its retries, a turn) and kind. */
  errors: { where: "poll" | "send" | "turn"; kind: string; count: number }[];
  chats: number;
  topics: number;
  /** Updates handed over and not answered yet. */
  in_progress: number;
}

/**
 * The Telegram bot of this gateway: the poller hands each message and `/model` over to `accept`,
 * which records it in the inbox together with the new offset (one transaction); the turn then runs
 * in the chat's (or topic's) session through the turn engine, with "typing…" shown while it runs,
 * and the answer goes back into the same chat and topic. The inbox is what makes a restart lose
 * nothing and answer nothing twice: an update not started runs at the next start, a turn under way
 * when the process died is reported as interrupted (never run again), an answer being sent is
 * continued from the first message Telegram did not accept.
 */
export class TelegramBot implements TelegramWorkHandler {
  readonly api: BotApi;
  private readonly store: TelegramStore;
  private readonly poller: TelegramPoller;
  private readonly replier: TelegramReplier;
  private readonly logger: Logger;
  private readonly work = new Set<Promise<void>>();
  /** Ends answers still being sent (retrying a 429, say) once the stop's grace is over; they resume at the next start. */
  private readonly stopSends = new AbortController();
  private readonly turnErrors: Record<string, number> = {};
  private stopping = false;
  private pollerStopped: Promise<void> | undefined;

  constructor(private readonly deps: TelegramBotDeps) {
    this.logger = deps.logger.child({ module: "telegram" });
    this.api = new BotApi(deps.token, { apiRoot: deps.config.api_root });
    this.store = new TelegramStore(deps.db, botIdOfToken(deps.token));
    this.replier = new TelegramReplier(this.api, { logger: this.logger });
    this.poller = new TelegramPoller({
      api: this.api,
      offsets: { load: () => this.store.loadOffset(), save: (offset) => this.store.saveOffset(offset, this.now()) },
      handler: this,
      replies: this.replier,
      config: deps.config,
      logger: this.logger,
      coordinator: deps.singletons,
      refused: { has: (chatId) => this.store.isRefused(chatId), add: (chatId) => this.store.addRefused(chatId, this.now()) },
    });
    registerTelegramMetrics(deps.registry, () => this.status());
  }

  /** At start, after the turn engine recovered: finish what the inbox holds, then poll. */
  start(): void {
    this.recover();
    this.poller.start();
  }

  /** The stop's first step: no new updates (the poller tells Telegram the final offset and releases the singleton). */
  beginStop(): Promise<void> {
    this.stopping = true;
    this.pollerStopped ??= this.poller.stop();
    return this.pollerStopped;
  }

  /**
   * After the turn engine stopped: answers of finished turns get `graceMs` to go out; what is still
   * being sent then stays in the inbox and is continued at the next start.
   */
  async stop(graceMs: number): Promise<void> {
    await this.beginStop();
    if (!(await settlesWithin(Promise.allSettled([...this.work]), graceMs))) {
      this.logger.warn({ grace_ms: graceMs }, "telegram answers still being sent at shutdown are continued at the next start");
    }
    this.stopSends.abort();
    await Promise.allSettled([...this.work]);
  }

  status(): TelegramBotStatus {
    const counts = Object.values(this.store.bindingCounts()).reduce((a, b) => ({ chats: a.chats + b.chats, topics: a.topics + b.topics }), {
      chats: 0,
      topics: 0,
    });
    const poller = this.poller.status();
    const errors = (
      [
        ["poll", poller.counters.errors],
        ["send", this.replier.counters.send_failures],
        ["turn", this.turnErrors],
      ] as const
    ).flatMap(([where, counts]) => Object.entries(counts).map(([kind, count]) => ({ where, kind, count })));
    return {
      ...poller,
      profile: this.deps.config.profile,
      replies_sent: this.replier.counters.messages_sent,
      errors,
      ...counts,
      in_progress: this.store.inboxSize(),
    };
  }

  /** The poller's handler: the update is in the inbox and the offset past it, in one transaction; then its turn is queued. */
  async accept(work: TelegramWork, commitOffset: () => void): Promise<void> {
    this.store.accept(work, this.now(), commitOffset);
    this.track(this.answer({ update_id: work.update_id, state: "queued", work }));
  }

  private recover(): void {
    const { entries, unreadable } = this.store.inbox();
    for (const updateId of unreadable) {
      this.logger.error({ update_id: updateId }, "an inbox row of the telegram platform could not be read; dropping it");
      this.store.finish(updateId);
    }
    for (const entry of entries) {
      const chat = entry.work.chat;
      switch (entry.state) {
        case "queued":
          this.track(this.answer(entry));
          break;
        case "running":
          this.logger.warn(
            { update_id: entry.update_id, chat_id: chat.id },
            "a telegram turn was interrupted by a restart; telling the chat",
          );
          this.track(this.reply(entry.update_id, chat, interruptedReply()));
          break;
        case "replying":
          this.track(this.reply(entry.update_id, chat, entry.reply?.text ?? interruptedReply(), entry.reply?.sent ?? 0));
          break;
      }
    }
  }

  private track(work: Promise<void>): void {
    const tracked = work.catch((err: unknown) =>
      this.logger.error({ err }, "a telegram update could not be finished; it stays in the inbox"),
    );
    this.work.add(tracked);
    void tracked.finally(() => this.work.delete(tracked));
  }

  /**
   * Runs the update's turn (or `/model`) in its session and sends the answer. Everything up to the
   * turn engine's queue happens synchronously, so the updates of one chat queue in update order.
   */
  private async answer(entry: InboxEntry): Promise<void> {
    const { work } = entry;
    let started = false;
    let stopTyping: (() => void) | undefined;
    let text: string;
    try {
      const profile = this.deps.profiles.resolve(this.deps.config.profile);
      const session = this.sessionFor(profile, work.chat);
      const out = await this.deps.chat.turn({
        profile,
        text: work.text,
        session_id: session.session_id,
        location: telegramOverrideLocation(work.chat),
        onStart: () => {
          started = true;
          this.store.markRunning(work.update_id, this.now());
          if (work.kind === "turn") stopTyping = this.replier.typing(work.chat);
        },
      });
      text = out.reply;
    } catch (err) {
      const e = toHermesError(err);
      // Queued when the gateway began to stop: it stays queued and runs at the next start.
      if (this.stopping && !started && e.reason === "runtime_offline") return;
      // Running when the stop's grace ran out: the turn engine cancelled it.
      const reason = this.stopping && e.data["cancelled"] === true ? "runtime_offline" : e.reason;
      this.turnErrors[reason] = (this.turnErrors[reason] ?? 0) + 1;
      this.logger.warn({ err: e, update_id: work.update_id, chat_id: work.chat.id }, `a telegram turn failed: ${reason}`);
      text = failureReply(reason);
    } finally {
      stopTyping?.();
    }
    await this.reply(work.update_id, work.chat, text);
  }

  /** Sends an answer, noting each message Telegram accepted, and ends the update unless the stop cut the sending short. */
  private async reply(updateId: number, chat: TelegramChat, text: string, alreadySent = 0): Promise<void> {
    if (alreadySent === 0) this.store.markReplying(updateId, text, this.now());
    const report = await this.replier.send(chat, text, this.stopSends.signal, {
      from: alreadySent,
      onSent: (sent) => this.store.markSent(updateId, sent, this.now()),
    });
    // Cut short by the stop: the rest goes out at the next start. A refusal (a blocked bot, a chat gone) ends it here.
    if (report.failure && this.stopSends.signal.aborted) return;
    this.store.finish(updateId);
  }

  /** The session of a chat or topic for `profile`, through its binding (created on first use). */
  private sessionFor(profile: string, chat: TelegramChat): SessionRow {
    const bound = this.store.binding(profile, chat);
    const existing = bound && this.deps.sessions.store.byId(bound.session_id);
    if (existing && bound.bot_id === this.store.botId) return existing;
    const session =
      existing ||
      this.deps.sessions.ensure(
        telegramOrigin(profile, chat),
        "platform",
        `${TELEGRAM_PLATFORM} ${chat.type} ${chat.id}${chat.topic_id !== undefined ? ` / topic ${chat.topic_id}` : ""}`,
      );
    this.store.bind(
      {
        profile,
        bot_id: this.store.botId,
        chat_id: chat.id,
        topic_id: chat.topic_id ?? "",
        chat_type: chat.type,
        session_key: session.session_key,
        session_id: session.session_id,
      },
      this.now(),
    );
    return session;
  }

  private now(): string {
    return isoTime(this.deps.clock.now());
  }
}
