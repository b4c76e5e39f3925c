import { HermesError, validateConfig } from "@hermes/common/pure";
import { DEFAULT_PROFILE, PROFILE_NAME_RULE } from "@hermes/contract";
import { z } from "zod";
import type { ChannelOverride } from "../../../agents/core/channel-overrides.js";

export const DEFAULT_TOKEN_ENV = "TELEGRAM_BOT_TOKEN";
export const DEFAULT_API_ROOT = "https://api.telegram.org";
/** How long one getUpdates call waits for news on the server (Telegram holds the request open). */
export const DEFAULT_POLL_TIMEOUT_SECONDS = 30;

/** Telegram chat ids are non-zero integers (users positive, groups negative, supergroups -100…). */
const CHAT_ID = /^-?[1-9][0-9]{0,19}$/;
/** A channel-override key: a chat, or a forum topic of a chat as `chat:topic`. */
const OVERRIDE_KEY = /^-?[1-9][0-9]{0,19}(?::[1-9][0-9]{0,19})?$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const TOKEN_REFUSAL =
  "the bot token is never written in config.yaml: put TELEGRAM_BOT_TOKEN=<token from BotFather> in HERMES_HOME/.env " +
  "(mode 0600) or the environment, and name another variable with token_env if you need to";

/** YAML reads an unquoted id as a number; both forms mean the same chat. */
const chatId = z
  .union([z.string(), z.number().int()])
  .transform((v) => String(v).trim())
  .pipe(z.string().regex(CHAT_ID, "a Telegram chat id: an integer such as 42 or -1001234567890"));

const channelOverride = z
  .object({
    model: z.string().min(1).optional(),
    provider: z.string().min(1).optional(),
    system_prompt: z.string().max(64_000).optional(),
  })
  .strict();

const apiRoot = z
  .string()
  .trim()
  .transform((v) => v.replace(/\/+$/, ""))
  .refine((v) => {
    try {
      const url = new URL(v);
      return (url.protocol === "https:" || url.protocol === "http:") && !url.username && !url.password && !url.search && !url.hash;
    } catch {
      return false;
    }
  }, "an http(s) URL such as https://api.telegram.org or http://127.0.0.1:8081 (a self-hosted Bot API server), without user:password, query or #fragment");

/**
 * `platforms.telegram`. The poller is opt-in (`enabled` defaults to false), because a profile may
 * hold a `platforms.telegram` section only for its channel overrides.
 */
export const telegramPlatformSchema = z
  .object({
    enabled: z.boolean().default(false),
    token_env: z.string().regex(ENV_NAME, "an environment variable name such as TELEGRAM_BOT_TOKEN").default(DEFAULT_TOKEN_ENV),
    /** Refused whatever its value; declared so the message says why instead of "unknown key". */
    token: z
      .unknown()
      .optional()
      .refine((v) => v === undefined, TOKEN_REFUSAL),
    api_root: apiRoot.default(DEFAULT_API_ROOT),
    profile: z.string().regex(new RegExp(PROFILE_NAME_RULE), `a profile name matching ${PROFILE_NAME_RULE}`).default(DEFAULT_PROFILE),
    allowed_chats: z.array(chatId).optional(),
    allow_all: z.boolean().default(false),
    poll_timeout_seconds: z.number().int().min(1).max(50).default(DEFAULT_POLL_TIMEOUT_SECONDS),
    channel_overrides: z
      .record(z.string(), channelOverride)
      .superRefine((overrides, ctx) => {
        for (const key of Object.keys(overrides)) {
          if (!OVERRIDE_KEY.test(key)) {
            ctx.addIssue({
              code: "custom",
              path: [key],
              message: `not a chat id or chat:topic (such as "-1001234567890" or "-1001234567890:7"); quote the key in YAML`,
            });
          }
        }
      })
      .optional(),
  })
  .strict()
  .superRefine((section, ctx) => {
    if (section.enabled && !section.allow_all && (section.allowed_chats ?? []).length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["allowed_chats"],
        message:
          "required when the bot is enabled: list the chat ids that may talk to it (a user's id for a private chat, the group's id for a group), or set allow_all: true",
      });
    }
  });

export interface TelegramPlatformConfig {
  enabled: boolean;
  token_env: string;
  api_root: string;
  profile: string;
  /** Chat ids as text. Ignored when allow_all is set. */
  allowed_chats: string[];
  allow_all: boolean;
  poll_timeout_seconds: number;
  channel_overrides: Record<string, ChannelOverride>;
}

/** Validates a `platforms.telegram` section (undefined: the platform is off), naming the bad key in the message. */
export function parseTelegramPlatform(section: unknown, file: string): TelegramPlatformConfig {
  const wrapped = z.object({ platforms: z.object({ telegram: telegramPlatformSchema }) });
  return telegramPlatformConfig(validateConfig(wrapped, { platforms: { telegram: section ?? {} } }, file).platforms.telegram);
}

/** A section the config schema already validated, with the defaults filled in. */
export function telegramPlatformConfig(telegram: z.output<typeof telegramPlatformSchema> | undefined): TelegramPlatformConfig {
  if (telegram === undefined) return telegramPlatformConfig(telegramPlatformSchema.parse({}));
  return {
    enabled: telegram.enabled,
    token_env: telegram.token_env,
    api_root: telegram.api_root,
    profile: telegram.profile,
    allowed_chats: telegram.allowed_chats ?? [],
    allow_all: telegram.allow_all,
    poll_timeout_seconds: telegram.poll_timeout_seconds,
    channel_overrides: telegram.channel_overrides ?? {},
  };
}

/** What BotFather hands out: the bot's numeric id, a colon, and the secret. */
const BOT_TOKEN = /^[0-9]{1,20}:[A-Za-z0-9_-]{20,200}$/;

/**
 * The bot token from the environment or a .env file. The messages name the variable, never the
 * value, so a mistyped token is not echoed into logs.
 */
export function resolveBotToken(tokenEnv: string, value: string | undefined): string {
  const token = value?.trim() ?? "";
  if (token.length === 0) {
    throw new HermesError(
      "missing_config",
      `platforms.telegram is enabled but ${tokenEnv} is not set: put ${tokenEnv}=<token from BotFather> in HERMES_HOME/.env (mode 0600) or the environment`,
      { data: { token_env: tokenEnv } },
    );
  }
  if (!BOT_TOKEN.test(token)) {
    throw new HermesError(
      "invalid_config",
      `${tokenEnv} does not look like a bot token (BotFather gives <digits>:<secret>, such as 123456789:AA…); the value is not shown`,
      { data: { token_env: tokenEnv } },
    );
  }
  return token;
}

/** The bot's numeric id: the part of a token before the colon (public; the secret is after it). */
export function botIdOfToken(token: string): string {
  return token.slice(0, token.indexOf(":"));
}

/** Whether a chat may talk to the bot. */
export function isChatAllowed(config: Pick<TelegramPlatformConfig, "allow_all" | "allowed_chats">, chatIdText: string): boolean {
  return config.allow_all || config.allowed_chats.includes(chatIdText);
}
