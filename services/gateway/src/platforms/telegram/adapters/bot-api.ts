import { createHash } from "node:crypto";
import { Api, GrammyError, HttpError } from "grammy";
import type { MessageEntity } from "grammy/types";
import { type ApiFailure, classifyBotApiError, redactToken } from "../core/api-failure.js";
import type { SendMessageParams } from "../core/outbound.js";
import { telegramSingletonName } from "../core/routing.js";

export type ApiOutcome<T> = { ok: true; value: T } | { ok: false; failure: ApiFailure };

export interface BotIdentity {
  id: string;
  username?: string | undefined;
}

export interface BotApiOptions {
  /** `platforms.telegram.api_root`: Telegram, or a self-hosted Bot API server. */
  apiRoot: string;
  /** Ceiling of one HTTP request; it must exceed the long-poll timeout (at most 50 s). */
  requestTimeoutSeconds?: number;
}

const DEFAULT_REQUEST_TIMEOUT_SECONDS = 75;

/**
 * grammY types its signal parameter with the abort-controller polyfill it ships for old Node
 * versions; at run time it only calls addEventListener, which Node's own AbortSignal has.
 */
type GrammySignal = Parameters<Api["getMe"]>[0];

function grammySignal(signal: AbortSignal | undefined): GrammySignal {
  return signal as unknown as GrammySignal;
}

function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * The Bot API calls this platform makes, on grammY's `Api` client. Every call answers an
 * ApiOutcome instead of throwing: a `GrammyError` (Telegram answered `ok: false`) becomes its
 * typed failure with `retry_after`; an `HttpError` (no answer, or one that is not JSON) is a
 * network failure. No message leaves this class with the token in it: grammY's inner errors quote
 * the request URL, whose path holds the token.
 */
export class BotApi {
  private readonly api: Api;

  constructor(
    private readonly token: string,
    options: BotApiOptions,
  ) {
    this.api = new Api(token, {
      apiRoot: options.apiRoot,
      timeoutSeconds: options.requestTimeoutSeconds ?? DEFAULT_REQUEST_TIMEOUT_SECONDS,
    });
  }

  /** The mesh singleton that lets one gateway poll this token. */
  get singletonName(): string {
    return telegramSingletonName(this.token, sha256Hex);
  }

  getMe(signal?: AbortSignal): Promise<ApiOutcome<BotIdentity>> {
    return this.call(async () => {
      const me = await this.api.getMe(grammySignal(signal));
      return { id: String(me.id), ...(me.username ? { username: me.username } : {}) };
    });
  }

  /** Long polling and a webhook exclude each other; removing a webhook that is not set is harmless. */
  deleteWebhook(signal?: AbortSignal): Promise<ApiOutcome<true>> {
    return this.call(() => this.api.deleteWebhook({ drop_pending_updates: false }, grammySignal(signal)));
  }

  setMyCommands(commands: readonly { command: string; description: string }[], signal?: AbortSignal): Promise<ApiOutcome<true>> {
    return this.call(() => this.api.setMyCommands([...commands], {}, grammySignal(signal)));
  }

  /** The raw updates (untrusted JSON: the intake checks every field). */
  getUpdates(
    request: { offset: number | undefined; timeout_seconds: number; limit?: number },
    signal?: AbortSignal,
  ): Promise<ApiOutcome<unknown[]>> {
    return this.call(async () => {
      const updates: unknown = await this.api.getUpdates(
        {
          ...(request.offset !== undefined ? { offset: request.offset } : {}),
          timeout: request.timeout_seconds,
          limit: request.limit ?? 100,
        },
        grammySignal(signal),
      );
      if (!Array.isArray(updates)) throw new ProtocolError("getUpdates answered something that is not a list");
      return updates as unknown[];
    });
  }

  sendMessage(params: SendMessageParams, signal?: AbortSignal): Promise<ApiOutcome<{ message_id: number }>> {
    return this.call(async () => {
      const sent = await this.api.sendMessage(
        params.chat_id,
        params.text,
        {
          ...(params.message_thread_id !== undefined ? { message_thread_id: params.message_thread_id } : {}),
          ...(params.entities && params.entities.length > 0 ? { entities: params.entities as MessageEntity[] } : {}),
        },
        grammySignal(signal),
      );
      return { message_id: sent.message_id };
    });
  }

  sendChatAction(
    params: { chat_id: number; action: "typing"; message_thread_id?: number },
    signal?: AbortSignal,
  ): Promise<ApiOutcome<true>> {
    return this.call(() =>
      this.api.sendChatAction(
        params.chat_id,
        params.action,
        params.message_thread_id !== undefined ? { message_thread_id: params.message_thread_id } : {},
        grammySignal(signal),
      ),
    );
  }

  /** Any error of a grammY call as a typed failure, with the token removed from every text. */
  failureOf(err: unknown): ApiFailure {
    const redact = (text: string) => redactToken(text, this.token);
    if (err instanceof GrammyError) {
      return classifyBotApiError({
        error_code: err.error_code,
        description: redact(err.description),
        retry_after: err.parameters.retry_after,
      });
    }
    if (err instanceof ProtocolError) return { kind: "protocol", message: err.message };
    if (err instanceof HttpError) {
      const inner = err.error instanceof Error ? err.error.message : String(err.error);
      return { kind: "network", message: redact(`${err.message} ${inner}`) };
    }
    return { kind: "network", message: redact(err instanceof Error ? err.message : String(err)) };
  }

  private async call<T>(work: () => Promise<T>): Promise<ApiOutcome<T>> {
    try {
      return { ok: true, value: await work() };
    } catch (err) {
      return { ok: false, failure: this.failureOf(err) };
    }
  }
}

class ProtocolError extends Error {}
