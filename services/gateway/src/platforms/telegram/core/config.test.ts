import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { isChatAllowed, parseTelegramPlatform, resolveBotToken } from "./config.js";

const FILE = "/home/x/.hermes/config.yaml";
const TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

function refusal(section: unknown): HermesError {
  try {
    parseTelegramPlatform(section, FILE);
  } catch (err) {
    if (err instanceof HermesError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("platforms.telegram config", () => {
  it("applies the defaults, and an absent section is a disabled platform", () => {
    expect(parseTelegramPlatform(undefined, FILE)).toEqual({
      enabled: false,
      token_env: "TELEGRAM_BOT_TOKEN",
      api_root: "https://api.telegram.org",
      profile: "default",
      allowed_chats: [],
      allow_all: false,
      poll_timeout_seconds: 30,
      channel_overrides: {},
    });
  });

  it("reads a full section; unquoted YAML ids (numbers) become the same text ids", () => {
    const config = parseTelegramPlatform(
      {
        enabled: true,
        token_env: "ALICE_BOT_TOKEN",
        api_root: "http://127.0.0.1:8081/",
        profile: "alice",
        allowed_chats: [-1001234567890, "42"],
        poll_timeout_seconds: 10,
        channel_overrides: { "-1001234567890": { model: "gpt-5-mini" }, "-1001234567890:7": { system_prompt: "You review code." } },
      },
      FILE,
    );
    expect(config.allowed_chats).toEqual(["-1001234567890", "42"]);
    expect(config.api_root).toBe("http://127.0.0.1:8081");
    expect(config.channel_overrides["-1001234567890:7"]).toEqual({ system_prompt: "You review code." });
    expect(isChatAllowed(config, "42")).toBe(true);
    expect(isChatAllowed(config, "43")).toBe(false);
    expect(isChatAllowed({ ...config, allow_all: true }, "43")).toBe(true);
  });

  it("a section that only holds channel overrides does not need allowed_chats", () => {
    expect(parseTelegramPlatform({ channel_overrides: { "42": { model: "m" } } }, FILE).enabled).toBe(false);
  });

  it("allow_all replaces the list", () => {
    expect(parseTelegramPlatform({ enabled: true, allow_all: true }, FILE).allow_all).toBe(true);
  });

  const refusals: [string, unknown, RegExp][] = [
    [
      "a token in the file",
      { enabled: true, allow_all: true, token: TOKEN },
      /platforms\.telegram\.token: the bot token is never written in config\.yaml.*HERMES_HOME\/\.env/,
    ],
    ["a token even when disabled", { token: "x" }, /platforms\.telegram\.token: the bot token is never written/],
    [
      "enabled without allowed chats",
      { enabled: true },
      /platforms\.telegram\.allowed_chats: required when the bot is enabled.*allow_all: true/,
    ],
    ["enabled with an empty list", { enabled: true, allowed_chats: [] }, /platforms\.telegram\.allowed_chats: required/],
    [
      "a chat id that is not one",
      { enabled: true, allowed_chats: ["@mygroup"] },
      /platforms\.telegram\.allowed_chats\.0: a Telegram chat id/,
    ],
    ["chat id zero", { allowed_chats: [0] }, /allowed_chats\.0: a Telegram chat id/],
    [
      "an override key that is no chat",
      { channel_overrides: { general: { model: "m" } } },
      /platforms\.telegram\.channel_overrides\.general: not a chat id or chat:topic/,
    ],
    ["an override key with two colons", { channel_overrides: { "1:2:3": { model: "m" } } }, /channel_overrides\.1:2:3: not a chat id/],
    [
      "an unknown override key",
      { channel_overrides: { "1": { modle: "m" } } },
      /unknown key "modle" under platforms\.telegram\.channel_overrides\.1/,
    ],
    ["an unknown key", { enabled: true, allow_all: true, polling: true }, /unknown key "polling" under platforms\.telegram/],
    ["a token_env that is a token", { token_env: TOKEN }, /platforms\.telegram\.token_env: an environment variable name/],
    ["an api_root that is no URL", { api_root: "api.telegram.org" }, /platforms\.telegram\.api_root: an http\(s\) URL/],
    ["an api_root with credentials", { api_root: "https://u:p@example.org" }, /api_root: an http\(s\) URL/],
    ["an api_root with a query", { api_root: "https://example.org/?x=1" }, /api_root: an http\(s\) URL/],
    ["an api_root of another scheme", { api_root: "ftp://example.org" }, /api_root: an http\(s\) URL/],
    ["a profile that is not a name", { profile: "../etc" }, /platforms\.telegram\.profile: a profile name/],
    ["a poll timeout of zero (a hot loop)", { poll_timeout_seconds: 0 }, /poll_timeout_seconds/],
    ["a poll timeout beyond Telegram's", { poll_timeout_seconds: 600 }, /poll_timeout_seconds/],
  ];
  it.each(refusals)("refuses %s, naming the key", (_what, section, message) => {
    const err = refusal(section);
    expect(err.reason).toBe("invalid_config");
    expect(err.message.startsWith(`${FILE}: `)).toBe(true);
    expect(err.message).toMatch(message);
  });

  it("never echoes a token written into the file or into token_env", () => {
    for (const section of [{ token: TOKEN }, { token_env: TOKEN }]) expect(refusal(section).message).not.toContain("AAHdq");
  });
});

describe("the bot token", () => {
  it("comes from the named variable, trimmed", () => {
    expect(resolveBotToken("TELEGRAM_BOT_TOKEN", ` ${TOKEN}\n`)).toBe(TOKEN);
  });

  it("missing: missing_config naming the variable and where to put it", () => {
    for (const value of [undefined, "", "   "]) {
      expect(() => resolveBotToken("ALICE_TOKEN", value)).toThrow(
        /ALICE_TOKEN is not set: put ALICE_TOKEN=<token from BotFather> in HERMES_HOME\/\.env/,
      );
    }
  });

  it("malformed: refused without showing the value", () => {
    for (const value of [
      "secret-without-colon-1234567890abcdef",
      "123:short",
      `${TOKEN}/getMe`,
      "12 34:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
    ]) {
      let message = "";
      try {
        resolveBotToken("TELEGRAM_BOT_TOKEN", value);
      } catch (err) {
        message = (err as HermesError).message;
        expect((err as HermesError).reason).toBe("invalid_config");
      }
      expect(message).toMatch(/TELEGRAM_BOT_TOKEN does not look like a bot token.*the value is not shown/);
      expect(message).not.toContain(value);
    }
  });
});
