import type { ChatLocation } from "../../../agents/core/channel-overrides.js";
import { type RoutingOrigin, routingKey } from "../../../identity/core/routing-key.js";
import type { TelegramChat } from "./intake.js";

export const TELEGRAM_PLATFORM = "telegram";

/**
 * One session per chat and per forum topic: `agent:<profile>:telegram:<chat_type>:<chat_id>[:<topic_id>]`.
 * The chat type is Telegram's own (private, group, supergroup). A group upgraded to a supergroup
 * gets a new chat id from Telegram, and with it a new session.
 */
export function telegramOrigin(profile: string, chat: TelegramChat): RoutingOrigin {
  return {
    profile,
    platform: TELEGRAM_PLATFORM,
    chat_type: chat.type,
    chat_id: chat.id,
    ...(chat.topic_id !== undefined ? { thread_id: chat.topic_id } : {}),
  };
}

/** The routing key, which is also the session key of the chat (or topic). */
export function telegramSessionKey(profile: string, chat: TelegramChat): string {
  return routingKey(telegramOrigin(profile, chat));
}

/**
 * Where the channel-override lookup starts. Telegram override keys are `chat:topic` for a topic and
 * `chat` for the chat, so a topic's location is its `chat:topic` key with the chat as the parent:
 * the shared lookup (exact id, then thread, then parent) then tries the topic first and falls back
 * to the chat. The topic id alone is never a key (it would collide with a private chat's id).
 */
export function telegramOverrideLocation(chat: TelegramChat): ChatLocation {
  return chat.topic_id !== undefined
    ? { platform: TELEGRAM_PLATFORM, chat_id: `${chat.id}:${chat.topic_id}`, parent_id: chat.id }
    : { platform: TELEGRAM_PLATFORM, chat_id: chat.id };
}

/**
 * The mesh-wide singleton that lets one gateway poll a bot token: `telegram:` and the first 16 hex
 * digits of the token's SHA-256, so the name identifies the bot without revealing the token.
 */
export function telegramSingletonName(token: string, sha256Hex: (text: string) => string): string {
  return `telegram:${sha256Hex(token).slice(0, 16).toLowerCase()}`;
}
