import { createLogger, HermesError, systemClock } from "@hermes/common";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { eventually } from "../../../../../test/support/eventually.js";
import { FallbackChain } from "../adapters/fallback.js";
import type { AgentSpec } from "../core/agent-cache.js";
import { AgentCache, buildChain, endpointIdentity, type PreparedAgent, parseFallback } from "./agents.js";
import type { ProfileModelConfig } from "./model-config.js";

const logger = createLogger("test", "silent");

function agent(key: string, signature = "s1"): PreparedAgent {
  return {
    session_id: key,
    spec: {} as AgentSpec,
    signature,
    chain: new FallbackChain([]),
    system_prompt: "",
    tools: [],
    built_at: 0,
  };
}

function cache(options: Partial<{ maxWarm: number; idleMs: number; slotWaitMs: number }> = {}) {
  return new AgentCache({ maxWarm: 2, idleMs: 60_000, slotWaitMs: 1000, ...options }, systemClock, logger, new Registry());
}

describe("AgentCache", () => {
  it("builds on a miss, reuses the agent while the signature holds, rebuilds when it changes", async () => {
    const c = cache();
    const first = await c.acquire("s", "sig-a", () => agent("s", "sig-a"));
    c.release("s", false);
    const again = await c.acquire("s", "sig-a", () => agent("s", "other"));
    expect(again).toBe(first);
    c.release("s", false);
    const rebuilt = await c.acquire("s", "sig-b", () => agent("s", "sig-b"));
    expect(rebuilt).not.toBe(first);
    c.release("s", false);
    expect(c.builds).toBe(2);
  });

  it("drops the agent when the turn ends with an eviction (post-turn fallback check)", async () => {
    const c = cache();
    await c.acquire("s", "sig", () => agent("s"));
    c.release("s", { why: "provider_fallback" });
    await c.acquire("s", "sig", () => agent("s"));
    c.release("s", false);
    expect(c.builds).toBe(2);
  });

  it("makes a turn wait for a free slot and builds its agent when one frees", async () => {
    const c = cache({ maxWarm: 1 });
    await c.acquire("a", "sig", () => agent("a"));
    let granted = false;
    const waiting = c
      .acquire("b", "sig", () => agent("b"))
      .then((x) => {
        granted = true;
        return x;
      });
    await eventually(() => expect(c.stats()).toMatchObject({ busy: 1, waiting: 1 }));
    expect(granted).toBe(false);
    c.release("a", false);
    expect((await waiting).session_id).toBe("b");
    expect(c.stats()).toMatchObject({ warm: 1, busy: 1, waiting: 0 });
    c.release("b", false);
  });

  it("ends a wait with slot_wait_timeout, or when the caller gives up", async () => {
    const c = cache({ maxWarm: 1, slotWaitMs: 50 });
    await c.acquire("a", "sig", () => agent("a"));
    const err = await c.acquire("b", "sig", () => agent("b")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HermesError);
    expect((err as HermesError).reason).toBe("slot_wait_timeout");
    expect((err as HermesError).message).toContain("waiting for a free slot");
    const abort = new AbortController();
    const cancelled = c.acquire("c", "sig", () => agent("c"), abort.signal).catch((e: unknown) => e);
    abort.abort();
    expect(((await cancelled) as HermesError).data).toMatchObject({ cancelled: true });
    expect(c.stats().waiting).toBe(0);
    c.release("a", false);
  });

  it("gives the slot back when building fails", async () => {
    const c = cache({ maxWarm: 1 });
    await expect(
      c.acquire("a", "sig", () => {
        throw new HermesError("missing_config", "no provider");
      }),
    ).rejects.toThrow("no provider");
    await c.acquire("b", "sig", () => agent("b"));
    c.release("b", false);
  });

  it("reaps idle agents", async () => {
    const c = cache({ idleMs: 30 });
    await c.acquire("a", "sig", () => agent("a"));
    c.release("a", false);
    expect(c.stats().warm).toBe(1);
    await eventually(() => expect(c.stats().warm).toBe(0));
  });
});

function config(over: Partial<ProfileModelConfig> = {}): ProfileModelConfig {
  return {
    profile: "bob",
    persona: { display_name: "Bob", handle: "bob", title: "", description: "", soul: "" },
    global: {},
    providers: { fake: { base_url: "http://127.0.0.1:9/v1", api_key_env: "FAKE_KEY" } },
    fallback_providers: [],
    platforms: {},
    config_file: "/x/config.yaml",
    secret: (name) => (name === "FAKE_KEY" ? "sk-1" : undefined),
    ...over,
  };
}

describe("provider chain", () => {
  it("builds the primary then the fallbacks (`name` or `name:model`), skipping the primary itself", () => {
    const chain = buildChain(config({ fallback_providers: ["fake", "local", "fake:other-model"] }), {
      model: "m",
      provider: "fake",
      model_source: "global",
      provider_source: "global",
    });
    expect(chain.links.map((l) => [l.provider.name, l.model])).toEqual([
      ["fake", "m"],
      ["local", undefined],
      ["fake", "other-model"],
    ]);
    expect(parseFallback("x:")).toEqual({ provider: "x", model: undefined });
  });

  it("refuses an unconfigured provider with missing_config naming the key to add", () => {
    expect(() => buildChain(config(), { model: "m", provider: "ghost", model_source: "global", provider_source: "global" })).toThrow(
      /providers\.ghost\.base_url/,
    );
  });

  it("folds endpoints and key hashes into the agent identity, so a new key or URL rebuilds", () => {
    const a = endpointIdentity(config(), ["fake", "local"]);
    const b = endpointIdentity(config({ secret: () => "sk-2" }), ["fake", "local"]);
    expect(a).not.toBe(b);
    expect(a).not.toContain("sk-1");
  });
});
