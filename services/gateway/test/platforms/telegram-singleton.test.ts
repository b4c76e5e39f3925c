import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DaemonProcess, HERMES_BIN, startGatewayProcess } from "../../../../test/support/daemons.js";
import { type EtcdMember, startEtcd } from "../../../../test/support/etcd.js";
import { eventually } from "../../../../test/support/eventually.js";
import { FakeTelegram } from "../../../../test/support/fake-telegram.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { sentTo, telegramHome, waitForSentTo } from "../support/telegram-fixtures.js";

/**
 * One poller per bot token across a mesh: two gateway processes with the same token, each with a
 * coordinator on a real etcd (lease TTL 2 s). Only the holder of the singleton
 * `telegram:<first 16 hex of sha256(token)>` polls; the other stands by. Killing the holder
 * (kill -9) hands the bot to the other once etcd expires the dead lease; a graceful stop releases it
 * at once. Telegram never sees two overlapping getUpdates, and no message is answered twice.
 */

const PREFIX = "/hermes-telegram-test";

let etcd: EtcdMember & { stopAll(): Promise<void> };
let telegram: FakeTelegram;
let provider: FakeOpenAIServer;
const homes: Record<string, string> = {};
const running = new Map<string, DaemonProcess>();

beforeAll(async () => {
  etcd = await startEtcd();
  telegram = await FakeTelegram.start();
  provider = await startFakeOpenAIServer();
  // The coordinator as an operator configures it: config.yaml names etcd (lease TTL 2 s).
  const coordinator = { etcd: { endpoints: [etcd.endpoint], prefix: PREFIX, lease_ttl_seconds: 2 } };
  for (const id of ["gw-a", "gw-b"]) homes[id] = telegramHome(telegram, provider, { config: { coordinator } });
});
afterAll(async () => {
  await Promise.all([...running.values()].map((p) => p.stop()));
  await telegram?.close();
  await provider?.close();
  await etcd?.stopAll();
  for (const home of Object.values(homes)) rmSync(home, { recursive: true, force: true });
});

async function start(id: string): Promise<void> {
  const p = await startGatewayProcess(homes[id]!, { args: ["--id", id], env: { HERMES_LOG_LEVEL: "warn" } });
  running.set(id, p);
}

/** `hermes gateway status --json` of a gateway, its Telegram platform. */
interface TelegramStatus {
  state: string;
  singleton: string;
  in_progress: number;
}

function telegramStatus(id: string): Promise<TelegramStatus> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [HERMES_BIN, "--home", homes[id]!, "--json", "gateway", "status"], (err, stdout, stderr) => {
      if (err) return reject(new Error(`gateway status of ${id} failed: ${stderr}`));
      const status = JSON.parse(stdout) as { platforms: (TelegramStatus & { platform: string })[] };
      resolve(status.platforms.find((p) => p.platform === "telegram")!);
    });
  });
}

async function states(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const id of running.keys()) out[id] = (await telegramStatus(id)).state;
  return out;
}

function noOverlaps(): void {
  expect(telegram.overlaps()).toEqual([]);
  expect(telegram.maxConcurrentPolls()).toBe(1);
}

describe("telegram: one poller per bot token with a coordinator", () => {
  it("the holder polls, the other stands by; kill -9 the holder and the other takes over; a stop hands over at once", async () => {
    await start("gw-a");
    await eventually(async () => expect(await states()).toEqual({ "gw-a": "polling" }), { timeoutMs: 30_000 });
    await start("gw-b");
    await eventually(async () => expect(await states()).toEqual({ "gw-a": "polling", "gw-b": "standby" }), { timeoutMs: 30_000 });
    const expected = `telegram:${createHash("sha256").update(telegram.bot.token).digest("hex").slice(0, 16)}`;
    expect((await telegramStatus("gw-b")).singleton).toBe(expected);

    telegram.privateMessage("one");
    expect((await waitForSentTo(telegram, 1, 42))[0]!.text).toBe("echo(small-model): one");

    // Killed once the answer is out and recorded as out (a kill between Telegram's accept and that
    // record would send the answer again at the restart: a rare duplicate beats a lost answer).
    await eventually(async () => expect((await telegramStatus("gw-a")).in_progress).toBe(0));
    await running.get("gw-a")!.kill9();
    running.delete("gw-a");
    await eventually(async () => expect(await states()).toEqual({ "gw-b": "polling" }), { timeoutMs: 30_000 });
    telegram.privateMessage("two");
    expect((await waitForSentTo(telegram, 2, 42)).at(-1)!.text).toBe("echo(small-model): two");

    await start("gw-a");
    await eventually(async () => expect(await states()).toEqual({ "gw-a": "standby", "gw-b": "polling" }), { timeoutMs: 30_000 });
    await running.get("gw-b")!.stop();
    running.delete("gw-b");
    await eventually(async () => expect(await states()).toEqual({ "gw-a": "polling" }), { timeoutMs: 30_000 });
    telegram.privateMessage("three");
    expect((await waitForSentTo(telegram, 3, 42)).at(-1)!.text).toBe("echo(small-model): three");

    expect(sentTo(telegram, 42).map((m) => m.text)).toEqual(["one", "two", "three"].map((t) => `echo(small-model): ${t}`));
    noOverlaps();
  });
});
