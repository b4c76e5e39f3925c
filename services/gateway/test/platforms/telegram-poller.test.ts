import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { FakeTelegram } from "../../../../test/support/fake-telegram.js";
import { BotApi } from "../../src/platforms/telegram/adapters/bot-api.js";
import {
  type Scheduler,
  type SingletonCoordinator,
  type TelegramOffsetStore,
  TelegramPoller,
  type TelegramPollerOptions,
  type TelegramWork,
} from "../../src/platforms/telegram/adapters/poller.js";
import { TelegramReplier } from "../../src/platforms/telegram/adapters/replies.js";

/** Timers the test fires by hand: the delay the poller asked for is read, never waited for. */
class ManualScheduler implements Scheduler {
  readonly timers: { fire: () => void; ms: number; done: boolean }[] = [];
  set(fire: () => void, ms: number): unknown {
    const timer = { fire, ms, done: false };
    this.timers.push(timer);
    return timer;
  }
  clear(handle: unknown): void {
    (handle as { done: boolean }).done = true;
  }
  pending(): { fire: () => void; ms: number; done: boolean }[] {
    return this.timers.filter((t) => !t.done);
  }
  fire(): number {
    const [timer] = this.pending();
    if (!timer) throw new Error("no timer pending");
    timer.done = true;
    timer.fire();
    return timer.ms;
  }
}

/** The offset in a file, as a gateway restart would find it. */
class FileOffsets implements TelegramOffsetStore {
  constructor(readonly file: string) {}
  load(): number | undefined {
    try {
      return JSON.parse(readFileSync(this.file, "utf8")).offset as number;
    } catch {
      return undefined;
    }
  }
  save(offset: number): void {
    writeFileSync(this.file, JSON.stringify({ offset }), { mode: 0o600 });
  }
}

class Logs {
  readonly lines: { level: number; msg: string; [k: string]: unknown }[] = [];
  readonly logger = pino(
    { level: "info" },
    new Writable({
      write: (chunk: Buffer, _enc, done) => {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) this.lines.push(JSON.parse(line));
        done();
      },
    }),
  );
  text(): string {
    return this.lines.map((l) => JSON.stringify(l)).join("\n");
  }
  matching(re: RegExp): Logs["lines"] {
    return this.lines.filter((l) => re.test(l.msg));
  }
}

/** The turn engine stand-in: records each work item (committing it) and can answer through the replier. */
class RecordingHandler {
  readonly works: TelegramWork[] = [];
  answer: ((work: TelegramWork) => string | undefined) | undefined;
  replier: TelegramReplier | undefined;
  async accept(work: TelegramWork, commitOffset: () => void): Promise<void> {
    commitOffset();
    this.works.push(work);
    const text = this.answer?.(work);
    if (text !== undefined) await this.replier!.send(work.chat, text);
  }
}

let fake: FakeTelegram;
let dir: string;
const pollers: TelegramPoller[] = [];

beforeEach(async () => {
  fake = await FakeTelegram.start();
  dir = mkdtempSync(join(tmpdir(), "tg-poller-"));
});

afterEach(async () => {
  await Promise.all(pollers.splice(0).map((p) => p.stop()));
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Setup {
  poller: TelegramPoller;
  handler: RecordingHandler;
  logs: Logs;
  offsets: FileOffsets;
  api: BotApi;
  replier: TelegramReplier;
}

function setup(overrides: Partial<TelegramPollerOptions> & { token?: string; offsetsFile?: string } = {}): Setup {
  const logs = new Logs();
  const api = new BotApi(overrides.token ?? fake.bot.token, { apiRoot: fake.apiRoot });
  const handler = new RecordingHandler();
  const replier = new TelegramReplier(api, { logger: logs.logger, sleep: async () => {} });
  handler.replier = replier;
  const offsets = new FileOffsets(overrides.offsetsFile ?? join(dir, "offset.json"));
  const poller = new TelegramPoller({
    api,
    offsets,
    handler,
    replies: replier,
    config: { allow_all: false, allowed_chats: ["42", "-1001234567890"], poll_timeout_seconds: 20, token_env: "TELEGRAM_BOT_TOKEN" },
    logger: logs.logger,
    random: () => 0.5,
    ...overrides,
  });
  pollers.push(poller);
  return { poller, handler, logs, offsets, api, replier };
}

describe("telegram poller against the fake Bot API", () => {
  it("prepares the bot, hands turns over in update order, answers the platform's own replies, and moves the offset past everything", async () => {
    const { poller, handler } = setup();
    const first = fake.privateMessage("one");
    fake.privateMessage("two");
    fake.topicMessage("in the topic", { chat_id: -1001234567890, topic_id: 7 });
    fake.privateMessage("", { extra: { text: undefined, sticker: { file_id: "s" } } });
    fake.enqueue({ edited_message: { message_id: 1, chat: { id: 42, type: "private" }, text: "edit" } });
    fake.enqueueRaw({ no_update_id: true });
    fake.privateMessage("/model big --global");
    fake.privateMessage("/weather");
    const last = fake.privateMessage("three");
    poller.start();

    await eventually(() =>
      expect(handler.works.map((w) => w.text)).toEqual(["one", "two", "in the topic", "/model big --global", "three"]),
    );
    expect(handler.works[2]).toMatchObject({ kind: "turn", chat: { id: "-1001234567890", type: "supergroup", topic_id: "7" } });
    expect(handler.works[3]).toMatchObject({ kind: "command", model: { kind: "set", model: "big", global: true } });
    expect(handler.works.map((w) => w.update_id)).toEqual([...handler.works.map((w) => w.update_id)].sort((a, b) => a - b));
    expect(handler.works[0]!.update_id).toBe(first);

    await eventually(() => expect(poller.status().offset).toBe(last + 1));
    await eventually(() => fake.pending().length === 0, { timeoutMs: 10_000, what: "every update confirmed" });
    expect(fake.sent()).toMatchObject([{ chat_id: 42, text: expect.stringMatching(/^I don't know \/weather/) }]);
    expect(fake.calls("setMyCommands")[0]!.params).toEqual({
      commands: [
        { command: "model", description: "Show or change the model this chat uses" },
        { command: "help", description: "What this bot understands" },
      ],
    });
    expect(fake.calls("deleteWebhook")).toHaveLength(1);
    expect(poller.status()).toMatchObject({
      state: "polling",
      bot: { id: String(fake.bot.id), username: "hermes_test_bot" },
      counters: { turns: 4, commands: 1, replies: 1, ignored: { no_text: 1, edited_message: 1 } },
    });
  });

  it("a chat not allowed gets one polite refusal and nothing else", async () => {
    const { poller, handler } = setup();
    const stranger = { id: 77, first_name: "Eve" };
    fake.privateMessage("hello?", { from: stranger });
    fake.privateMessage("/help", { from: stranger });
    const last = fake.privateMessage("anyone?", { from: stranger });
    poller.start();
    await eventually(() => expect(poller.status().offset).toBe(last + 1));
    await fake.waitForSent(1);
    expect(fake.sent()).toEqual([
      expect.objectContaining({ chat_id: 77, text: expect.stringContaining("this bot does not answer in this chat") }),
    ]);
    expect(handler.works).toEqual([]);
    expect(poller.status().counters).toMatchObject({ refusals: 1, ignored: { already_refused: 2 } });
  });

  it("the offset survives a restart: nothing answered twice, nothing skipped", async () => {
    const offsetsFile = join(dir, "offset.json");
    const one = setup({ offsetsFile, scheduler: new ManualScheduler() });
    const ids = [fake.privateMessage("a"), fake.privateMessage("b"), fake.privateMessage("c")];
    // The confirming getUpdates after the batch never reaches Telegram (a crash right after the
    // commit): Telegram still holds the three updates when the next poller starts.
    one.handler.answer = (work) => {
      if (work.update_id === ids[2]) fake.failNext("getUpdates", 1000, { kind: "drop" });
      return undefined;
    };
    one.poller.start();
    await eventually(() => expect(one.handler.works).toHaveLength(3));
    // Its next poll was dropped; it waits for a timer that never fires, so no request is in flight.
    await eventually(() => expect(one.poller.status()).toMatchObject({ state: "backoff", last_error: { kind: "network" } }));
    await one.poller.stop();
    expect(fake.pending()).toEqual(ids);
    expect(one.offsets.load()).toBe(ids[2]! + 1);

    fake.clearFailures();
    const later = fake.privateMessage("d");
    const two = setup({ offsetsFile });
    two.poller.start();
    await eventually(() => expect(two.handler.works.map((w) => w.text)).toEqual(["d"]));
    expect(two.handler.works[0]!.update_id).toBe(later);
    await eventually(() => expect(fake.calls("getUpdates").at(-1)?.params).toMatchObject({ offset: later + 1 }));
  });

  it("429: waits exactly retry_after as the state machine scheduled it, and polls nothing meanwhile", async () => {
    const scheduler = new ManualScheduler();
    const { poller, handler } = setup({ scheduler });
    fake.failNext("getUpdates", 1, { kind: "rate_limited", retry_after: 7 });
    poller.start();
    await eventually(() =>
      expect(poller.status()).toMatchObject({ state: "backoff", waiting_ms: 7000, last_error: { kind: "rate_limited" } }),
    );
    expect(scheduler.pending().map((t) => t.ms)).toEqual([7000]);
    const polls = fake.calls("getUpdates").length;
    fake.privateMessage("after the wait");
    expect(fake.calls("getUpdates")).toHaveLength(polls);
    expect(scheduler.fire()).toBe(7000);
    await eventually(() => expect(handler.works.map((w) => w.text)).toEqual(["after the wait"]));
    expect(poller.status()).toMatchObject({ state: "polling", last_error: undefined });
  });

  it("5xx and a dropped connection back off, growing; the update then arrives; no message carries the token", async () => {
    const scheduler = new ManualScheduler();
    const { poller, handler, logs } = setup({ scheduler });
    fake.failNext("getUpdates", 1, { kind: "server_error", status: 502 });
    fake.failNext("getUpdates", 1, { kind: "drop" });
    fake.failNext("getUpdates", 1, { kind: "server_error_html" });
    fake.privateMessage("eventually");
    poller.start();
    await eventually(() =>
      expect(poller.status()).toMatchObject({ state: "backoff", waiting_ms: 1000, last_error: { kind: "server_error" } }),
    );
    scheduler.fire();
    await eventually(() => expect(poller.status()).toMatchObject({ waiting_ms: 2000, last_error: { kind: "network" } }));
    const dropped = poller.status().last_error!.message;
    expect(dropped).toContain("/bot<redacted>/getUpdates");
    scheduler.fire();
    await eventually(() => expect(poller.status()).toMatchObject({ waiting_ms: 4000, last_error: { kind: "network" } }));
    scheduler.fire();
    await eventually(() => expect(handler.works.map((w) => w.text)).toEqual(["eventually"]));
    expect(poller.status().state).toBe("polling");
    expect(poller.status().counters.errors).toEqual({ server_error: 1, network: 2 });
    const secret = fake.bot.token.split(":")[1]!;
    expect(logs.text()).toContain("retrying in");
    expect(logs.text()).not.toContain(secret);
    expect(JSON.stringify(poller.status())).not.toContain(secret);
  });

  it("a wrong token: Telegram's 401, a long pause, the error logged without the token", async () => {
    const scheduler = new ManualScheduler();
    const token = "999999:AAWrongTokenForTheFakeServer0000000";
    const { poller, logs } = setup({ scheduler, token });
    poller.start();
    await eventually(() =>
      expect(poller.status()).toMatchObject({ state: "backoff", waiting_ms: 300_000, last_error: { kind: "unauthorized" } }),
    );
    expect(logs.matching(/Telegram refused the bot token/)).toHaveLength(1);
    expect(logs.text()).not.toContain("AAWrongToken");
  });

  it("a handler failure offers the same update again after a back-off; one that committed is not offered twice", async () => {
    const scheduler = new ManualScheduler();
    const { poller, handler } = setup({ scheduler });
    let failures = 1;
    const accept = handler.accept.bind(handler);
    handler.accept = async (work, commit) => {
      if (work.text === "flaky" && failures-- > 0) throw new Error("database is locked");
      if (work.text === "late failure") {
        commit();
        handler.works.push(work);
        throw new Error("failed after the commit");
      }
      return accept(work, commit);
    };
    fake.privateMessage("flaky");
    const last = fake.privateMessage("late failure");
    poller.start();
    await eventually(() =>
      expect(poller.status()).toMatchObject({ state: "backoff", last_error: { kind: "handler", message: "database is locked" } }),
    );
    scheduler.fire();
    await eventually(() => expect(poller.status().offset).toBe(last + 1));
    expect(handler.works.map((w) => w.text)).toEqual(["flaky", "late failure"]);
  });
});

describe("replies", () => {
  it("a 5,000-character answer goes out as two messages in the same topic", async () => {
    const { poller, handler } = setup();
    const paragraph = `${"lorem ipsum ".repeat(42)}end.`;
    const answer = Array.from({ length: 10 }, () => paragraph).join("\n\n");
    expect(answer.length).toBeGreaterThan(5000);
    handler.answer = () => answer;
    fake.topicMessage("write a lot", { chat_id: -1001234567890, topic_id: 7 });
    poller.start();
    const sent = await fake.waitForSent(2);
    expect(sent).toHaveLength(2);
    expect(sent.map((m) => [m.chat_id, m.message_thread_id, m.parse_mode])).toEqual([
      [-1001234567890, 7, undefined],
      [-1001234567890, 7, undefined],
    ]);
    expect(sent.every((m) => m.text.length <= 4096)).toBe(true);
    expect(sent.map((m) => m.text).join("\n\n")).toBe(answer);
  });

  it("Markdown-breaking characters arrive as they were written; code becomes entities", async () => {
    const { replier } = setup();
    const chat = { id: "42", type: "private" as const };
    await replier.send(chat, "a_b *c* [d](e) ~f~ 1. done! `x_y`");
    expect(fake.sent()).toEqual([
      { message_id: 1, chat_id: 42, text: "a_b *c* [d](e) ~f~ 1. done! x_y", entities: [{ type: "code", offset: 28, length: 3 }] },
    ]);
  });

  it("honours a 429 on send, and retries a 5xx", async () => {
    const delays: number[] = [];
    const { api, logs } = setup();
    const replier = new TelegramReplier(api, { logger: logs.logger, random: () => 0.5, sleep: async (ms) => void delays.push(ms) });
    fake.failNext("sendMessage", 1, { kind: "rate_limited", retry_after: 3 });
    fake.failNext("sendMessage", 1, { kind: "server_error" });
    const report = await replier.send({ id: "42", type: "private" }, "hi");
    expect(report).toEqual({ sent: 1, planned: 1 });
    expect(delays).toEqual([3000, 2000]);
    expect(fake.sent()).toHaveLength(1);
    expect(logs.matching(/Telegram did not take a reply message/).map((l) => l.msg)).toEqual([
      "Telegram did not take a reply message (429: Too Many Requests: retry after 3); sending it again in 3 s",
      "Telegram did not take a reply message (502: Bad Gateway); sending it again in 2 s",
    ]);
  });

  it("gives up on a reply that keeps failing, and says why", async () => {
    const { replier } = setup();
    fake.failNext("sendMessage", 10, { kind: "server_error" });
    const report = await replier.send({ id: "42", type: "private" }, "hi");
    expect(report).toMatchObject({ sent: 0, planned: 1, failure: { kind: "server_error" } });
    expect(fake.calls("sendMessage")).toHaveLength(4);
  });

  it("a failed turn answers with its typed reason; the typing indicator goes to the topic", async () => {
    const { api, logs } = setup();
    const replier = new TelegramReplier(api, { logger: logs.logger });
    const topic = { id: "-1001234567890", type: "supergroup" as const, topic_id: "7" };
    await replier.sendFailure(topic, "provider_rate_limit");
    expect(fake.sent()[0]).toMatchObject({
      message_thread_id: 7,
      text: "[reason: provider_rate_limit] The model provider is rate limiting this bot; try again in a minute.",
    });
    const stopTyping = replier.typing(topic);
    await eventually(() => fake.calls("sendChatAction").length > 0);
    stopTyping();
    expect(fake.calls("sendChatAction")[0]!.params).toEqual({ chat_id: -1001234567890, action: "typing", message_thread_id: 7 });
  });
});

describe("one poller per token", () => {
  it("without a coordinator: the second poller reports the conflict once, backs off, never overlaps, and takes over when the first stops", async () => {
    const a = setup({ config: { allow_all: true, allowed_chats: [], poll_timeout_seconds: 50, token_env: "TELEGRAM_BOT_TOKEN" } });
    a.poller.start();
    await eventually(() => fake.polls().some((p) => p.outcome === undefined), { timeoutMs: 10_000, what: "the first poller's long poll" });

    const scheduler = new ManualScheduler();
    const b = setup({
      scheduler,
      offsetsFile: join(dir, "b.json"),
      config: { allow_all: true, allowed_chats: [], poll_timeout_seconds: 50, token_env: "TELEGRAM_BOT_TOKEN" },
    });
    b.poller.start();
    await eventually(() =>
      expect(b.poller.status()).toMatchObject({ state: "conflict", conflict: "another process polls this bot token" }),
    );
    const firstWait = scheduler.pending()[0]!.ms;
    expect(firstWait).toBeGreaterThanOrEqual(4000);
    scheduler.fire();
    await eventually(() => expect(scheduler.pending()).toHaveLength(1));
    expect(scheduler.pending()[0]!.ms).toBeGreaterThan(firstWait);
    expect(b.poller.status().state).toBe("conflict");
    expect(b.logs.matching(/another process polls this bot token/)).toHaveLength(1);
    expect(a.poller.status().state).toBe("polling");

    await a.poller.stop();
    await eventually(() => fake.polls().every((p) => p.outcome !== undefined), {
      timeoutMs: 10_000,
      what: "the first poller's poll to end",
    });
    const id = fake.privateMessage("for whoever polls");
    scheduler.fire();
    await eventually(() => expect(b.handler.works.map((w) => w.update_id)).toEqual([id]));
    expect(b.poller.status().state).toBe("polling");
    expect(a.handler.works).toEqual([]);
    expect(fake.overlaps().length).toBeGreaterThanOrEqual(2);
    expect(fake.overlaps().every((o) => o.refused === "newcomer")).toBe(true);
    expect(fake.maxConcurrentPolls()).toBe(1);
  });

  it("with a coordinator: only the singleton's holder polls, the other stands by; a handover moves the polling", async () => {
    const holders = new Map<string, (held: boolean) => void>();
    let holder = "a";
    const coordinatorFor = (who: string): SingletonCoordinator => ({
      watch(name, onChange) {
        expect(name).toMatch(/^telegram:[0-9a-f]{16}$/);
        holders.set(who, onChange);
        onChange(holder === who);
        return () => holders.delete(who);
      },
    });
    const a = setup({ coordinator: coordinatorFor("a") });
    const b = setup({ coordinator: coordinatorFor("b"), offsetsFile: join(dir, "b.json") });
    a.poller.start();
    b.poller.start();
    const first = fake.privateMessage("to a");
    await eventually(() => expect(a.handler.works.map((w) => w.update_id)).toEqual([first]));
    expect(b.poller.status()).toMatchObject({ state: "standby", singleton: a.api.singletonName });
    expect(a.api.singletonName).not.toContain(fake.bot.token.split(":")[1]!);

    holder = "b";
    holders.get("a")!(false);
    await eventually(() => expect(a.poller.status().state).toBe("standby"));
    // A lease changes hands only after the old holder's poll has ended at Telegram.
    await eventually(() => fake.polls().every((p) => p.outcome !== undefined), { timeoutMs: 10_000, what: "a's poll to end" });
    holders.get("b")!(true);
    const second = fake.privateMessage("to b");
    await eventually(() => expect(b.handler.works.map((w) => w.update_id)).toEqual([second]));
    expect(a.handler.works).toHaveLength(1);
    expect(fake.overlaps()).toEqual([]);
    expect(fake.maxConcurrentPolls()).toBe(1);
  });
});

describe("BotApi", () => {
  it("an unreachable api_root is a network failure whose message has no token", async () => {
    const token = fake.bot.token;
    const api = new BotApi(token, { apiRoot: "http://127.0.0.1:1" });
    const outcome = await api.getMe();
    expect(outcome).toMatchObject({ ok: false, failure: { kind: "network" } });
    const message = (outcome as { failure: { message: string } }).failure.message;
    expect(message).toContain("ECONNREFUSED");
    expect(message).toContain("/bot<redacted>/getMe");
    expect(message).not.toContain(token.split(":")[1]!);
  });
});
