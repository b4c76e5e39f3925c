import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { FakeTelegram } from "../../../../test/support/fake-telegram.js";

let fake: FakeTelegram;
beforeEach(async () => {
  fake = await FakeTelegram.start();
});
afterEach(async () => {
  await fake.close();
});

type Answer = { ok: boolean; result?: unknown; error_code?: number; description?: string; parameters?: { retry_after?: number } };

async function call(
  method: string,
  body?: unknown,
  options: { token?: string; signal?: AbortSignal } = {},
): Promise<{ status: number; json: Answer }> {
  const res = await fetch(`${fake.apiRoot}/bot${options.token ?? fake.bot.token}/${method}`, {
    method: body === undefined ? "GET" : "POST",
    ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return { status: res.status, json: (await res.json()) as Answer };
}

const ids = (result: unknown) => (result as { update_id: number }[]).map((u) => u.update_id);

describe("fake Telegram: methods and tokens", () => {
  it("getMe by GET and POST; an unknown token gets 401, an unknown method 404", async () => {
    expect((await call("getMe")).json).toEqual({
      ok: true,
      result: { id: fake.bot.id, is_bot: true, first_name: "Hermes", username: "hermes_test_bot" },
    });
    expect((await call("getMe", {})).json.ok).toBe(true);
    expect(await call("getMe", undefined, { token: "1:wrong" })).toEqual({
      status: 401,
      json: { ok: false, error_code: 401, description: "Unauthorized" },
    });
    expect((await call("frobnicate")).status).toBe(404);
  });

  it("records setMyCommands, deleteWebhook and sendChatAction with their parameters", async () => {
    await call("setMyCommands", { commands: [{ command: "help", description: "Help" }] });
    await call("deleteWebhook", {});
    await call("sendChatAction", { chat_id: -100, action: "typing", message_thread_id: 7 });
    expect(fake.calls("setMyCommands")[0]!.params).toEqual({ commands: [{ command: "help", description: "Help" }] });
    expect(fake.calls("deleteWebhook")).toHaveLength(1);
    expect(fake.calls("sendChatAction")[0]!.params).toEqual({ chat_id: -100, action: "typing", message_thread_id: 7 });
  });
});

describe("fake Telegram: getUpdates", () => {
  it("answers from the offset and forgets everything below it", async () => {
    const [a, b, c] = [fake.privateMessage("one"), fake.privateMessage("two"), fake.privateMessage("three")];
    expect(ids((await call("getUpdates", { timeout: 0 })).json.result)).toEqual([a, b, c]);
    expect(ids((await call("getUpdates", { offset: b, limit: 1 })).json.result)).toEqual([b]);
    expect(fake.pending()).toEqual([b, c]);
    expect(ids((await call("getUpdates", { offset: c + 1 })).json.result)).toEqual([]);
    expect(fake.pending()).toEqual([]);
  });

  it("a long poll is answered as soon as an update arrives, or empty when its timeout passes", async () => {
    const waiting = call("getUpdates", { timeout: 20 });
    await eventually(() => fake.polls().length === 1);
    const id = fake.topicMessage("hi topic", { chat_id: -1001234567890, topic_id: 7 });
    const answer = await waiting;
    expect(answer.json.result).toMatchObject([
      {
        update_id: id,
        message: { chat: { id: -1001234567890, type: "supergroup", is_forum: true }, message_thread_id: 7, is_topic_message: true },
      },
    ]);
    expect((await call("getUpdates", { offset: id + 1, timeout: 1 })).json.result).toEqual([]);
    expect(fake.polls().map((p) => p.outcome)).toEqual(["updates", "empty"]);
  });

  it("builds private, group and topic messages as Telegram sends them", async () => {
    fake.privateMessage("dm");
    fake.groupMessage("group", { chat_id: -555 });
    fake.topicMessage("topic", { chat_id: -1001234567890, topic_id: 7, from: { id: 9, first_name: "Bob" } });
    const messages = ((await call("getUpdates")).json.result as { message: Record<string, unknown> }[]).map((u) => u.message);
    expect(messages).toMatchObject([
      { chat: { id: 42, type: "private" }, from: { id: 42, is_bot: false, first_name: "Alice" }, text: "dm" },
      { chat: { id: -555, type: "group" }, from: { id: 42 }, text: "group" },
      { chat: { id: -1001234567890, type: "supergroup", is_forum: true }, from: { id: 9 }, message_thread_id: 7, is_topic_message: true },
    ]);
    expect(messages[0]).not.toHaveProperty("message_thread_id");
  });

  it("reads url-encoded and multipart bodies and query strings like JSON", async () => {
    fake.privateMessage("x");
    const form = await fetch(`${fake.apiRoot}/bot${fake.bot.token}/getUpdates`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "timeout=0&limit=1",
    });
    expect(((await form.json()) as Answer).result).toHaveLength(1);
    const multipart = new FormData();
    multipart.set("chat_id", "-100");
    multipart.set("text", "from a form");
    multipart.set("message_thread_id", "3");
    multipart.set("entities", JSON.stringify([{ type: "bold", offset: 0, length: 4 }]));
    await fetch(`${fake.apiRoot}/bot${fake.bot.token}/sendMessage`, { method: "POST", body: multipart });
    await fetch(`${fake.apiRoot}/bot${fake.bot.token}/sendMessage?chat_id=42&text=query`);
    expect(fake.sent()).toMatchObject([
      { chat_id: -100, text: "from a form", message_thread_id: 3, entities: [{ type: "bold", offset: 0, length: 4 }] },
      { chat_id: 42, text: "query" },
    ]);
  });

  it("two overlapping polls of one token: the newcomer gets 409 and is logged; the polls served never overlap", async () => {
    const first = new AbortController();
    const held = call("getUpdates", { timeout: 20 }, { signal: first.signal }).catch(() => undefined);
    await eventually(() => fake.polls().length === 1);
    const second = await call("getUpdates", { timeout: 20 });
    expect(second).toEqual({
      status: 409,
      json: {
        ok: false,
        error_code: 409,
        description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
      },
    });
    expect(fake.overlaps()).toEqual([{ active: 1, newcomer: 2, refused: "newcomer" }]);
    first.abort();
    await held;
    await eventually(() => fake.polls()[0]!.outcome === "aborted");
    expect((await call("getUpdates", { timeout: 0 })).status).toBe(200);
    expect(fake.maxConcurrentPolls()).toBe(1);
  });

  it("with conflict: terminate_old the older poll is ended with 409 instead, as Telegram does", async () => {
    const old = await FakeTelegram.start({ conflict: "terminate_old" });
    try {
      const token = old.bot.token;
      const first = fetch(`${old.apiRoot}/bot${token}/getUpdates?timeout=20`);
      await eventually(() => old.polls().length === 1);
      const second = fetch(`${old.apiRoot}/bot${token}/getUpdates?timeout=1`);
      expect((await first).status).toBe(409);
      expect((await second).status).toBe(200);
      expect(old.overlaps()).toEqual([{ active: 1, newcomer: 2, refused: "active" }]);
      expect(old.maxConcurrentPolls()).toBe(1);
    } finally {
      await old.close();
    }
  });

  it("bots are separate: one bot's poll does not conflict with another's", async () => {
    const other = fake.addBot();
    const a = call("getUpdates", { timeout: 1 });
    const b = call("getUpdates", { timeout: 1 }, { token: other.token });
    expect([(await a).status, (await b).status]).toEqual([200, 200]);
    expect(fake.overlaps()).toEqual([]);
  });
});

describe("fake Telegram: sendMessage", () => {
  it("records chat, text, topic, parse_mode and entities", async () => {
    const answer = await call("sendMessage", {
      chat_id: -1001234567890,
      text: "hello",
      message_thread_id: 7,
      entities: [{ type: "code", offset: 0, length: 5 }],
    });
    expect(answer.json.result).toMatchObject({ message_id: 1, chat: { id: -1001234567890 }, text: "hello", message_thread_id: 7 });
    await call("sendMessage", { chat_id: 42, text: "a\\.b", parse_mode: "MarkdownV2" });
    expect(await fake.waitForSent(2)).toEqual([
      { message_id: 1, chat_id: -1001234567890, text: "hello", message_thread_id: 7, entities: [{ type: "code", offset: 0, length: 5 }] },
      { message_id: 2, chat_id: 42, text: "a\\.b", parse_mode: "MarkdownV2" },
    ]);
  });

  it.each([
    [{ chat_id: 42, text: "x".repeat(4097) }, "Bad Request: message is too long"],
    [{ chat_id: 42, text: "  " }, "Bad Request: message text is empty"],
    [{ text: "x" }, "Bad Request: chat_id is empty"],
    [
      { chat_id: 42, text: "1. done!", parse_mode: "MarkdownV2" },
      "Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'",
    ],
    [
      { chat_id: 42, text: "abc", entities: [{ type: "bold", offset: 2, length: 5 }] },
      "Bad Request: can't parse entities: entity is out of the text",
    ],
  ])("refuses %j like the Bot API (400)", async (body, description) => {
    expect(await call("sendMessage", body)).toEqual({ status: 400, json: { ok: false, error_code: 400, description } });
    expect(fake.sent()).toEqual([]);
  });

  it("takes exactly 4,096 characters", async () => {
    expect((await call("sendMessage", { chat_id: 42, text: "x".repeat(4096) })).status).toBe(200);
  });
});

describe("fake Telegram: injected failures", () => {
  it("429 with retry_after, then normal again", async () => {
    fake.failNext("sendMessage", 2, { kind: "rate_limited", retry_after: 7 });
    for (let i = 0; i < 2; i++) {
      expect(await call("sendMessage", { chat_id: 42, text: "x" })).toEqual({
        status: 429,
        json: { ok: false, error_code: 429, description: "Too Many Requests: retry after 7", parameters: { retry_after: 7 } },
      });
    }
    expect((await call("sendMessage", { chat_id: 42, text: "x" })).status).toBe(200);
    expect(fake.sent()).toHaveLength(1);
  });

  it("5xx as JSON and as an HTML page; a failed getUpdates confirms nothing", async () => {
    const id = fake.privateMessage("keep me");
    fake.failNext("getUpdates", 1, { kind: "server_error", status: 500 });
    fake.failNext("getUpdates", 1, { kind: "server_error", status: 503 });
    fake.failNext("getUpdates", 1, { kind: "server_error_html" });
    expect(await call("getUpdates", { offset: id + 1 })).toEqual({
      status: 500,
      json: { ok: false, error_code: 500, description: "Internal Server Error" },
    });
    expect(await call("getUpdates", { offset: id + 1 })).toEqual({
      status: 503,
      json: { ok: false, error_code: 503, description: "Service Unavailable" },
    });
    const html = await fetch(`${fake.apiRoot}/bot${fake.bot.token}/getUpdates`);
    expect([html.status, html.headers.get("content-type")]).toEqual([502, "text/html"]);
    expect(fake.pending()).toEqual([id]);
  });

  it("a dropped connection", async () => {
    fake.failNext("getMe", 1, { kind: "drop" });
    await expect(call("getMe")).rejects.toThrow();
    expect((await call("getMe")).status).toBe(200);
  });
});
