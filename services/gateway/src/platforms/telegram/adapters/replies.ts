import { type Logger, sleep } from "@hermes/common";
import { type ApiFailure, decideSendRetry } from "../core/api-failure.js";
import type { TelegramChat } from "../core/intake.js";
import { failureReply, planReply, type SendMessageParams, TYPING_REFRESH_MS, typingAction } from "../core/outbound.js";
import type { BotApi } from "./bot-api.js";

export interface SendReport {
  /** Messages Telegram accepted. */
  sent: number;
  /** Messages the reply was split into. */
  planned: number;
  /** Why the rest was not sent. */
  failure?: ApiFailure | undefined;
}

export interface SendProgress {
  /** Messages of the split already sent. */
  from?: number | undefined;
  onSent?: ((sent: number) => void) | undefined;
}

export interface TelegramReplierOptions {
  logger: Pick<Logger, "info" | "warn" | "error">;
  random?: () => number;
  /** How a retry waits (tests record the delays instead of spending them). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/**
 * Sends answers into a chat: split into messages of at most 4,096 characters, plain text with
 * entities, in the chat's topic. Each message is retried on 429 (after `retry_after`), 5xx and
 * network errors, and re-sent without entities if Telegram rejects them; when one message fails
 * for good the rest are not sent, so a reply never arrives with a hole in the middle.
 */
export class TelegramReplier {
  private readonly random: () => number;
  private readonly wait: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly counters = { messages_sent: 0, send_failures: {} as Record<string, number> };

  constructor(
    private readonly api: BotApi,
    private readonly options: TelegramReplierOptions,
  ) {
    this.random = options.random ?? Math.random;
    this.wait = options.sleep ?? sleep;
  }

  /**
   * Sends `reply` into `chat`. `progress.from` skips the messages of the split that were sent
   * already (a reply resumed after a restart); `progress.onSent` hears each message accepted.
   */
  async send(chat: TelegramChat, reply: string, signal?: AbortSignal, progress: SendProgress = {}): Promise<SendReport> {
    const messages = planReply(chat, reply);
    let sent = Math.min(progress.from ?? 0, messages.length);
    for (const message of messages.slice(sent)) {
      const failure = await this.sendOne(message, signal);
      if (failure) {
        this.counters.send_failures[failure.kind] = (this.counters.send_failures[failure.kind] ?? 0) + 1;
        this.options.logger.warn(
          { platform: "telegram", chat_id: chat.id, sent, planned: messages.length, kind: failure.kind },
          `a reply could not be sent: ${failure.message}`,
        );
        return { sent, planned: messages.length, failure };
      }
      sent += 1;
      this.counters.messages_sent += 1;
      progress.onSent?.(sent);
    }
    return { sent, planned: messages.length };
  }

  /** The short answer to a turn that failed with `reason`. */
  sendFailure(chat: TelegramChat, reason: string, signal?: AbortSignal): Promise<SendReport> {
    return this.send(chat, failureReply(reason), signal);
  }

  /**
   * Shows "typing…" in the chat (and topic) until the returned function is called. Failures are
   * ignored: the indicator is a courtesy and must never delay or fail a turn.
   */
  typing(chat: TelegramChat): () => void {
    const action = typingAction(chat);
    const controller = new AbortController();
    const loop = async () => {
      while (!controller.signal.aborted) {
        await this.api.sendChatAction(action, controller.signal);
        await this.wait(TYPING_REFRESH_MS, controller.signal);
      }
    };
    void loop();
    return () => controller.abort();
  }

  private async sendOne(message: SendMessageParams, signal?: AbortSignal): Promise<ApiFailure | undefined> {
    let params = message;
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.api.sendMessage(params, signal);
      if (outcome.ok) return undefined;
      if (signal?.aborted) return outcome.failure;
      const retry = decideSendRetry(outcome.failure, attempt, (params.entities?.length ?? 0) > 0, this.random);
      if (!retry.retry) return outcome.failure;
      this.options.logger.warn(
        { platform: "telegram", chat_id: params.chat_id, attempt, kind: outcome.failure.kind, retry_in_ms: retry.delay_ms },
        `Telegram did not take a reply message (${outcome.failure.message}); ${retry.without_entities ? "sending it again as plain text" : `sending it again in ${Math.ceil(retry.delay_ms / 1000)} s`}`,
      );
      if (retry.without_entities) params = { ...params, entities: undefined };
      if (retry.delay_ms > 0) await this.wait(retry.delay_ms, signal);
    }
  }
}
