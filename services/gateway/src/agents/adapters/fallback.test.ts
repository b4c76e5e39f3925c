import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../../../test/support/eventually.js";
import { type FakeFailure, type FakeOpenAIServer, startFakeOpenAIServer } from "../../../test/support/fake-openai-server.js";
import { postTurnFallbackCheck } from "../core/agent-cache.js";
import { LocalProvider } from "../core/local-provider.js";
import { type Provider, ProviderError, type TurnRequest, type TurnResult } from "../core/provider.js";
import { completeWithFallback, FallbackChain, REASONS_THE_CALLER_MUST_SEE } from "./fallback.js";
import { OpenAIProvider } from "./openai.js";

let primaryServer: FakeOpenAIServer;
let secondServer: FakeOpenAIServer;
let primary: OpenAIProvider;
let second: OpenAIProvider;
const local = new LocalProvider({ display_name: "Alice", handle: "alice", title: "Researcher" });

/** Counts calls so tests can prove a link was never tried. */
function counting(inner: Provider): Provider & { calls: number } {
  const wrapper = {
    name: inner.name,
    calls: 0,
    complete(request: TurnRequest): Promise<TurnResult> {
      wrapper.calls++;
      return inner.complete(request);
    },
  };
  return wrapper;
}

beforeAll(async () => {
  primaryServer = await startFakeOpenAIServer({ api_key: "k1" });
  secondServer = await startFakeOpenAIServer({ api_key: "k2" });
  primary = new OpenAIProvider({ name: "openai", base_url: primaryServer.url, api_key: "k1", timeout_ms: 300 });
  second = new OpenAIProvider({ name: "openrouter", base_url: secondServer.url, api_key: "k2" });
});

beforeEach(() => {
  primaryServer.reset();
  secondServer.reset();
});

afterAll(async () => {
  await primaryServer.close();
  await secondServer.close();
});

const request: TurnRequest = { model: "fake-small", system_prompt: "You are Alice.", messages: [{ role: "user", content: "status?" }] };

describe("completeWithFallback", () => {
  it("the primary serves: no fallback flag, no failures", async () => {
    const out = await completeWithFallback([{ provider: primary }, { provider: local }], request);
    expect(out).toEqual({
      result: { kind: "text", text: "echo(fake-small): status?" },
      served_by: { provider: "openai", model: "fake-small", index: 0 },
      fallback_active: false,
      failures: [],
    });
  });

  it.each([
    ["rate_limited", "provider_rate_limit"],
    ["overloaded", "provider_server_error"],
    ["unauthorized", "provider_auth_or_access"],
    ["insufficient_quota", "provider_quota_limit"],
    ["model_not_found", "model_unavailable"],
    ["malformed_json", "unknown"],
    ["hang", "delivery_timeout"],
  ] as [FakeFailure, string][])("primary %s falls through to local, which serves and sets the flag", async (failure, reason) => {
    primaryServer.failNext(failure);
    const out = await completeWithFallback([{ provider: primary }, { provider: local }], request);
    expect(out.served_by).toEqual({ provider: "local", model: "fake-small", index: 1 });
    expect(out.fallback_active).toBe(true);
    expect(out.result.kind).toBe("text");
    expect(out.failures).toHaveLength(1);
    expect(out.failures[0]).toMatchObject({ provider: "openai", model: "fake-small", reason });
    expect(out.failures[0]!.message.length).toBeGreaterThan(0);
  });

  it("context overflow goes straight to the caller (it must compact), the fallback is never tried", async () => {
    primaryServer.failNext("context_length");
    const spy = counting(local);
    const err = await completeWithFallback([{ provider: primary }, { provider: spy }], request).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as ProviderError).reason).toBe("context_overflow");
    expect(spy.calls).toBe(0);
    expect(REASONS_THE_CALLER_MUST_SEE.has("context_overflow")).toBe(true);
  });

  it("a cancelled turn is not handed to the fallback", async () => {
    primaryServer.failNext("hang");
    const spy = counting(local);
    const controller = new AbortController();
    const pending = completeWithFallback([{ provider: primary }, { provider: spy }], { ...request, signal: controller.signal }).catch(
      (e: unknown) => e,
    );
    // Cancelled while the primary's request hangs at its server.
    await eventually(() => expect(primaryServer.chatRequests()).toHaveLength(1));
    controller.abort();
    const err = await pending;
    expect((err as ProviderError).cancelled).toBe(true);
    expect(spy.calls).toBe(0);
  });

  it("when every link fails, the primary's error is thrown with all failures listed", async () => {
    primaryServer.failNext("payment_required");
    secondServer.failNext("server_error");
    const err = (await completeWithFallback([{ provider: primary }, { provider: second }], request).catch(
      (e: unknown) => e,
    )) as ProviderError;
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.reason).toBe("provider_quota_limit");
    expect(err.message).toContain("Insufficient credits");
    expect(err.data["fallback_failures"]).toEqual([
      expect.objectContaining({ provider: "openai", reason: "provider_quota_limit", http_status: 402 }),
      expect.objectContaining({ provider: "openrouter", reason: "provider_server_error", http_status: 500 }),
    ]);
  });

  it("asks each link for its own model when configured", async () => {
    primaryServer.failNext("server_error");
    const out = await completeWithFallback([{ provider: primary }, { provider: second, model: "fake-large" }], request);
    expect(out.served_by).toEqual({ provider: "openrouter", model: "fake-large", index: 1 });
    expect((secondServer.chatRequests()[0]!.body as { model: string }).model).toBe("fake-large");
  });

  it("wraps a provider that throws a plain error as unknown and moves on", async () => {
    const broken: Provider = {
      name: "broken",
      complete: async () => {
        throw new TypeError("cannot read properties of undefined");
      },
    };
    const out = await completeWithFallback([{ provider: broken }, { provider: local }], request);
    expect(out.failures).toEqual([
      {
        provider: "broken",
        model: "fake-small",
        reason: "unknown",
        message: "broken failed unexpectedly: cannot read properties of undefined",
      },
    ]);
  });

  it("an empty chain is missing_config", async () => {
    const err = (await completeWithFallback([], request).catch((e: unknown) => e)) as ProviderError;
    expect(err.reason).toBe("missing_config");
  });

  it("FallbackChain names its primary and runs the chain", async () => {
    const chain = new FallbackChain([{ provider: primary }, { provider: local }]);
    expect(chain.primary).toBe("openai");
    expect((await chain.complete(request)).served_by.index).toBe(0);
  });
});

describe("fallback and the agent cache", () => {
  const turn = { global: { model: "fake-small", provider: "openai" } };

  it("a turn the primary served keeps the cached agent", async () => {
    const out = await completeWithFallback([{ provider: primary }, { provider: second }], request);
    expect(postTurnFallbackCheck({ model: out.served_by.model, provider: "openai", fallback_active: out.fallback_active }, turn)).toEqual({
      evict: false,
    });
  });

  it("a fallback serving the configured model name is caught by the flag and evicts", async () => {
    primaryServer.failNext("overloaded");
    const out = await completeWithFallback([{ provider: primary }, { provider: second }], request);
    expect(out.served_by.model).toBe("fake-small");
    // Built as openai/fake-small; a name-only comparison would see nothing wrong.
    const verdict = postTurnFallbackCheck({ model: out.served_by.model, provider: "openai", fallback_active: out.fallback_active }, turn);
    expect(verdict).toMatchObject({ evict: true, why: "provider_fallback" });
  });
});
