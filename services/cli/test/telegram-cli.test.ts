import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import { FakeTelegram } from "../../../test/support/fake-telegram.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../../gateway/test/support/fake-openai-server.js";
import { GROUP, providerCalls, sentTo, telegramHome, waitForSentTo } from "../../gateway/test/support/telegram-fixtures.js";
import { assertBuilt, type GatewayProcess, hermes, removeHome, startGatewayProcess, withDb } from "./support/cli-harness.js";

/**
 * Telegram with gateways as real processes (`hermes gateway start`): the token's rules at start,
 * `hermes platforms status` and `gateway status`, a kill -9 in the middle of a turn, and two
 * gateways polling one bot token without a coordinator.
 */

let telegram: FakeTelegram;
let provider: FakeOpenAIServer;
const homes: string[] = [];
const processes: GatewayProcess[] = [];

beforeEach(async () => {
  assertBuilt();
  telegram = await FakeTelegram.start();
  provider = await startFakeOpenAIServer();
});
afterEach(async () => {
  await Promise.all(processes.splice(0).map((p) => p.stop()));
  await telegram.close();
  await provider.close();
  for (const home of homes.splice(0)) removeHome(home);
});

function home(options: Parameters<typeof telegramHome>[2] = {}): string {
  const h = telegramHome(telegram, provider, options);
  homes.push(h);
  return h;
}

async function start(h: string): Promise<GatewayProcess> {
  const p = await startGatewayProcess(h, { HERMES_LOG_LEVEL: "warn" });
  processes.push(p);
  return p;
}

interface PlatformJson {
  platform: string;
  state: string;
  detail: string;
  bot: string;
  profile: string;
  updates_received: number;
  replies_sent: number;
  turns: number;
  chats: number;
  errors: Record<string, number>;
}

async function platforms(h: string): Promise<PlatformJson[]> {
  const r = await hermes(["--json", "platforms", "status"], { home: h });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return (JSON.parse(r.stdout) as { platforms: PlatformJson[] }).platforms;
}

async function telegramState(h: string): Promise<PlatformJson> {
  return (await platforms(h)).find((p) => p.platform === "telegram")!;
}

describe("the bot token at start", () => {
  it("enabled without a token: the start fails naming the variable", async () => {
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], { home: home({ token: null }) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("platforms.telegram is enabled but TELEGRAM_BOT_TOKEN is not set");
    expect(r.stderr).toContain("HERMES_HOME/.env");
  });

  it("a malformed token is refused without being shown; a token in config.yaml is refused whatever it is", async () => {
    const secret = "12345:tooShortButSecret";
    const bad = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], { home: home({ token: secret }) });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("TELEGRAM_BOT_TOKEN does not look like a bot token");
    expect(bad.stdout + bad.stderr).not.toContain("tooShortButSecret");

    const inFile = home({ telegram: { token: telegram.bot.token } });
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], { home: inFile });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("the bot token is never written in config.yaml");
    expect(r.stdout + r.stderr).not.toContain(telegram.bot.token.split(":")[1]!);
  });

  it("an enabled bot without allowed_chats or allow_all is a config error naming the key", async () => {
    const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], {
      home: home({ telegram: { allowed_chats: [] } }),
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("platforms.telegram.allowed_chats");
  });
});

describe("a gateway process with a Telegram bot", () => {
  it("answers a private chat; platforms status and gateway status show the bot polling; the log never holds the token", async () => {
    const h = home();
    const gw = await start(h);
    telegram.privateMessage("hello from a process");
    expect((await waitForSentTo(telegram, 1, 42))[0]!.text).toBe("echo(small-model): hello from a process");

    await eventually(async () =>
      expect(await telegramState(h)).toMatchObject({
        state: "polling",
        bot: "@hermes_test_bot",
        profile: "default",
        updates_received: 1,
        turns: 1,
        replies_sent: 1,
        chats: 1,
      }),
    );
    expect((await platforms(h)).find((p) => p.platform === "api")).toMatchObject({ state: "off" });
    const human = await hermes(["platforms", "status"], { home: h });
    expect(human.stdout).toContain("telegram: polling (@hermes_test_bot, profile default)");
    expect(human.stdout).toMatch(/updates received\s+1/);
    const status = await hermes(["gateway", "status"], { home: h });
    expect(status.stdout).toMatch(/telegram\s+polling \(@hermes_test_bot, profile default\)/);

    await gw.stop();
    const { stdout, stderr } = gw.output();
    expect(stdout + stderr).not.toContain(telegram.bot.token.split(":")[1]!);
  });

  it("a token Telegram refuses (401): the gateway runs on, status and log name the variable to check, never the token", async () => {
    const wrong = "100001:AAWrongTokenWrongTokenWrongToken1234";
    const h = home({ token: wrong });
    const gw = await start(h);
    const advice =
      "Telegram refused the bot token (401: Unauthorized): check TELEGRAM_BOT_TOKEN (platforms.telegram.token_env) and platforms.telegram.api_root";
    await eventually(async () => expect(await telegramState(h)).toMatchObject({ state: "backoff", detail: `unauthorized: ${advice}` }));
    const human = await hermes(["platforms", "status"], { home: h });
    expect(human.stdout).toContain(`telegram: backoff (profile default): unauthorized: ${advice}`);
    expect(human.stdout).toMatch(/waiting\s+300 s/);
    await gw.stop();
    const { stdout, stderr } = gw.output();
    expect(stdout + stderr).toContain(`${advice}; next try in 300 s`);
    expect(stdout + stderr + human.stdout).not.toContain("AAWrongToken");
  });

  it("kill -9 in the middle of a turn: after the restart the chat is told once, the queued message is answered, nothing runs twice", async () => {
    const h = home();
    const gw = await start(h);
    provider.failNext("hang");
    telegram.privateMessage("held when the process dies");
    telegram.privateMessage("queued behind it");
    await eventually(() => expect(provider.chatRequests()).toHaveLength(1));
    await eventually(() => telegram.pending().length === 0, { timeoutMs: 10_000, what: "both updates to be handed over" });
    await gw.kill9();
    processes.splice(processes.indexOf(gw), 1);
    expect(sentTo(telegram, 42)).toEqual([]);

    await start(h);
    const sent = await waitForSentTo(telegram, 2, 42);
    expect(sent.map((m) => m.text)).toEqual([
      "[reason: runtime_offline] The bot restarted while answering this message; please send it again.",
      "echo(small-model): queued behind it",
    ]);
    telegram.privateMessage("and after");
    expect((await waitForSentTo(telegram, 3, 42)).at(-1)!.text).toBe("echo(small-model): and after");
    expect(providerCalls(provider).map((c) => c.user)).toEqual(["held when the process dies", "queued behind it", "and after"]);
    expect(sentTo(telegram, 42)).toHaveLength(3);
  });

  it("two gateways, one token, no coordinator: the second reports the conflict and backs off; it takes over when the first stops", async () => {
    const a = await start(home());
    await eventually(() => telegram.polls().some((p) => p.outcome === undefined), { timeoutMs: 10_000, what: "the first gateway to poll" });
    const hb = home();
    const b = await start(hb);
    await eventually(async () =>
      expect(await telegramState(hb)).toMatchObject({ state: "conflict", detail: "another process polls this bot token" }),
    );
    const log = b.output().stdout + b.output().stderr;
    expect(log).toContain("another process polls this bot token");
    const gatewayStatus = await hermes(["gateway", "status"], { home: hb });
    expect(gatewayStatus.stdout).toContain("conflict");

    await a.stop();
    telegram.privateMessage("who answers now?");
    expect((await waitForSentTo(telegram, 1, 42, undefined, 60_000))[0]!.text).toBe("echo(small-model): who answers now?");
    await eventually(async () => expect((await telegramState(hb)).state).toBe("polling"), { timeoutMs: 60_000 });
    expect(sentTo(telegram, 42)).toHaveLength(1);
  });
});

describe("profiles with a Telegram bot", () => {
  it("hermes profile rename keeps every chat and topic binding on the live gateway; hermes profile delete purges them", async () => {
    const h = home({ telegram: { profile: "mybot" } });
    await start(h);
    expect((await hermes(["profile", "create", "mybot"], { home: h })).code).toBe(0);
    telegram.privateMessage("hi");
    telegram.topicMessage("hi topic", { chat_id: GROUP, topic_id: 7 });
    await waitForSentTo(telegram, 1, 42);
    await waitForSentTo(telegram, 1, GROUP, 7);
    const rows = () =>
      withDb(join(h, "state.db"), (db) =>
        db.prepare("SELECT profile, session_id, session_key FROM telegram_topics ORDER BY chat_id").all(),
      ) as {
        profile: string;
        session_id: string;
        session_key: string;
      }[];
    const before = rows();
    expect(before.map((r) => r.profile)).toEqual(["mybot", "mybot"]);

    const renamed = await hermes(["profile", "rename", "mybot", "assistant"], { home: h });
    expect(renamed.stderr).toBe("");
    expect(renamed.code).toBe(0);
    await eventually(() =>
      expect(rows()).toEqual(
        before.map((r) => ({ ...r, profile: "assistant", session_key: r.session_key.replace("agent:mybot:", "agent:assistant:") })),
      ),
    );
    telegram.topicMessage("after the rename", { chat_id: GROUP, topic_id: 7 });
    expect((await waitForSentTo(telegram, 2, GROUP, 7)).at(-1)!.text).toBe("echo(small-model): after the rename");
    // The same conversation: the provider got the earlier exchange with the new message.
    expect((provider.chatRequests().at(-1)!.body as { messages: unknown[] }).messages).toHaveLength(4);

    expect((await hermes(["profile", "delete", "assistant", "--yes"], { home: h })).code).toBe(0);
    await eventually(() => expect(rows()).toEqual([]));
  });
});

describe("config", () => {
  it("channel overrides of platforms.telegram apply on the next turn without a restart", async () => {
    const h = home();
    await start(h);
    telegram.privateMessage("one");
    await waitForSentTo(telegram, 1, 42);
    const file = join(h, "config.yaml");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace("  telegram:\n", '  telegram:\n    channel_overrides:\n      "42": {model: private-model}\n'),
    );
    telegram.privateMessage("two");
    expect((await waitForSentTo(telegram, 2, 42)).at(-1)!.text).toBe("echo(private-model): two");
  });
});
