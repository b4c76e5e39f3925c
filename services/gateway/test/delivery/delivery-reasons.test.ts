import type { DELIVERY_REASONS } from "@hermes/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { toChatMessages } from "../../src/agents/app/chat.js";
import { botChat, createBot, sendAndWait, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type FakeFailure, type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * Every delivery reason end to end: a real gateway, bots on an OpenAI-compatible provider (the fake
 * server, over real HTTP) that fails in each way a provider does. Which failures retry (exactly
 * once, same session), which never do, and what the sender's Bot Chat is told.
 */

let t: TestGateway;
let fake: FakeOpenAIServer;
const FAKE_KEY = "sk-fake-0123456789";

beforeAll(async () => {
  fake = await startFakeOpenAIServer({ api_key: FAKE_KEY });
  const home = (await import("node:fs")).mkdtempSync(`${(await import("node:os")).tmpdir()}/hermes-reasons-`);
  writeHomeConfig(home, {
    providers: {
      fake: { base_url: fake.url, api_key_env: "FAKE_KEY" },
      // The same server with a short timeout, for the hang case.
      fakeslow: { base_url: fake.url, api_key_env: "FAKE_KEY", timeout_seconds: 0.3 },
      nokey: { base_url: fake.url, api_key_env: "NOT_SET_ANYWHERE_KEY" },
    },
    delivery: { retry_delay_seconds: 0 },
  });
  writeHomeEnv(home, { FAKE_KEY });
  t = await startTestGateway({ home });
  createBot(t, "alice", { title: "Sender" });
});
afterAll(async () => {
  await t?.destroy();
  await fake?.close();
});

function requestsFor(model: string) {
  return fake.chatRequests().filter((r) => (r.body as { model?: string }).model === model);
}

function messagesOf(r: { body: unknown }): { role: string; content: string }[] {
  return (r.body as { messages: { role: string; content: string }[] }).messages;
}

let bots = 0;
/** A fresh target bot on `provider` with its own model name, so requests can be told apart. */
function targetBot(provider = "fake"): { name: string; model: string } {
  const name = `bot${++bots}`;
  const model = `m-${name}`;
  createBot(t, name, { title: "Target", provider, model });
  return { name, model };
}

interface Case {
  failure: FakeFailure;
  reason: (typeof DELIVERY_REASONS)[number];
  retried: boolean;
  /** Text the notification must contain (the provider's own words). */
  says: string;
  provider?: string;
}

const CASES: Case[] = [
  { failure: "unauthorized", reason: "provider_auth_or_access", retried: false, says: "Incorrect API key provided" },
  { failure: "forbidden", reason: "provider_auth_or_access", retried: false, says: "You are not allowed to sample" },
  { failure: "payment_required", reason: "provider_quota_limit", retried: false, says: "Insufficient credits" },
  { failure: "insufficient_quota", reason: "provider_quota_limit", retried: false, says: "You exceeded your current quota" },
  { failure: "rate_limited", reason: "provider_rate_limit", retried: true, says: "Rate limit reached" },
  { failure: "server_error", reason: "provider_server_error", retried: true, says: "The server had an error" },
  { failure: "overloaded", reason: "provider_server_error", retried: true, says: "currently overloaded" },
  { failure: "bad_gateway_html", reason: "provider_server_error", retried: true, says: "502 Bad Gateway" },
  { failure: "error_in_200", reason: "provider_server_error", retried: true, says: "upstream overloaded" },
  { failure: "context_length", reason: "context_overflow", retried: true, says: "maximum context length is 8192 tokens" },
  { failure: "model_not_found", reason: "model_unavailable", retried: false, says: "does not exist" },
  { failure: "hang", reason: "delivery_timeout", retried: true, says: "did not answer within 0 s", provider: "fakeslow" },
  { failure: "malformed_json", reason: "unknown", retried: false, says: '"content":"hal' },
  { failure: "bad_shape", reason: "unknown", retried: false, says: "no choices in the response" },
];

describe("every provider failure, end to end through a delivery", () => {
  it.each(CASES)("$failure → $reason, retried: $retried (persistent failure)", async (c) => {
    const target = targetBot(c.provider);
    fake.failModel(target.model, c.failure);
    const receipt = await sendAndWait(t, "alice", target.name, "status report, please");
    fake.clearModel(target.model);
    const attempts = c.retried ? 2 : 1;
    expect(receipt).toMatchObject({ state: "failed", reason: c.reason, attempts, reply: null });
    expect(receipt.error).toContain(c.says);
    expect(requestsFor(target.model)).toHaveLength(attempts);

    const expected = `Delivery to ${target.name} failed [reason: ${c.reason}]: ${receipt.error}`;
    await eventually(() =>
      expect(botChat(t, "alice").at(-1)).toMatchObject({ role: "notification", content: expected, meta: { reason: c.reason } }),
    );
    // A failed turn leaves nothing in the target's transcript: a retry resumes it unchanged.
    expect(botChat(t, target.name)).toEqual([]);
  });

  it.each(CASES.filter((c) => c.retried && c.failure !== "context_length"))(
    "$failure once, then success: the single retry settles it in the same session, unchanged",
    async (c) => {
      const target = targetBot(c.provider);
      await sendAndWait(t, "alice", target.name, "warm up"); // some history in the target's Bot Chat
      fake.reset();
      fake.failNext(c.failure);
      const receipt = await sendAndWait(t, "alice", target.name, "second message");
      expect(receipt).toMatchObject({ state: "settled", attempts: 2, reason: null, error: null });
      const [first, second] = requestsFor(target.model);
      expect(second).toBeDefined();
      // Same session, unchanged: the retry sent exactly what the failed attempt sent.
      expect(messagesOf(second!)).toEqual(messagesOf(first!));
      expect(messagesOf(second!).at(-1)!.content).toBe("Message from 🤖 alice (@alice): second message");
      const chat = botChat(t, target.name);
      expect(chat.filter((m) => m.role === "user").map((m) => m.content)).toEqual([
        "Message from 🤖 alice (@alice): warm up",
        "Message from 🤖 alice (@alice): second message",
      ]);
      const session = t.gateway.deliveries.store.ingress(receipt.delivery_id)!.session_key;
      expect(session).toBe(t.gateway.sessions.botChat(target.name).session_key);
    },
  );

  it("context_overflow: compacts the same session's transcript, then the retry fits", async () => {
    const target = targetBot();
    for (let i = 0; i < 6; i++) await sendAndWait(t, "alice", target.name, `fact number ${i}`);
    const sessionId = t.gateway.sessions.botChat(target.name).session_id;
    const before = botChat(t, target.name);
    expect(before).toHaveLength(12);
    fake.reset();
    fake.failNext("context_length");
    const receipt = await sendAndWait(t, "alice", target.name, "summarise what you know");
    expect(receipt).toMatchObject({ state: "settled", attempts: 2 });
    const [first, second] = requestsFor(target.model);
    expect(messagesOf(first!).length).toBeGreaterThan(messagesOf(second!).length);
    expect(messagesOf(second!).some((m) => m.content.includes("[Context compacted:"))).toBe(true);
    expect(messagesOf(second!).at(-1)!.content).toBe("Message from 🤖 alice (@alice): summarise what you know");
    const after = botChat(t, target.name);
    // The same session id, with a shorter transcript: a note, the kept tail, and the new turn.
    expect(t.gateway.sessions.botChat(target.name).session_id).toBe(sessionId);
    expect(after[0]).toMatchObject({ role: "notification", meta: { compaction: { removed: 8 } } });
    expect(after.length).toBeLessThan(before.length);
    expect(after.at(-1)).toMatchObject({ role: "assistant" });
  });

  it("missing_config: no API key configured, nothing is sent, never retried", async () => {
    const target = targetBot("nokey");
    const receipt = await sendAndWait(t, "alice", target.name, "hello?");
    expect(receipt).toMatchObject({ state: "failed", reason: "missing_config", attempts: 1 });
    expect(receipt.error).toContain("NOT_SET_ANYWHERE_KEY");
    expect(requestsFor(target.model)).toHaveLength(0);
  });

  it("missing_config: a provider name nobody configured", async () => {
    const target = targetBot("nowhere");
    const receipt = await sendAndWait(t, "alice", target.name, "hello?");
    expect(receipt).toMatchObject({ state: "failed", reason: "missing_config", attempts: 1 });
    expect(receipt.error).toContain("providers.nowhere.base_url");
  });

  it("a malformed answer never crashes anything: the next delivery to the same bot works", async () => {
    const target = targetBot();
    fake.failNext("malformed_json");
    const bad = await sendAndWait(t, "alice", target.name, "one");
    expect(bad).toMatchObject({ state: "failed", reason: "unknown" });
    const good = await sendAndWait(t, "alice", target.name, "two");
    expect(good).toMatchObject({ state: "settled", reply: `echo(${target.model}): Message from 🤖 alice (@alice): two` });
  });

  it("a failed retry that had already sent messages is not re-run", async () => {
    const target = targetBot();
    createBot(t, `${target.name}-peer`, {});
    // First reply: a message_agent call (a side effect), then the provider fails.
    fake.replyNext({ tool_calls: [{ name: "message_agent", arguments: { target: `${target.name}-peer`, message: "fyi" } }] });
    fake.failNext("server_error");
    const receipt = await sendAndWait(t, "alice", target.name, "tell your peer");
    expect(receipt).toMatchObject({ state: "failed", reason: "provider_server_error", attempts: 1 });
    expect(receipt.error).toContain("not retried: the failed turn had already sent 1 message");
    expect(requestsFor(target.model)).toHaveLength(2);
  });

  it("the warm agent's remembered history is exactly the stored transcript, including rows other writers appended", async () => {
    const target = targetBot();
    await sendAndWait(t, "alice", target.name, "first");
    // The bot sends mail itself: its reply lands in the bot's own chat as a notification (another writer).
    await sendAndWait(t, target.name, "alice", "ping from the bot");
    await eventually(() => expect(botChat(t, target.name).at(-1)).toMatchObject({ role: "notification" }));
    const stored = botChat(t, target.name);
    await sendAndWait(t, "alice", target.name, "second");
    const sent = messagesOf(requestsFor(target.model).at(-1)!).filter((m) => m.role !== "system");
    const expected = toChatMessages(stored.map((m) => ({ ...m, role: m.role as "user", created_at: "" }))).map((m) => ({
      role: m.role,
      content: m.content,
    }));
    expect(sent).toEqual([...expected, { role: "user", content: "Message from 🤖 alice (@alice): second" }]);
    expect(sent.some((m) => m.content.startsWith(`Message from 🤖 alice (@alice): Hi ${target.name}`))).toBe(true);
  });
});
