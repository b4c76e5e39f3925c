import type { DeliveryReason } from "@hermes/contract";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../../../test/support/eventually.js";
import { type FakeFailure, type FakeOpenAIServer, startFakeOpenAIServer } from "../../../test/support/fake-openai-server.js";
import { MESSAGE_AGENT_TOOL, parseMessageAgentArgs } from "../../delivery/core/message-agent-tool.js";
import { decideRetry } from "../../delivery/core/retry-policy.js";
import { composeSystemPrompt, findChannelOverride, resolveModel } from "../core/channel-overrides.js";
import { type ChatMessage, ProviderError, type TurnRequest } from "../core/provider.js";
import { OpenAIProvider } from "./openai.js";

let server: FakeOpenAIServer;
let provider: OpenAIProvider;

beforeAll(async () => {
  server = await startFakeOpenAIServer({ api_key: "sk-test" });
  provider = new OpenAIProvider({ base_url: server.url, api_key: "sk-test", timeout_ms: 5_000 });
});

beforeEach(() => server.reset());

afterAll(async () => {
  await server.close();
});

const history: ChatMessage[] = [
  { role: "user", content: "first question" },
  { role: "assistant", content: "first answer" },
  { role: "user", content: "second question" },
];

function request(overrides: Partial<TurnRequest> = {}): TurnRequest {
  return { model: "fake-small", system_prompt: "You are Alice.", messages: history, ...overrides };
}

async function failure(p: OpenAIProvider, req: TurnRequest = request()): Promise<ProviderError> {
  try {
    await p.complete(req);
  } catch (err) {
    if (err instanceof ProviderError) return err;
    throw err;
  }
  throw new Error("expected a ProviderError");
}

describe("OpenAIProvider: success", () => {
  it("sends system prompt, history and model, and returns the text", async () => {
    const result = await provider.complete(request());
    expect(result).toEqual({ kind: "text", text: "echo(fake-small): second question" });
    const sent = server.chatRequests()[0]!;
    expect(sent.headers.authorization).toBe("Bearer sk-test");
    expect(sent.body).toEqual({
      model: "fake-small",
      messages: [{ role: "system", content: "You are Alice." }, ...history],
    });
  });

  it("injects the channel override's ephemeral prompt per turn and leaves the history untouched", async () => {
    const platforms = { discord: { channel_overrides: { "123": { model: "fake-large", system_prompt: "You review code." } } } };
    const override = findChannelOverride(platforms, { platform: "discord", chat_id: 123 });
    const resolved = resolveModel({ channel: override?.override, global: { model: "fake-small", provider: "openai" } });
    const before = structuredClone(history);
    const system_prompt = composeSystemPrompt("You are Alice.", resolved.ephemeral_system_prompt);
    await provider.complete(request({ model: resolved.model, system_prompt }));
    await provider.complete(request({ model: resolved.model, system_prompt }));
    expect(history).toEqual(before);
    for (const sent of server.chatRequests()) {
      const body = sent.body as { model: string; messages: { role: string; content: string }[] };
      expect(body.model).toBe("fake-large");
      expect(body.messages[0]).toEqual({ role: "system", content: "You are Alice.\n\nYou review code." });
      expect(body.messages.filter((m) => m.role === "system")).toHaveLength(1);
      expect(body.messages.slice(1)).toEqual(history);
    }
  });

  it("omits an empty system prompt and drops invalid names", async () => {
    await provider.complete(
      request({
        system_prompt: "",
        messages: [
          { role: "user", content: "hi", name: "bob builder" },
          { role: "user", content: "yo", name: "bob" },
        ],
      }),
    );
    expect((server.chatRequests()[0]!.body as { messages: unknown[] }).messages).toEqual([
      { role: "user", content: "hi" },
      { role: "user", content: "yo", name: "bob" },
    ]);
  });

  it("offers tools and returns tool calls, then sends the tool round-trip in OpenAI form", async () => {
    const ask: TurnRequest = request({
      messages: [{ role: "user", content: '#call message_agent {"target":"bob","message":"$(id) `x`"}' }],
      tools: [MESSAGE_AGENT_TOOL],
    });
    const result = await provider.complete(ask);
    expect(result.kind).toBe("tool_calls");
    if (result.kind !== "tool_calls") return;
    const call = result.tool_calls[0]!;
    expect(call.name).toBe("message_agent");
    expect(parseMessageAgentArgs(call.arguments)).toEqual({ target: "bob", message: "$(id) `x`" });
    expect((server.chatRequests()[0]!.body as { tools: unknown[] }).tools).toEqual([
      {
        type: "function",
        function: { name: "message_agent", description: MESSAGE_AGENT_TOOL.description, parameters: MESSAGE_AGENT_TOOL.parameters },
      },
    ]);

    const followUp: ChatMessage[] = [
      ...ask.messages,
      { role: "assistant", content: "", tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: '{"status":"queued","delivery_id":"dlv_1"}' },
    ];
    const done = await provider.complete(request({ messages: followUp, tools: [MESSAGE_AGENT_TOOL] }));
    expect(done).toEqual({ kind: "text", text: 'tool result: {"status":"queued","delivery_id":"dlv_1"}' });
    const sent = (server.chatRequests()[1]!.body as { messages: unknown[] }).messages;
    expect(sent.slice(2)).toEqual([
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: call.id, type: "function", function: { name: "message_agent", arguments: call.arguments } }],
      },
      { role: "tool", tool_call_id: call.id, content: '{"status":"queued","delivery_id":"dlv_1"}' },
    ]);
  });

  it("accepts a scripted reply with text and tool calls, and content given as parts", async () => {
    server.replyNext({
      text: "Let me ask.",
      tool_calls: [{ id: "c9", name: "message_agent", arguments: { target: "bob", message: "hi" } }],
    });
    expect(await provider.complete(request())).toEqual({
      kind: "tool_calls",
      text: "Let me ask.",
      tool_calls: [{ id: "c9", name: "message_agent", arguments: '{"target":"bob","message":"hi"}' }],
    });
  });

  it("trims a trailing slash from base_url", async () => {
    const p = new OpenAIProvider({ base_url: `${server.url}/`, api_key: "sk-test" });
    await p.complete(request());
    expect(server.chatRequests()[0]!.path).toBe("/v1/chat/completions");
  });
});

type Case = [failure: FakeFailure, reason: DeliveryReason, status: number | undefined, text: string, retry: ReturnType<typeof decideRetry>];

const cases: Case[] = [
  ["unauthorized", "provider_auth_or_access", 401, "Incorrect API key provided", { retry: false }],
  ["forbidden", "provider_auth_or_access", 403, "You are not allowed to sample from fake-small", { retry: false }],
  ["payment_required", "provider_quota_limit", 402, "Insufficient credits", { retry: false }],
  ["insufficient_quota", "provider_quota_limit", 429, "You exceeded your current quota", { retry: false }],
  ["rate_limited", "provider_rate_limit", 429, "Rate limit reached for fake-small", { retry: true, compact: false }],
  ["server_error", "provider_server_error", 500, "The server had an error", { retry: true, compact: false }],
  ["overloaded", "provider_server_error", 503, "The engine is currently overloaded", { retry: true, compact: false }],
  ["bad_gateway_html", "provider_server_error", 502, "502 Bad Gateway nginx", { retry: true, compact: false }],
  ["context_length", "context_overflow", 400, "maximum context length is 8192 tokens", { retry: true, compact: true }],
  ["model_not_found", "model_unavailable", 404, "The model `fake-small` does not exist", { retry: false }],
  ["error_in_200", "provider_server_error", undefined, "Provider returned error: upstream overloaded", { retry: true, compact: false }],
  ["malformed_json", "unknown", 200, "not JSON", { retry: false }],
  ["bad_shape", "unknown", 200, "no choices in the response", { retry: false }],
];

describe("OpenAIProvider: every failure is classified, keeps the provider's text, and retries per the policy", () => {
  it.each(cases)("%s → %s", async (kind, reason, status, text, retry) => {
    server.failNext(kind);
    const err = await failure(provider);
    expect(err.reason).toBe(reason);
    expect(err.http_status).toBe(status);
    expect(err.message).toContain(text);
    expect(err.message.startsWith("openai")).toBe(true);
    expect(err.provider).toBe("openai");
    expect(err.raw).toBeTypeOf("string");
    expect(err.raw!.length).toBeGreaterThan(0);
    expect(err.data).toMatchObject({ provider: "openai" });
    expect(decideRetry({ reason: err.reason, attempts: 1 })).toEqual(retry);
    expect(decideRetry({ reason: err.reason, attempts: 2 })).toEqual({ retry: false });
  });

  it("a wrong key against a key-checking endpoint is auth", async () => {
    const wrong = new OpenAIProvider({ base_url: server.url, api_key: "sk-nope" });
    expect((await failure(wrong)).reason).toBe("provider_auth_or_access");
  });

  it("no key configured is missing_config and sends nothing", async () => {
    const noKey = new OpenAIProvider({ base_url: server.url, api_key: "", api_key_env: "OPENAI_API_KEY" });
    const err = await failure(noKey);
    expect(err.reason).toBe("missing_config");
    expect(err.message).toContain("OPENAI_API_KEY");
    expect(server.chatRequests()).toHaveLength(0);
    expect(decideRetry({ reason: err.reason, attempts: 1 })).toEqual({ retry: false });
  });

  it("a hang past the timeout is delivery_timeout (retryable)", async () => {
    server.failNext("hang");
    const quick = new OpenAIProvider({ base_url: server.url, api_key: "sk-test", timeout_ms: 300 });
    const started = Date.now();
    const err = await failure(quick);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(err.reason).toBe("delivery_timeout");
    expect(err.message).toContain("did not answer within");
    expect(decideRetry({ reason: err.reason, attempts: 1 })).toEqual({ retry: true, compact: false });
  });

  it("a caller abort is reported as cancelled, not as a timeout", async () => {
    server.failNext("hang");
    const controller = new AbortController();
    const pending = failure(provider, request({ signal: controller.signal }));
    // Cancelled while the request hangs at the server.
    await eventually(() => expect(server.chatRequests()).toHaveLength(1));
    controller.abort();
    const err = await pending;
    expect(err.cancelled).toBe(true);
    expect(err.data).toMatchObject({ cancelled: true });
  });

  it("an unreachable endpoint is provider_server_error naming the address", async () => {
    const closed = await startFakeOpenAIServer();
    const url = closed.url;
    await closed.close();
    const err = await failure(new OpenAIProvider({ base_url: url, api_key: "k" }));
    expect(err.reason).toBe("provider_server_error");
    expect(err.message).toContain(url);
    expect(err.message).toMatch(/ECONNREFUSED/);
  });

  it("a fetch that throws something odd never escapes as anything but a ProviderError", async () => {
    const odd = new OpenAIProvider({
      base_url: "http://x.invalid/v1",
      api_key: "k",
      fetch: async () => {
        throw "not even an Error";
      },
    });
    const err = await failure(odd);
    expect(err.reason).toBe("provider_server_error");
    expect(err.message).toContain("not even an Error");
  });

  it("truncates the raw body it keeps", async () => {
    const big = new OpenAIProvider({
      base_url: "http://x.invalid/v1",
      api_key: "k",
      fetch: async () => new Response("x".repeat(100_000), { status: 500 }),
    });
    const err = await failure(big);
    expect(err.reason).toBe("provider_server_error");
    expect(err.raw).toHaveLength(4096);
    expect(err.message.length).toBeLessThan(400);
  });
});
