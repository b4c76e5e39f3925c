import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { FakeTelegram, type UserFields } from "../../../../test/support/fake-telegram.js";
import { openGatewayDb } from "../../src/home/store/gateway-store.js";
import { HermesHome } from "../../src/home/store/home.js";
import type { TelegramWork } from "../../src/platforms/telegram/core/intake.js";
import { TelegramStore } from "../../src/platforms/telegram/store/telegram-store.js";
import { transcript } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { bindings, GROUP, providerCalls, sentTo, telegramHome, waitForSentTo } from "../support/telegram-fixtures.js";

/**
 * The Telegram bot across the life of its profile and of the gateway: a rename keeps every chat and
 * topic binding (and so the conversations), a delete purges them, and a restart neither answers an
 * update twice nor skips one, whatever state the update was in.
 */

const STRANGER: UserFields = { id: 777, first_name: "Mallory" };

let telegram: FakeTelegram;
let provider: FakeOpenAIServer;
const gateways: TestGateway[] = [];

beforeEach(async () => {
  telegram = await FakeTelegram.start();
  provider = await startFakeOpenAIServer();
});
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.stop();
  await telegram.close();
  await provider.close();
});

async function start(home: string): Promise<TestGateway> {
  const t = await startTestGateway({ home });
  gateways.push(t);
  return t;
}

async function stop(t: TestGateway): Promise<void> {
  gateways.splice(gateways.indexOf(t), 1);
  await t.stop();
}

/** One message in the private chat, the forum's General topic and topics 7 and 8; waits for the four answers. */
async function talkEverywhere(text: string, round: number): Promise<void> {
  telegram.privateMessage(text);
  telegram.groupMessage(text, { chat_id: GROUP, type: "supergroup" });
  telegram.topicMessage(text, { chat_id: GROUP, topic_id: 7 });
  telegram.topicMessage(text, { chat_id: GROUP, topic_id: 8 });
  await waitForSentTo(telegram, round, 42);
  await waitForSentTo(telegram, round, GROUP);
  await waitForSentTo(telegram, round, GROUP, 7);
  await waitForSentTo(telegram, round, GROUP, 8);
}

describe("telegram and profile identity", () => {
  it("a rename keeps every chat and topic binding; the conversations go on; a delete purges them", async () => {
    const t = await start(telegramHome(telegram, provider, { telegram: { profile: "mybot" } }));
    t.gateway.profiles.create("mybot", {});
    await talkEverywhere("before", 1);
    const before = bindings(t);
    expect(before.map((b) => [b.profile, b.chat_id, b.topic_id])).toEqual([
      ["mybot", String(GROUP), ""],
      ["mybot", String(GROUP), "7"],
      ["mybot", String(GROUP), "8"],
      ["mybot", "42", ""],
    ]);

    const renamed = t.gateway.profiles.rename("mybot", "assistant");
    expect(renamed.warning).toBe("");
    expect(renamed.migration?.counts).toMatchObject({ telegram_topics: 4, sessions: 5 });
    const after = bindings(t);
    expect(after.map((b) => [b.profile, b.session_id, b.session_key])).toEqual(
      before.map((b) => ["assistant", b.session_id, b.session_key.replace("agent:mybot:", "agent:assistant:")]),
    );

    // platforms.telegram.profile still says mybot: the former name resolves to the renamed profile.
    provider.reset();
    await talkEverywhere("after", 2);
    expect(bindings(t)).toEqual(after);
    for (const b of after) {
      expect(t.gateway.sessions.store.byKey(b.session_key)?.session_id).toBe(b.session_id);
      expect(transcript(t, "assistant", b.session_id).map((m) => m.content)).toEqual([
        "before",
        "echo(small-model): before",
        "after",
        "echo(small-model): after",
      ]);
    }
    // Each turn after the rename was sent with its conversation so far.
    expect(provider.chatRequests().every((r) => (r.body as { messages: unknown[] }).messages.length === 4)).toBe(true);
    expect(t.gateway.routing.keysOf("mybot")).toEqual([]);

    t.gateway.profiles.delete("assistant");
    expect(bindings(t)).toEqual([]);
    for (const b of after) expect(t.gateway.sessions.store.byId(b.session_id)).toBeUndefined();
    telegram.topicMessage("anyone?", { chat_id: GROUP, topic_id: 7 });
    const [, , gone] = await waitForSentTo(telegram, 3, GROUP, 7);
    expect(gone!.text).toBe(
      "[reason: not_found] The profile this bot answers as does not exist; its operator has to fix platforms.telegram.profile.",
    );
    expect(bindings(t)).toEqual([]);
    expect(t.gateway.telegram!.status().state).toBe("polling");
  });
});

describe("telegram across restarts", () => {
  it("a stop tells the running turn's chat, keeps the queued one for the next start; nothing twice, nothing skipped", async () => {
    const home = telegramHome(telegram, provider, { config: { gateway: { shutdown_grace_seconds: 1 } } });
    const first = await start(home);
    telegram.privateMessage("answered before");
    await waitForSentTo(telegram, 1, 42);
    telegram.privateMessage("let me in", { from: STRANGER });
    await waitForSentTo(telegram, 1, 777);

    provider.failNext("hang");
    telegram.privateMessage("held at the provider");
    telegram.privateMessage("queued behind it");
    await eventually(() => expect(provider.chatRequests()).toHaveLength(2));
    await eventually(() => telegram.pending().length === 0, { timeoutMs: 10_000, what: "both updates to be handed over" });
    await stop(first);
    expect(sentTo(telegram, 42).map((m) => m.text)).toEqual([
      "echo(small-model): answered before",
      "[reason: runtime_offline] The bot is restarting; try again shortly.",
    ]);

    telegram.privateMessage("sent while it was down");
    telegram.privateMessage("still not in", { from: STRANGER });
    const second = await start(home);
    const sent = await waitForSentTo(telegram, 4, 42);
    expect(sent.map((m) => m.text)).toEqual([
      "echo(small-model): answered before",
      "[reason: runtime_offline] The bot is restarting; try again shortly.",
      "echo(small-model): queued behind it",
      "echo(small-model): sent while it was down",
    ]);
    expect(providerCalls(provider).map((c) => c.user)).toEqual([
      "answered before",
      "held at the provider",
      "queued behind it",
      "sent while it was down",
    ]);
    await eventually(() => expect(second.gateway.telegram!.status().in_progress).toBe(0));
    // The refusal was remembered across the restart: one per chat, ever.
    expect(sentTo(telegram, 777)).toHaveLength(1);
    expect(telegram.pending()).toEqual([]);
  });

  it("what a crash leaves in the inbox: a turn under way is reported, an answer half sent is finished, a queued update runs", async () => {
    const home = telegramHome(telegram, provider);
    const first = await start(home);
    await stop(first);
    // A crashed gateway's inbox, written the way the bot writes it.
    const db = openGatewayDb(new HermesHome(home), 5000);
    const store = new TelegramStore(db, telegram.bot.token.split(":")[0]!);
    const work = (update_id: number, text: string, topic?: number): TelegramWork => ({
      kind: "turn",
      update_id,
      message_id: update_id,
      chat: topic === undefined ? { id: "42", type: "private" } : { id: String(GROUP), type: "supergroup", topic_id: String(topic) },
      sender: { id: "42", display_name: "Alice" },
      text,
    });
    const now = new Date().toISOString();
    const long = `${"a".repeat(3000)}\n\n${"b".repeat(2000)}`;
    store.accept(work(1, "was running"), now, () => store.saveOffset(2, now));
    store.markRunning(1, now);
    store.accept(work(2, "was answered in part", 7), now, () => store.saveOffset(3, now));
    store.markReplying(2, long, now);
    store.markSent(2, 1, now);
    store.accept(work(3, "was queued"), now, () => store.saveOffset(4, now));
    db.close();

    const second = await start(home);
    const [interrupted, queued] = await waitForSentTo(telegram, 2, 42);
    expect(interrupted!.text).toBe("[reason: runtime_offline] The bot restarted while answering this message; please send it again.");
    expect(queued!.text).toBe("echo(small-model): was queued");
    expect((await waitForSentTo(telegram, 1, GROUP, 7)).map((m) => m.text)).toEqual(["b".repeat(2000)]);
    expect(providerCalls(provider).map((c) => c.user)).toEqual(["was queued"]);
    await eventually(() => expect(second.gateway.telegram!.status().in_progress).toBe(0));
    // The stored offset came first: the poller asked Telegram for update 4 onwards.
    await eventually(() => telegram.polls().some((p) => p.offset === 4), { timeoutMs: 10_000, what: "a poll from the stored offset" });
    expect(telegram.polls().filter((p) => p.offset !== undefined && p.offset !== 4)).toEqual([]);
  });
});
