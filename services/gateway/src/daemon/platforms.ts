import { readEnvFile } from "@hermes/common";
import type { ChatService } from "../agents/app/chat.js";
import type { ProfileService } from "../identity/app/profiles.js";
import type { SessionService } from "../identity/app/sessions.js";
import { TelegramBot } from "../platforms/telegram/app/telegram-bot.js";
import { resolveBotToken, telegramPlatformConfig } from "../platforms/telegram/core/config.js";
import type { Foundation } from "./foundation.js";

/**
 * The Telegram bot, when `platforms.telegram.enabled` is set in HERMES_HOME/config.yaml. Its token
 * comes from the variable named by `token_env` (the environment, then HERMES_HOME/.env); a missing
 * or malformed one fails the start with a message naming the variable, never the value.
 */
export function telegramBot(
  f: Foundation,
  s: { chat: ChatService; sessions: SessionService; profiles: ProfileService },
): TelegramBot | undefined {
  const config = telegramPlatformConfig(f.settings.file.platforms?.telegram);
  if (!config.enabled) return undefined;
  const token = resolveBotToken(config.token_env, f.env[config.token_env] ?? readEnvFile(f.home.envFile)[config.token_env]);
  try {
    s.profiles.resolve(config.profile);
  } catch {
    const warning = `platforms.telegram.profile is ${config.profile}, which does not exist: the bot answers every message with a failure until the profile is created or the setting fixed`;
    f.startWarnings.push(warning);
    f.logger.warn({ profile: config.profile }, warning);
  }
  return new TelegramBot({
    db: f.db,
    config,
    token,
    chat: s.chat,
    sessions: s.sessions,
    profiles: s.profiles,
    clock: f.clock,
    logger: f.logger,
    registry: f.metrics.registry,
    singletons: f.singletons,
  });
}
