import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { eventually } from "../../../../test/support/eventually.js";
import type { FakeTelegram, SentMessage } from "../../../../test/support/fake-telegram.js";
import { writeHomeEnv } from "./delivery-fixtures.js";
import type { FakeOpenAIServer } from "./fake-openai-server.js";
import type { TestGateway } from "./gateway-harness.js";

/** The group and forum supergroup the Telegram tests talk in (the private chat is Alice's, 42). */
export const GROUP = -1001234567890;
export const ALLOWED_CHATS = ["42", String(GROUP)];

export interface TelegramHomeOptions {
  /** Merged over `platforms.telegram`. */
  telegram?: Record<string, unknown>;
  /** Merged over the top of config.yaml. */
  config?: Record<string, unknown>;
  /** TELEGRAM_BOT_TOKEN in HERMES_HOME/.env (default: the fake's first bot; null: none). */
  token?: string | null;
}

/**
 * A HERMES_HOME whose gateway runs a Telegram bot against the fake Bot API and answers with the
 * fake OpenAI-compatible provider (`echo(<model>): <text>`), the token in HERMES_HOME/.env.
 */
export function telegramHome(telegram: FakeTelegram, provider: FakeOpenAIServer, options: TelegramHomeOptions = {}): string {
  const home = mkdtempSync(join(tmpdir(), "hermes-tg-"));
  writeTelegramConfig(home, telegram, provider, options);
  const token = options.token === undefined ? telegram.bot.token : options.token;
  writeHomeEnv(home, { FAKE_KEY: "sk-fake", ...(token !== null ? { TELEGRAM_BOT_TOKEN: token } : {}) });
  return home;
}

export function writeTelegramConfig(
  home: string,
  telegram: FakeTelegram,
  provider: FakeOpenAIServer,
  options: TelegramHomeOptions = {},
): void {
  const config = {
    provider: "fake",
    model: "small-model",
    providers: { fake: { base_url: provider.url, api_key_env: "FAKE_KEY" } },
    platforms: {
      telegram: { enabled: true, api_root: telegram.apiRoot, allowed_chats: ALLOWED_CHATS, poll_timeout_seconds: 5, ...options.telegram },
    },
    ...options.config,
  };
  writeFileSync(join(home, "config.yaml"), stringify(config));
}

/** The messages sent into one chat (and topic), in order. */
export function sentTo(telegram: FakeTelegram, chatId: number, topicId?: number): SentMessage[] {
  return telegram.sent().filter((m) => m.chat_id === chatId && m.message_thread_id === topicId);
}

/** Waits for the `count`-th message sent into a chat (and topic) and returns all of them. */
export function waitForSentTo(
  telegram: FakeTelegram,
  count: number,
  chatId: number,
  topicId?: number,
  timeoutMs = 15_000,
): Promise<SentMessage[]> {
  return eventually(
    () => {
      const sent = sentTo(telegram, chatId, topicId);
      return sent.length >= count && sent;
    },
    { timeoutMs, what: `${count} message(s) to chat ${chatId}${topicId !== undefined ? ` topic ${topicId}` : ""}` },
  );
}

/** The model each chat request asked the provider for, and the system prompt it sent. */
export function providerCalls(provider: FakeOpenAIServer): { model: string; system: string | undefined; user: string | undefined }[] {
  return provider.chatRequests().map((r) => {
    const body = r.body as { model: string; messages: { role: string; content: string }[] };
    return {
      model: body.model,
      system: body.messages.find((m) => m.role === "system")?.content,
      user: body.messages.filter((m) => m.role === "user").at(-1)?.content,
    };
  });
}

export interface BindingRow {
  profile: string;
  chat_id: string;
  topic_id: string;
  session_id: string;
  session_key: string;
}

/** The gateway's telegram_topics rows, by chat and topic. */
export function bindings(t: TestGateway): BindingRow[] {
  return t.gateway.db
    .prepare("SELECT profile, chat_id, topic_id, session_id, session_key FROM telegram_topics ORDER BY chat_id, topic_id")
    .all() as BindingRow[];
}
