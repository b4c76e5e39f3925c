import { describe, expect, it } from "vitest";
import { type AgentSpec, agentSignature, normalizeModelName, postTurnFallbackCheck } from "./agent-cache.js";
import { findChannelOverride, type PlatformsConfig, resolveModel } from "./channel-overrides.js";

const spec: AgentSpec = {
  profile: "alice",
  model: "gpt-4o-mini",
  provider: "openai",
  provider_endpoint: "https://api.openai.com/v1",
  fallback_providers: ["local"],
  system_prompt: "You are Alice, Researcher.",
  ephemeral_system_prompt: "You review code.",
  tools: ["message_agent", "search"],
};

describe("agentSignature", () => {
  it("is stable and ignores tool order and duplicates", () => {
    expect(agentSignature(spec)).toMatch(/^[0-9a-f]{64}$/);
    expect(agentSignature({ ...spec })).toBe(agentSignature(spec));
    expect(agentSignature({ ...spec, tools: ["search", "message_agent", "search"] })).toBe(agentSignature(spec));
  });

  it.each([
    ["profile", { profile: "bob" }],
    ["model", { model: "gpt-4o" }],
    ["provider", { provider: "openrouter" }],
    ["endpoint", { provider_endpoint: "http://127.0.0.1:9999/v1" }],
    ["fallback list", { fallback_providers: [] }],
    ["fallback order", { fallback_providers: ["local", "openrouter"] }],
    ["persona prompt", { system_prompt: "You are Alice, Reviewer." }],
    ["ephemeral prompt (one agent per channel)", { ephemeral_system_prompt: "You chat casually." }],
    ["no ephemeral prompt", { ephemeral_system_prompt: undefined }],
    ["tools (message_agent only in Bot Chat)", { tools: ["search"] }],
  ] as [string, Partial<AgentSpec>][])("changes with the %s", (_what, change) => {
    expect(agentSignature({ ...spec, ...change })).not.toBe(agentSignature(spec));
  });

  it("does not confuse field boundaries", () => {
    expect(agentSignature({ ...spec, system_prompt: "a", ephemeral_system_prompt: "b" })).not.toBe(
      agentSignature({ ...spec, system_prompt: 'a","b', ephemeral_system_prompt: undefined }),
    );
  });
});

describe("normalizeModelName", () => {
  it.each([
    ["gpt-4o", "openai", "gpt-4o"],
    ["openai/gpt-4o", "openai", "gpt-4o"],
    [" OpenAI/GPT-4o ", "openai", "gpt-4o"],
    ["anthropic/claude-sonnet-4.6", "openai", "anthropic/claude-sonnet-4.6"],
    ["anthropic/claude-sonnet-4.6", "anthropic", "claude-sonnet-4.6"],
  ])("%s under %s → %s", (model, provider, expected) => {
    expect(normalizeModelName(model, provider)).toBe(expected);
  });
});

describe("postTurnFallbackCheck", () => {
  const platforms: PlatformsConfig = {
    discord: {
      channel_overrides: {
        "123456789012345678": { model: "anthropic/claude-sonnet-4.6", provider: "anthropic", system_prompt: "You review code." },
        "777": { provider: "openrouter" },
      },
    },
  };
  const global = { model: "gpt-4o-mini", provider: "openai" };
  const dev = findChannelOverride(platforms, { platform: "discord", chat_id: "123456789012345678" })!.override;

  function agentBuiltFor(turn: Parameters<typeof resolveModel>[0]) {
    const r = resolveModel(turn);
    return { model: r.model, provider: r.provider, fallback_active: false };
  }

  it("keeps the agent of a chat with a channel override, turn after turn (the PR #133948 bug)", () => {
    const turn = { channel: dev, global };
    const agent = agentBuiltFor(turn);
    // The scenario really differs from the global model: a global-only baseline would evict here.
    expect(agent.model).not.toBe(global.model);
    for (let i = 0; i < 5; i++) expect(postTurnFallbackCheck(agent, turn)).toEqual({ evict: false });
  });

  it("keeps the agent of a thread that inherits its parent channel's override", () => {
    const inherited = findChannelOverride(platforms, {
      platform: "discord",
      chat_id: "1",
      thread_id: "2",
      parent_id: "123456789012345678",
    })!.override;
    const turn = { channel: inherited, global };
    expect(postTurnFallbackCheck(agentBuiltFor(turn), turn)).toEqual({ evict: false });
  });

  it("keeps the agent of a plain chat and of an intentional /model switch", () => {
    expect(postTurnFallbackCheck(agentBuiltFor({ global }), { global })).toEqual({ evict: false });
    const switched = { session: { model: "tiny", provider: "local" }, channel: dev, global };
    expect(postTurnFallbackCheck(agentBuiltFor(switched), switched)).toEqual({ evict: false });
  });

  it("keeps a provider-only override on the global model", () => {
    const turn = { channel: { provider: "openrouter" }, global };
    const agent = agentBuiltFor(turn);
    expect(agent).toMatchObject({ model: "gpt-4o-mini", provider: "openrouter" });
    expect(postTurnFallbackCheck(agent, turn)).toEqual({ evict: false });
  });

  it("tolerates a provider prefix on either side", () => {
    const turn = { channel: dev, global };
    expect(postTurnFallbackCheck({ model: "claude-sonnet-4.6", provider: "anthropic", fallback_active: false }, turn)).toEqual({
      evict: false,
    });
  });

  it("a real fallback to another provider still evicts, with or without an override", () => {
    for (const turn of [{ channel: dev, global }, { global }]) {
      const verdict = postTurnFallbackCheck({ model: "local", provider: "local", fallback_active: true }, turn);
      expect(verdict).toMatchObject({ evict: true, why: "provider_fallback" });
    }
  });

  it("a fallback serving the configured model name is caught by the flag, not the names", () => {
    const turn = { channel: dev, global };
    const sameName = { ...agentBuiltFor(turn), fallback_active: true };
    expect(postTurnFallbackCheck(sameName, turn)).toMatchObject({ evict: true, why: "provider_fallback" });
  });

  it("evicts when the agent's provider or model no longer matches the baseline without the flag", () => {
    const turn = { channel: dev, global };
    expect(postTurnFallbackCheck({ model: "anthropic/claude-sonnet-4.6", provider: "openai", fallback_active: false }, turn)).toMatchObject(
      {
        evict: true,
        why: "provider_mismatch",
      },
    );
    expect(postTurnFallbackCheck({ model: "claude-haiku", provider: "anthropic", fallback_active: false }, turn)).toMatchObject({
      evict: true,
      why: "model_mismatch",
    });
  });

  it("a session override that was dropped since the agent was built evicts it", () => {
    const built = agentBuiltFor({ session: { model: "tiny" }, channel: dev, global });
    expect(postTurnFallbackCheck(built, { channel: dev, global })).toMatchObject({ evict: true, why: "model_mismatch" });
  });

  it("a config that no longer resolves evicts instead of throwing", () => {
    expect(
      postTurnFallbackCheck({ model: "x", provider: "openai", fallback_active: false }, { global: { provider: "openai" } }),
    ).toMatchObject({
      evict: true,
      why: "no_baseline",
    });
  });
});
