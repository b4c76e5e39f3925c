import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { FakeTelegram, type UserFields } from "../../../../test/support/fake-telegram.js";
import { HELP_TEXT } from "../../src/platforms/telegram/core/intake.js";
import { transcript } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { bindings, GROUP, providerCalls, sentTo, telegramHome, waitForSentTo } from "../support/telegram-fixtures.js";

/**
 * The Telegram platform end to end in one gateway: the fake Bot API server and the fake
 * OpenAI-compatible provider on loopback, real HTTP both ways. Each test talks in its own chat or
 * topic; the provider's answer queue is shared, so the tests run one after the other.
 */

const BOB: UserFields = { id: 43, first_name: "Bob", username: "bob" };
const STRANGER: UserFields = { id: 777, first_name: "Mallory" };
const OVERRIDES = {
  [String(GROUP)]: { model: "chat-model" },
  [`${GROUP}:7`]: { model: "topic-model", system_prompt: "You review code." },
  [`${GROUP}:9`]: { system_prompt: "Only a prompt here." },
};

let telegram: FakeTelegram;
let provider: FakeOpenAIServer;
let t: TestGateway;
let configText: string;

beforeAll(async () => {
  telegram = await FakeTelegram.start();
  provider = await startFakeOpenAIServer();
  const home = telegramHome(telegram, provider, {
    telegram: { allowed_chats: ["42", "43", String(GROUP)], channel_overrides: OVERRIDES },
    config: {
      providers: { fake: { base_url: provider.url, api_key_env: "FAKE_KEY" }, backup: { base_url: provider.url, api_key_env: "FAKE_KEY" } },
      fallback_providers: ["backup"],
    },
  });
  configText = readFileSync(join(home, "config.yaml"), "utf8");
  t = await startTestGateway({ home });
});
afterAll(async () => {
  await t?.destroy();
  await telegram?.close();
  await provider?.close();
});

function session(key: string) {
  return t.gateway.sessions.store.byKey(key);
}

/** Everything queued at the fake was handed over (the offset moved past it). */
async function drained(): Promise<void> {
  await eventually(() => telegram.pending().length === 0, { timeoutMs: 15_000, what: "every update to be confirmed" });
}

describe("telegram: chats and topics", () => {
  it("a private chat turn: typing, the answer, one session and its binding", async () => {
    telegram.privateMessage("hello there");
    const [reply] = await waitForSentTo(telegram, 1, 42);
    expect(reply).toMatchObject({ text: "echo(small-model): hello there" });
    expect(reply!.parse_mode).toBeUndefined();
    expect(telegram.calls("sendChatAction").map((c) => c.params)).toContainEqual(
      expect.objectContaining({ chat_id: 42, action: "typing" }),
    );
    const s = session("agent:default:telegram:private:42");
    expect(s).toMatchObject({ kind: "platform", profile_name: "default" });
    expect(bindings(t)).toContainEqual({
      profile: "default",
      chat_id: "42",
      topic_id: "",
      session_id: s!.session_id,
      session_key: "agent:default:telegram:private:42",
    });
    expect(t.gateway.routing.keysOf("default")).toContain("agent:default:telegram:private:42");
    expect(transcript(t, "default", s!.session_id).map((m) => [m.role, m.content])).toEqual([
      ["user", "hello there"],
      ["assistant", "echo(small-model): hello there"],
    ]);
  });

  it("a forum: one session per topic, replies keep message_thread_id, overrides per topic then per chat", async () => {
    provider.reset();
    telegram.topicMessage("in seven", { chat_id: GROUP, topic_id: 7 });
    const [seven] = await waitForSentTo(telegram, 1, GROUP, 7);
    telegram.topicMessage("in eight", { chat_id: GROUP, topic_id: 8 });
    const [eight] = await waitForSentTo(telegram, 1, GROUP, 8);
    telegram.groupMessage("in general", { chat_id: GROUP, type: "supergroup" });
    const [general] = await waitForSentTo(telegram, 1, GROUP);
    telegram.topicMessage("in nine", { chat_id: GROUP, topic_id: 9 });
    const [nine] = await waitForSentTo(telegram, 1, GROUP, 9);

    expect(seven).toMatchObject({ text: "echo(topic-model): in seven", message_thread_id: 7 });
    expect(eight).toMatchObject({ text: "echo(chat-model): in eight", message_thread_id: 8 });
    expect(general!.message_thread_id).toBeUndefined();
    expect(general!.text).toBe("echo(chat-model): in general");
    // A topic entry wins whole: one that sets only a prompt keeps the global model.
    expect(nine).toMatchObject({ text: "echo(small-model): in nine", message_thread_id: 9 });

    const calls = providerCalls(provider);
    expect(calls.map((c) => c.model)).toEqual(["topic-model", "chat-model", "chat-model", "small-model"]);
    expect(calls[0]!.system?.endsWith("You review code.")).toBe(true);
    expect(calls[1]!.system).not.toContain("You review code.");
    expect(calls[3]!.system?.endsWith("Only a prompt here.")).toBe(true);

    const keys = [7, 8, 9].map((topic) => `agent:default:telegram:supergroup:${GROUP}:${topic}`);
    const sessions = [...keys, `agent:default:telegram:supergroup:${GROUP}`].map((k) => session(k)?.session_id);
    expect(new Set(sessions).size).toBe(4);
    expect(sessions.every((id) => id !== undefined)).toBe(true);
    // The override's prompt is sent per turn and never stored.
    expect(JSON.stringify(transcript(t, "default", sessions[0]!))).not.toContain("You review code.");
    expect(
      bindings(t)
        .filter((b) => b.chat_id === String(GROUP))
        .map((b) => b.topic_id),
    ).toEqual(["", "7", "8", "9"]);
  });

  it("a topic with an override keeps its cached agent across turns; a real fallback evicts it", async () => {
    const builds = t.gateway.chat.agents.builds;
    for (let i = 1; i <= 3; i++) {
      telegram.topicMessage(`cached ${i}`, { chat_id: GROUP, topic_id: 7 });
      await waitForSentTo(telegram, 1 + i, GROUP, 7);
    }
    expect(t.gateway.chat.agents.builds).toBe(builds);

    provider.failNext("server_error");
    telegram.topicMessage("primary down", { chat_id: GROUP, topic_id: 7 });
    const afterFallback = await waitForSentTo(telegram, 5, GROUP, 7);
    expect(afterFallback.at(-1)!.text).toBe("echo(topic-model): primary down");
    telegram.topicMessage("back again", { chat_id: GROUP, topic_id: 7 });
    await waitForSentTo(telegram, 6, GROUP, 7);
    // The fallback flag evicted the agent: the next turn built it again on the primary.
    expect(t.gateway.chat.agents.builds).toBe(builds + 1);
    expect(await t.gateway.metrics.registry.metrics()).toMatch(/hermes_agent_evictions_total\{[^}]*why="provider_fallback"[^}]*\} 1/);
  });

  it("/model in a topic beats the overrides there only; /model --global writes the default but keeps the overrides", async () => {
    telegram.topicMessage("/model custom-model", { chat_id: GROUP, topic_id: 8 });
    const [, notice] = await waitForSentTo(telegram, 2, GROUP, 8);
    expect(notice!.text).toBe("This chat now uses custom-model on fake (from this chat's /model choice).");
    telegram.topicMessage("which?", { chat_id: GROUP, topic_id: 8 });
    expect((await waitForSentTo(telegram, 3, GROUP, 8)).at(-1)!.text).toBe("echo(custom-model): which?");
    telegram.topicMessage("and here?", { chat_id: GROUP, topic_id: 7 });
    expect((await waitForSentTo(telegram, 7, GROUP, 7)).at(-1)!.text).toBe("echo(topic-model): and here?");

    telegram.topicMessage("/model@hermes_test_bot global-two --global", { chat_id: GROUP, topic_id: 7 });
    const global = (await waitForSentTo(telegram, 8, GROUP, 7)).at(-1)!.text;
    expect(global).toContain("Global default set to global-two.");
    expect(global).toContain(`This chat keeps topic-model from platforms.telegram.channel_overrides.${GROUP}:7`);
    expect(readFileSync(join(t.home, "config.yaml"), "utf8")).toMatch(/^model: global-two$/m);
    telegram.privateMessage("default now?", { from: BOB });
    expect((await waitForSentTo(telegram, 1, 43)).at(-1)!.text).toBe("echo(global-two): default now?");
    telegram.topicMessage("still?", { chat_id: GROUP, topic_id: 7 });
    expect((await waitForSentTo(telegram, 9, GROUP, 7)).at(-1)!.text).toBe("echo(topic-model): still?");

    telegram.topicMessage("/model", { chat_id: GROUP, topic_id: 8 });
    expect((await waitForSentTo(telegram, 4, GROUP, 8)).at(-1)!.text).toBe("Using custom-model on fake (from this chat's /model choice).");
    writeFileSync(join(t.home, "config.yaml"), configText);
  });

  it("/help, /start, unknown commands and a malformed /model get an answer of the platform; nothing reaches the model", async () => {
    provider.reset();
    telegram.privateMessage("/help", { from: BOB });
    telegram.privateMessage("/start", { from: BOB });
    telegram.privateMessage("/frobnicate now", { from: BOB });
    telegram.privateMessage("/model a b", { from: BOB });
    const replies = (await waitForSentTo(telegram, 5, 43)).slice(1).map((m) => m.text);
    expect(replies.slice(0, 2)).toEqual([HELP_TEXT, HELP_TEXT]);
    expect(replies[2]).toBe("I don't know /frobnicate. I understand /model and /help; anything else you write is a message to me.");
    expect(replies[3]).toContain("usage: /model");
    expect(provider.chatRequests()).toEqual([]);
  });

  it("a 5,000-character answer arrives as two messages in the topic, nothing lost", async () => {
    const first = "a".repeat(3000);
    const second = "b".repeat(2000);
    provider.replyNext({ text: `${first}\n\n${second}` });
    telegram.topicMessage("write a lot", { chat_id: GROUP, topic_id: 8 });
    const sent = (await waitForSentTo(telegram, 6, GROUP, 8)).slice(-2);
    expect(sent.map((m) => m.text)).toEqual([first, second]);
    expect(sent.every((m) => m.message_thread_id === 8)).toBe(true);
  });

  it("a long answer without breaks, in Cyrillic and emoji with skin tones, is cut between characters", async () => {
    const answer = `a${"я".repeat(3000)}${"👍🏽".repeat(1000)}`;
    provider.replyNext({ text: answer });
    telegram.topicMessage("no spaces please", { chat_id: GROUP, topic_id: 8 });
    const sent = (await waitForSentTo(telegram, 8, GROUP, 8)).slice(-2);
    expect(sent.map((m) => m.text.length)).toEqual([4093, 2908]);
    expect(sent[1]!.text).toBe("👍🏽".repeat(727));
    expect(sent.map((m) => m.text).join("")).toBe(answer);
  });

  it("Markdown-breaking characters are sent as plain text with entities, never parse_mode", async () => {
    const nasty = "a_b *c* [d](e) ~f~ `g` ``` _*[]()~ \\ . ! # + - = | { }";
    telegram.privateMessage(nasty);
    const reply = (await waitForSentTo(telegram, 2, 42)).at(-1)!;
    expect(reply.parse_mode).toBeUndefined();
    expect(reply.text).toContain("a_b *c* [d](e) ~f~ g ``` _*[]()~");
    expect(reply.entities).toEqual([{ type: "code", offset: reply.text.indexOf("g ```"), length: 1 }]);
  });

  it("a failed turn answers its typed reason in one short message", async () => {
    provider.failNext("unauthorized", 2);
    telegram.topicMessage("this fails", { chat_id: GROUP, topic_id: 9 });
    const reply = (await waitForSentTo(telegram, 2, GROUP, 9)).at(-1)!;
    expect(reply.text).toBe(
      "[reason: provider_auth_or_access] The model provider refused this bot's credentials; its operator has to check the API key.",
    );
    expect(reply.message_thread_id).toBe(9);
    expect(await t.gateway.metrics.registry.metrics()).toMatch(
      /hermes_telegram_errors_total\{[^}]*where="turn",kind="provider_auth_or_access"[^}]*\} 1/,
    );
  });
});

describe("telegram: access and bad input", () => {
  it("a chat not in allowed_chats gets one polite refusal and then silence", async () => {
    provider.reset();
    telegram.privateMessage("let me in", { from: STRANGER });
    telegram.privateMessage("please?", { from: STRANGER });
    telegram.privateMessage("sticker next", { from: BOB });
    await waitForSentTo(telegram, 6, 43);
    const refusals = sentTo(telegram, 777);
    expect(refusals.map((m) => m.text)).toEqual([
      "Sorry, this bot does not answer in this chat. Its operator can allow it by adding this chat's id (777) to platforms.telegram.allowed_chats.",
    ]);
    expect(providerCalls(provider).map((c) => c.user)).toEqual(["sticker next"]);
    expect(session("agent:default:telegram:private:777")).toBeUndefined();
    expect(t.gateway.status().platforms.find((p) => p.platform === "telegram")).toMatchObject({ refusals: 1 });
  });

  it("missing fields, edited messages, stickers, photos without text, enormous texts: a clear reply or silence, and the offset moves on", async () => {
    provider.reset();
    const chat = { id: 43, type: "private", first_name: "Bob" };
    const from = { id: 43, is_bot: false, first_name: "Bob" };
    telegram.enqueueRaw("not an update at all");
    telegram.enqueue({ message: { message_id: 9001, chat, text: "no sender" } });
    telegram.enqueue({ message: { message_id: 9002, from, text: "no chat" } });
    telegram.enqueue({ message: { message_id: "x", chat, from, text: "odd id" } });
    telegram.enqueue({ message: "not an object" });
    telegram.enqueue({ edited_message: { message_id: 9003, chat, from, text: "edited" } });
    telegram.enqueue({ message: { message_id: 9004, chat, from, sticker: { file_id: "s" } } });
    telegram.enqueue({ message: { message_id: 9005, chat, from, photo: [{ file_id: "p" }] } });
    telegram.enqueue({ message: { message_id: 9006, chat, from, photo: [{ file_id: "p" }], caption: "a captioned photo" } });
    telegram.enqueue({ message: { message_id: 9007, chat, from, new_chat_members: [from] } });
    telegram.enqueue({ callback_query: { id: "1" } });
    telegram.privateMessage("x".repeat(20_000), { from: BOB });
    telegram.privateMessage("still here?", { from: BOB });
    await drained();
    // The platform's own reply (too long) goes out at once; the turns' answers come from the session's lane.
    const replies = (await waitForSentTo(telegram, 9, 43)).slice(6).map((m) => m.text);
    expect(replies.sort()).toEqual([
      "Your message is 20,000 characters long; I take at most 16,000. Please shorten it or send it in parts.",
      "echo(small-model): a captioned photo",
      "echo(small-model): still here?",
    ]);
    expect(providerCalls(provider).map((c) => c.user)).toEqual(["a captioned photo", "still here?"]);
    const status = t.gateway.status().platforms.find((p) => p.platform === "telegram")!;
    expect(status.ignored).toMatchObject({ missing_fields: 4, edited_message: 1, no_text: 2, service_message: 1, unsupported_update: 1 });
    expect(status.state).toBe("polling");
  });
});

describe("telegram: Bot API failures", () => {
  it("a 429 on sendMessage waits retry_after and sends the answer once", async () => {
    telegram.failNext("sendMessage", 1, { kind: "rate_limited", retry_after: 1 });
    telegram.privateMessage("rate me");
    const reply = (await waitForSentTo(telegram, 3, 42)).at(-1)!;
    expect(reply.text).toBe("echo(small-model): rate me");
    expect(telegram.calls("sendMessage").filter((c) => c.params["text"] === "echo(small-model): rate me")).toHaveLength(2);
    expect(sentTo(telegram, 42).filter((m) => m.text === reply.text)).toHaveLength(1);
  });

  it("a 429 on getUpdates is honoured: the poller waits exactly retry_after", async () => {
    telegram.failNext("getUpdates", 1, { kind: "rate_limited", retry_after: 2 });
    telegram.privateMessage("before the 429");
    await waitForSentTo(telegram, 4, 42);
    const telegramStatus = () => t.gateway.status().platforms.find((p) => p.platform === "telegram")!;
    await eventually(() => expect(telegramStatus()).toMatchObject({ state: "backoff", waiting_seconds: 2 }));
    telegram.privateMessage("after the 429");
    expect((await waitForSentTo(telegram, 5, 42)).at(-1)!.text).toBe("echo(small-model): after the 429");
    expect(telegramStatus().state).toBe("polling");
  });

  it("5xx and dropped connections back off and lose nothing", async () => {
    const errorsBefore = t.gateway.telegram!.status().counters.errors;
    telegram.failNext("getUpdates", 1, { kind: "server_error", status: 503 });
    telegram.failNext("getUpdates", 1, { kind: "drop" });
    telegram.failNext("sendMessage", 1, { kind: "drop" });
    telegram.failNext("sendMessage", 1, { kind: "server_error", status: 500 });
    telegram.privateMessage("through the storm");
    const sent = await waitForSentTo(telegram, 6, 42);
    expect(sent.at(-1)!.text).toBe("echo(small-model): through the storm");
    telegram.privateMessage("after the storm");
    expect((await waitForSentTo(telegram, 7, 42, undefined, 30_000)).at(-1)!.text).toBe("echo(small-model): after the storm");
    const errors = t.gateway.telegram!.status().counters.errors;
    expect(errors["server_error"] ?? 0).toBe((errorsBefore["server_error"] ?? 0) + 1);
    expect(errors["network"] ?? 0).toBe((errorsBefore["network"] ?? 0) + 1);
    expect(sentTo(telegram, 42).filter((m) => m.text.includes("storm"))).toHaveLength(2);
  });

  it("status and metrics: polling, the bot, counters, errors by kind", async () => {
    // The last answer's inbox row ends right after Telegram accepted the message.
    await eventually(() => expect(t.gateway.telegram!.status().in_progress).toBe(0));
    const status = t.gateway.status().platforms;
    expect(status.find((p) => p.platform === "api")).toMatchObject({ state: "on" });
    expect(status.find((p) => p.platform === "telegram")).toMatchObject({
      state: "polling",
      bot: "@hermes_test_bot",
      profile: "default",
      singleton: "",
      chats: 3,
      topics: 3,
      in_progress: 0,
    });
    const metrics = await t.gateway.metrics.registry.metrics();
    expect(metrics).toMatch(/hermes_telegram_updates_received_total\{[^}]*\} [1-9]\d*/);
    expect(metrics).toMatch(/hermes_telegram_replies_sent_total\{[^}]*\} [1-9]\d*/);
    expect(metrics).toMatch(/hermes_telegram_errors_total\{[^}]*where="poll",kind="rate_limited"[^}]*\} 1/);
    expect(metrics).toMatch(/hermes_telegram_poller_state\{[^}]*state="polling"[^}]*\} 1/);
    expect(metrics).toMatch(/hermes_telegram_updates_ignored_total\{[^}]*reason="edited_message"[^}]*\} 1/);
  });
});
