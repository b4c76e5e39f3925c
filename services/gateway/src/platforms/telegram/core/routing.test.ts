import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { findChannelOverride, type PlatformsConfig, resolveModel } from "../../../agents/core/channel-overrides.js";
import { rekeyRoutingKey } from "../../../identity/core/routing-key.js";
import type { TelegramChat } from "./intake.js";
import { telegramOrigin, telegramOverrideLocation, telegramSessionKey, telegramSingletonName } from "./routing.js";

const dm: TelegramChat = { id: "42", type: "private" };
const group: TelegramChat = { id: "-555", type: "group" };
const forum: TelegramChat = { id: "-1001234567890", type: "supergroup" };
const topic: TelegramChat = { ...forum, topic_id: "7" };
const otherTopic: TelegramChat = { ...forum, topic_id: "8" };

describe("telegram routing keys", () => {
  it.each([
    [dm, "agent:default:telegram:private:42"],
    [group, "agent:default:telegram:group:-555"],
    [forum, "agent:default:telegram:supergroup:-1001234567890"],
    [topic, "agent:default:telegram:supergroup:-1001234567890:7"],
  ])("%j → %s", (chat, key) => {
    expect(telegramSessionKey("default", chat)).toBe(key);
  });

  it("the origin carries the topic as thread_id", () => {
    expect(telegramOrigin("alice", topic)).toEqual({
      profile: "alice",
      platform: "telegram",
      chat_type: "supergroup",
      chat_id: "-1001234567890",
      thread_id: "7",
    });
    expect(telegramOrigin("alice", dm)).not.toHaveProperty("thread_id");
  });

  it("a rename rekeys topic sessions like any other key", () => {
    expect(rekeyRoutingKey(telegramSessionKey("mybot", topic), "mybot", "assistant")).toBe(
      "agent:assistant:telegram:supergroup:-1001234567890:7",
    );
  });
});

describe("telegram channel overrides: topic, then chat", () => {
  const platforms: PlatformsConfig = {
    telegram: {
      channel_overrides: {
        "-1001234567890": { model: "gpt-5-mini" },
        "-1001234567890:7": { system_prompt: "You review code." },
        // A private chat whose id equals a topic id must never be picked for that topic.
        "8": { model: "private-chat-model" },
      },
    },
    api: { channel_overrides: { "42": { model: "api-only" } } },
  };

  it.each([
    ["the topic entry, for its topic", topic, { matched: "chat", id: "-1001234567890:7", override: { system_prompt: "You review code." } }],
    ["the chat entry, for another topic of it", otherTopic, { matched: "parent", id: "-1001234567890", override: { model: "gpt-5-mini" } }],
    ["the chat entry, outside topics", forum, { matched: "chat", id: "-1001234567890", override: { model: "gpt-5-mini" } }],
  ])("%s", (_what, chat, expected) => {
    expect(findChannelOverride(platforms, telegramOverrideLocation(chat))).toMatchObject(expected);
  });

  it("no entry: none (another platform's entry for the same id does not count)", () => {
    expect(findChannelOverride(platforms, telegramOverrideLocation(dm))).toBeUndefined();
    expect(findChannelOverride(platforms, telegramOverrideLocation(group))).toBeUndefined();
  });

  it("the config path names the key, and the first entry found wins whole", () => {
    const match = findChannelOverride(platforms, telegramOverrideLocation(topic))!;
    expect(match.config_path).toBe("platforms.telegram.channel_overrides.-1001234567890:7");
    // The topic entry sets only system_prompt: the model comes from the global config, not the chat entry.
    expect(resolveModel({ channel: match.override, global: { model: "global-model", provider: "openai" } })).toMatchObject({
      model: "global-model",
      model_source: "global",
      ephemeral_system_prompt: "You review code.",
    });
  });
});

describe("the poller singleton", () => {
  const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
  it("is telegram: and 16 hex digits of the token's SHA-256, never the token", () => {
    const token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
    const name = telegramSingletonName(token, sha256);
    expect(name).toBe(`telegram:${sha256(token).slice(0, 16)}`);
    expect(name).toMatch(/^telegram:[0-9a-f]{16}$/);
    expect(name).not.toContain("123456789");
    expect(telegramSingletonName("987:other", sha256)).not.toBe(name);
  });
});
