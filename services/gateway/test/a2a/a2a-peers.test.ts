import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type A2aAgent, startA2aAgent } from "../../../../test/support/a2a-agent.js";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { hermes } from "../../../cli/test/support/cli-harness.js";
import { writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";

/**
 * A2A agents as peers: the official SDK's own server (express) registered with
 * `hermes peer add NAME --a2a URL --key-env VAR`, reached by `hermes message`, a bot's
 * message_agent and `hermes peer dm`, with the receipts and typed reasons of every other delivery;
 * agents that answer garbage or never answer; and one gateway's bot calling another gateway's bot
 * over A2A.
 */

const KEY_A = "a2a-peers-key-a-0123456789abcdef";
const KEY_B = "a2a-peers-key-b-0123456789abcdef";
const AGENT_KEY = "agent-key-0123456789abcdef";
let fake: FakeOpenAIServer;
let agent: A2aAgent;
let homeA: string;
let homeB: string;
let a: DaemonProcess;
let b: DaemonProcess;

function newHome(key: string): string {
  const dir = mkdtempSync(join(tmpdir(), "hermes-a2a-peer-"));
  writeHomeConfig(dir, {
    provider: "fake",
    model: "m",
    providers: { fake: { base_url: fake.url, api_key_env: "FAKE_KEY", timeout_seconds: 120 } },
    delivery: { peer_timeout_seconds: 2, retry_delay_seconds: 0 },
  });
  writeHomeEnv(dir, { FAKE_KEY: "sk-fake", API_SERVER_KEY: key, AGENT_KEY, A_KEY: KEY_A });
  return dir;
}

const onA = (args: string[], input?: string) => hermes(args, { home: homeA, timeoutMs: 60_000, ...(input ? { input } : {}) });
const onB = (args: string[]) => hermes(args, { home: homeB, timeoutMs: 60_000 });

function transcript(home: string): { role: string; content: string }[] {
  const db = new Database(join(home, "state.db"), { readonly: true });
  try {
    return db.prepare("SELECT role, content FROM messages ORDER BY rowid").all() as { role: string; content: string }[];
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  fake = await startFakeOpenAIServer();
  agent = await startA2aAgent({ key: AGENT_KEY });
  homeA = newHome(KEY_A);
  homeB = newHome(KEY_B);
  for (const [name, url] of [
    ["agent", agent.url],
    ["garbage", agent.garbageUrl],
    ["stall", agent.stallUrl],
  ] as const) {
    expect((await onA(["peer", "add", name, "--a2a", url, "--key-env", "AGENT_KEY"])).code).toBe(0);
  }
  expect((await onA(["peer", "add", "nokey", "--a2a", agent.url])).code).toBe(0);
  a = await startGatewayProcess(homeA);
  b = await startGatewayProcess(homeB);
});

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await agent?.close();
  await fake?.close();
  for (const home of [homeA, homeB]) if (home) rmSync(home, { recursive: true, force: true });
});

describe("an A2A agent as a peer", () => {
  it("is listed with its kind, URL and key variable, and its name alone is the target", async () => {
    const list = JSON.parse((await onA(["--json", "peer", "list"])).stdout) as { peers: Record<string, unknown>[] };
    expect(list.peers.find((p) => p["name"] === "agent")).toEqual({
      name: "agent",
      kind: "a2a",
      url: agent.url,
      note: null,
      key_variable: "AGENT_KEY",
      key_set: true,
    });
    const twice = await onA(["peer", "add", "agent", "--url", "grpc://127.0.0.1:1", "--key", KEY_A]);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain("already registered as an A2A agent");
    const wrongForm = await onA(["-p", "default", "message", "agent/default", "hi"]);
    expect(wrongForm.code).toBe(2);
    expect(wrongForm.stderr).toContain("is one A2A agent: message it as agent");
  });

  it("hermes message reaches it: the reply settles the delivery; the agent got the delivery id as messageId and the sending bot", async () => {
    const r = await onA(["--json", "-p", "default", "message", "agent", "hello agent", "--wait"]);
    expect(r.code).toBe(0);
    const receipt = JSON.parse(r.stdout) as { delivery_id: string; state: string; reply: string; target: string };
    expect(receipt).toMatchObject({ state: "settled", reply: "echo: hello agent", target: "agent" });
    const received = agent.received.find((m) => m["messageId"] === receipt.delivery_id)!;
    expect(received["metadata"]).toEqual({ hermes_sender: { name: "default", handle: `default@${a.ready.id}` } });
  });

  it("a failed task fails the delivery with the agent's words; garbage is unknown; an agent that never answers is delivery_timeout", async () => {
    const failed = await onA(["-p", "default", "message", "agent", "fail: no way", "--wait"]);
    expect(failed.code).toBe(1);
    expect(failed.stdout + failed.stderr).toContain("failed [reason: unknown]: cannot do that: no way");
    const garbage = await onA(["--json", "-p", "default", "message", "garbage", "are you there", "--wait"]);
    expect(garbage.code).toBe(1);
    expect(JSON.parse(garbage.stdout)).toMatchObject({ state: "failed", reason: "unknown" });
    expect(JSON.parse(garbage.stdout).error).toContain("A2A agent garbage");
    const stall = await onA(["--json", "-p", "default", "message", "stall", "hello?", "--wait"]);
    expect(stall.code).toBe(1);
    expect(JSON.parse(stall.stdout)).toMatchObject({ state: "failed", reason: "delivery_timeout", attempts: 2 });
    const locked = await onA(["--json", "-p", "default", "message", "nokey", "let me in", "--wait"]);
    expect(JSON.parse(locked.stdout)).toMatchObject({ state: "failed", reason: "provider_auth_or_access" });
    expect(JSON.parse(locked.stdout).error).toContain("HERMES_PEER_NOKEY_KEY");
  });

  it("a bot's message_agent reaches it from a turn, and the reply lands in the bot's Bot Chat", async () => {
    fake.replyNext({ tool_calls: [{ name: "message_agent", arguments: { target: "agent", message: "from a turn" } }] });
    fake.replyNext({ text: "asked the agent" });
    expect((await onA(["-p", "default", "chat", "-q", "ask the agent"])).code).toBe(0);
    await eventually(() =>
      expect(transcript(homeA).some((m) => m.role === "notification" && m.content === "echo: from a turn")).toBe(true),
    );
  });

  it("hermes peer dm prints the agent's reply, or fails with its reason", async () => {
    const r = await onA(["peer", "dm", "agent"], "dm text");
    expect(r).toMatchObject({ code: 0, stdout: "echo: dm text\n" });
    const asJson = await onA(["--json", "peer", "dm", "agent"], "fail: nope");
    expect(asJson.code).toBe(1);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ peer: "agent", status: "failed", reason: "unknown" });
    const run = await onA(["peer", "run", "agent"], "long");
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("is an A2A agent");
  });
});

describe("a Hermes bot as another gateway's A2A peer", () => {
  it("one gateway's message reaches the other's bot over A2A, attributed to the sending bot; a failed turn keeps its typed reason", async () => {
    expect((await onB(["peer", "add", "alpha", "--a2a", `http://${a.http}/a2a/default/`, "--key-env", "A_KEY"])).code).toBe(0);
    const ok = await onB(["--json", "-p", "default", "message", "alpha", "hello alpha", "--wait"]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ state: "settled" });
    const attributed = `Message from 🤖 default (@default@${b.ready.id} via a2a): hello alpha`;
    expect(transcript(homeA).some((m) => m.role === "user" && m.content === attributed)).toBe(true);
    fake.failNext("rate_limited", 2);
    const failed = await onB(["--json", "-p", "default", "message", "alpha", "too fast", "--wait"]);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ state: "failed", reason: "provider_rate_limit" });
  });
});
