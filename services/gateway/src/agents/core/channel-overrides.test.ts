import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import {
  applyModelCommand,
  composeSystemPrompt,
  findChannelOverride,
  type PlatformsConfig,
  parseModelCommand,
  resolveModel,
} from "./channel-overrides.js";

const platforms: PlatformsConfig = {
  discord: {
    channel_overrides: {
      "123456789012345678": { model: "anthropic/claude-sonnet-4.6", provider: "anthropic", system_prompt: "You review code." },
      "987654321098765432": { model: "openai/gpt-5-mini" },
      "555": { system_prompt: "Thread persona only." },
      "777": { provider: "openrouter" },
    },
  },
  api: { channel_overrides: { "42": { model: "big-model" } } },
  telegram: {},
};

const global = { model: "gpt-4o-mini", provider: "openai" };

function caught(fn: () => unknown): HermesError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HermesError) return err;
    throw err;
  }
  throw new Error("expected a HermesError");
}

describe("findChannelOverride", () => {
  it("matches the exact chat id first", () => {
    const m = findChannelOverride(platforms, { platform: "discord", chat_id: "987654321098765432", parent_id: "123456789012345678" });
    expect(m).toMatchObject({ matched: "chat", id: "987654321098765432", override: { model: "openai/gpt-5-mini" } });
    expect(m?.config_path).toBe("platforms.discord.channel_overrides.987654321098765432");
  });

  it("then the thread id, then the parent channel id", () => {
    expect(
      findChannelOverride(platforms, { platform: "discord", chat_id: "1", thread_id: "555", parent_id: "123456789012345678" }),
    ).toMatchObject({
      matched: "thread",
      id: "555",
    });
    expect(
      findChannelOverride(platforms, { platform: "discord", chat_id: "1", thread_id: "2", parent_id: "123456789012345678" }),
    ).toMatchObject({
      matched: "parent",
      override: { provider: "anthropic" },
    });
  });

  it("the first hit wins whole: a thread entry does not borrow the parent's model", () => {
    const m = findChannelOverride(platforms, { platform: "discord", chat_id: "1", thread_id: "555", parent_id: "123456789012345678" });
    expect(m?.override).toEqual({ system_prompt: "Thread persona only." });
    expect(resolveModel({ channel: m?.override, global }).model).toBe("gpt-4o-mini");
  });

  it("compares numeric and bigint ids as strings", () => {
    expect(findChannelOverride(platforms, { platform: "api", chat_id: 42 })).toMatchObject({ id: "42" });
    expect(findChannelOverride(platforms, { platform: "discord", chat_id: 123456789012345678n })).toMatchObject({ matched: "chat" });
    expect(findChannelOverride(platforms, { platform: "discord", chat_id: 0, thread_id: 555 })).toMatchObject({ matched: "thread" });
  });

  it("misses cleanly", () => {
    expect(findChannelOverride(platforms, { platform: "discord", chat_id: "nope" })).toBeUndefined();
    expect(findChannelOverride(platforms, { platform: "telegram", chat_id: "42" })).toBeUndefined();
    expect(findChannelOverride(platforms, { platform: "slack", chat_id: "42" })).toBeUndefined();
    expect(findChannelOverride(undefined, { platform: "api", chat_id: "42" })).toBeUndefined();
    expect(findChannelOverride(platforms, { platform: "api", chat_id: "", thread_id: null, parent_id: undefined })).toBeUndefined();
    expect(findChannelOverride(platforms, { platform: "api", chat_id: "toString" })).toBeUndefined();
  });

  it("works on config parsed from YAML with quoted ids", () => {
    const parsed = parseYaml(`
platforms:
  discord:
    channel_overrides:
      "123456789012345678": {model: big}
      42: {model: small}
`) as { platforms: PlatformsConfig };
    expect(findChannelOverride(parsed.platforms, { platform: "discord", chat_id: 123456789012345678n })?.override.model).toBe("big");
    expect(findChannelOverride(parsed.platforms, { platform: "discord", chat_id: 42 })?.override.model).toBe("small");
  });
});

describe("resolveModel", () => {
  const channel = { model: "big-model", provider: "anthropic", system_prompt: "You review code." };

  it("global when nothing overrides", () => {
    expect(resolveModel({ global })).toEqual({
      model: "gpt-4o-mini",
      provider: "openai",
      model_source: "global",
      provider_source: "global",
    });
  });

  it("channel override beats global", () => {
    expect(resolveModel({ channel, global })).toEqual({
      model: "big-model",
      provider: "anthropic",
      model_source: "channel",
      provider_source: "channel",
      ephemeral_system_prompt: "You review code.",
    });
  });

  it("session /model beats the channel override, and the channel prompt still applies", () => {
    expect(resolveModel({ session: { model: "tiny", provider: "local" }, channel, global })).toEqual({
      model: "tiny",
      provider: "local",
      model_source: "session",
      provider_source: "session",
      ephemeral_system_prompt: "You review code.",
    });
  });

  it("resolves provider independently of model", () => {
    expect(resolveModel({ session: { model: "tiny" }, channel, global })).toMatchObject({
      model: "tiny",
      provider: "anthropic",
      provider_source: "channel",
    });
    expect(resolveModel({ channel: { provider: "openrouter" }, global })).toMatchObject({
      model: "gpt-4o-mini",
      model_source: "global",
      provider: "openrouter",
      provider_source: "channel",
    });
  });

  it("the channel system_prompt replaces the global ephemeral prompt; an empty one suppresses it", () => {
    const g = { ...global, ephemeral_system_prompt: "Be brief." };
    expect(resolveModel({ global: g }).ephemeral_system_prompt).toBe("Be brief.");
    expect(resolveModel({ channel, global: g }).ephemeral_system_prompt).toBe("You review code.");
    expect(resolveModel({ channel: { model: "x" }, global: g }).ephemeral_system_prompt).toBe("Be brief.");
    expect(resolveModel({ channel: { system_prompt: "" }, global: g })).not.toHaveProperty("ephemeral_system_prompt");
  });

  it("falls back to the local provider when nothing is configured", () => {
    expect(resolveModel({ global: {} })).toEqual({
      model: "local",
      provider: "local",
      model_source: "default",
      provider_source: "default",
    });
  });

  it("a remote provider without a model is missing_config", () => {
    const err = caught(() => resolveModel({ global: { provider: "openai" } }));
    expect(err.reason).toBe("missing_config");
    expect(err.message).toContain("model:");
  });

  it("ignores blank values", () => {
    expect(resolveModel({ session: { model: "  " }, channel: { model: "" }, global })).toMatchObject({
      model: "gpt-4o-mini",
      model_source: "global",
    });
  });
});

describe("composeSystemPrompt", () => {
  it("appends the ephemeral prompt to the bot's own prompt", () => {
    expect(composeSystemPrompt("You are Alice.", "You review code.")).toBe("You are Alice.\n\nYou review code.");
    expect(composeSystemPrompt("You are Alice.")).toBe("You are Alice.");
    expect(composeSystemPrompt("", "Only this.")).toBe("Only this.");
    expect(composeSystemPrompt("Base", "   ")).toBe("Base");
  });
});

describe("/model", () => {
  it.each([
    ["/model", { kind: "show" }],
    ["  /model  ", { kind: "show" }],
    ["/model gpt-4o", { kind: "set", model: "gpt-4o", provider: undefined, global: false }],
    ["/model openai/gpt-4o --global", { kind: "set", model: "openai/gpt-4o", provider: undefined, global: true }],
    ["/model --global big --provider openai", { kind: "set", model: "big", provider: "openai", global: true }],
    ["/model --reset", { kind: "reset" }],
  ])("parses %j", (text, expected) => {
    expect(parseModelCommand(text)).toEqual(expected);
  });

  it.each([
    "/models x",
    "/model a b",
    "/model --provider",
    "/model x --provider Bad!",
    "/model --reset x",
    "/model --global",
    "/model --once x",
    "/model $(x)",
  ])("refuses %j with a usage hint", (text) => {
    const err = caught(() => parseModelCommand(text));
    expect(err.reason).toBe("invalid_params");
    expect(err.message).toContain("usage: /model");
  });

  const channel = {
    override: { model: "big-model", provider: "anthropic" },
    matched: "chat" as const,
    id: "42",
    config_path: "platforms.api.channel_overrides.42",
  };

  it("a session /model beats the channel override", () => {
    const out = applyModelCommand(parseModelCommand("/model tiny --provider local"), { channel, global });
    expect(out.session).toEqual({ model: "tiny", provider: "local" });
    expect(out.global_write).toBeUndefined();
    expect(out.effective).toMatchObject({ model: "tiny", provider: "local", model_source: "session" });
  });

  it("--global writes the default but does not beat a channel override", () => {
    const out = applyModelCommand(parseModelCommand("/model gpt-5 --global"), { session: { model: "old" }, channel, global });
    expect(out.global_write).toEqual({ model: "gpt-5" });
    expect(out.session).toBeUndefined();
    expect(out.effective).toMatchObject({ model: "big-model", model_source: "channel" });
    expect(out.notice).toContain("platforms.api.channel_overrides.42");
  });

  it("--global takes effect at once in a chat without an override", () => {
    const out = applyModelCommand(parseModelCommand("/model gpt-5 --global --provider openai"), { session: { model: "old" }, global });
    expect(out.global_write).toEqual({ model: "gpt-5", provider: "openai" });
    expect(out.effective).toMatchObject({ model: "gpt-5", provider: "openai", model_source: "global" });
    expect(out.notice).toBe("Global default set to gpt-5.");
  });

  it("--global in a chat whose override sets only a prompt takes the new default", () => {
    const promptOnly = { ...channel, override: { system_prompt: "x" } };
    expect(applyModelCommand(parseModelCommand("/model gpt-5 --global"), { channel: promptOnly, global }).effective.model).toBe("gpt-5");
  });

  it("reset drops the session choice; show reports the source", () => {
    const reset = applyModelCommand({ kind: "reset" }, { session: { model: "tiny" }, channel, global });
    expect(reset.session).toBeUndefined();
    expect(reset.effective.model).toBe("big-model");
    const show = applyModelCommand({ kind: "show" }, { session: { model: "tiny" }, channel, global });
    expect(show.notice).toBe("Using tiny on anthropic (from this chat's /model choice).");
    expect(applyModelCommand({ kind: "show" }, { global }).notice).toBe("Using gpt-4o-mini on openai (from the global config).");
  });
});
