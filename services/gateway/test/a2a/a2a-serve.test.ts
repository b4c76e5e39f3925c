import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  JsonRpcContentTypeNotSupportedError,
  JsonRpcRequestMalformedError,
  JsonRpcTaskNotCancelableError,
  JsonRpcTaskNotFoundError,
  JsonRpcUnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aClient, a2aMessage, stateOf, streamKinds, taskWire } from "../../../../test/support/a2a-client.js";
import { type DaemonProcess, HERMES_BIN, startGatewayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { hermes } from "../../../cli/test/support/cli-harness.js";
import { writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";

/**
 * A gateway process serving its bots over A2A, called by the official SDK's client over real HTTP
 * on loopback: cards, tasks in both protocol versions, idempotency, contexts, cancel, typed
 * reasons, bad input, and a task cut off by kill -9.
 */

const KEY = "a2a-serve-key-0123456789abcdef";
const auth = { authorization: `Bearer ${KEY}` };
let fake: FakeOpenAIServer;
let home: string;
let gateway: DaemonProcess;
let base: string;

function newHome(): string {
  const dir = mkdtempSync(join(tmpdir(), "hermes-a2a-"));
  writeHomeConfig(dir, {
    provider: "fake",
    model: "m",
    providers: { fake: { base_url: fake.url, api_key_env: "FAKE_KEY", timeout_seconds: 120 } },
    a2a: { keep_alive_seconds: 0.2 },
  });
  writeHomeEnv(dir, { FAKE_KEY: "sk-fake", API_SERVER_KEY: KEY });
  execFileSync(process.execPath, [HERMES_BIN, "--home", dir, "profile", "create", "helper"], { env: { PATH: process.env.PATH ?? "" } });
  return dir;
}

function rows(sql: string, ...args: unknown[]): Record<string, unknown>[] {
  const db = new Database(join(home, "state.db"), { readonly: true });
  try {
    return db.prepare(sql).all(...args) as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

const rpcUrl = () => `${base}/a2a/default/`;
const post = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(rpcUrl(), {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "a2a-version": "1.0", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

beforeAll(async () => {
  fake = await startFakeOpenAIServer();
  home = newHome();
  gateway = await startGatewayProcess(home);
  base = `http://${gateway.http}`;
});

afterAll(async () => {
  await gateway?.stop();
  await fake?.close();
  rmSync(home, { recursive: true, force: true });
});

describe("A2A cards", () => {
  it("are served only with a key: a bot's (1.0 or 0.3 shape by A2A-Version) and the gateway's index of its bots", async () => {
    const refused = await fetch(`${base}/a2a/default/.well-known/agent-card.json`);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toContain("Bearer");
    expect(await refused.json()).toMatchObject({ error: { reason: "unauthenticated" } });
    expect((await fetch(`${base}/.well-known/agent-card.json`, { headers: { authorization: "Bearer wrong-key-0123456789" } })).status).toBe(
      401,
    );

    const v1 = await (
      await fetch(`${base}/a2a/default/.well-known/agent-card.json`, { headers: { ...auth, "a2a-version": "1.0" } })
    ).json();
    expect(v1).toMatchObject({
      name: "default",
      capabilities: { streaming: true },
      supportedInterfaces: [
        { url: `${base}/a2a/default/`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: `${base}/a2a/default/`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ],
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer" } } },
      securityRequirements: [{ schemes: { bearer: {} } }],
    });
    const v03 = await (await fetch(`${base}/a2a/default/.well-known/agent-card.json`, { headers: auth })).json();
    expect(v03).toMatchObject({ protocolVersion: "0.3", url: `${base}/a2a/default/`, security: [{ bearer: [] }] });

    const index = (await (await fetch(`${base}/.well-known/agent-card.json`, { headers: { ...auth, "a2a-version": "1.0" } })).json()) as {
      bots: { profile: string }[];
    };
    expect(index.bots.map((b) => b.profile)).toEqual(["default", "helper"]);
    expect(index.bots[1]).toMatchObject({ url: `${base}/a2a/helper/`, card_url: `${base}/a2a/helper/.well-known/agent-card.json` });
    const unknown = await fetch(`${base}/a2a/nobody/.well-known/agent-card.json`, { headers: auth });
    expect(unknown.status).toBe(404);
  });
});

describe.each(["1.0", "0.3"] as const)("A2A %s with the SDK's client", (version) => {
  it("a message is a completed task: one turn in the bot's canonical Bot Chat, attributed to the caller", async () => {
    const client = await a2aClient(rpcUrl(), KEY, version);
    expect(client.protocolVersion).toBe(version);
    const task = (await client.sendMessage(a2aMessage(`hello over ${version}`))) as never;
    const wire = taskWire(task);
    expect(stateOf(task)).toBe("TASK_STATE_COMPLETED");
    const reply = wire.artifacts![0]!.parts[0]!.text!;
    expect(reply.length).toBeGreaterThan(0);
    expect(wire.status.message!.parts[0]!.text).toBe(reply);
    expect(wire.history!.map((m) => m.role)).toEqual(["ROLE_USER", "ROLE_AGENT"]);
    const turn = rows("SELECT content, meta_json FROM messages WHERE role = 'user' AND meta_json LIKE ?", `%${wire.id}%`);
    expect(turn.map((r) => r["content"])).toEqual([`Message from 🤖 A2A client (@a2a): hello over ${version}`]);
    expect(rows("SELECT state, caller FROM a2a_tasks WHERE task_id = ?", wire.id)).toEqual([{ state: "completed", caller: "a2a" }]);

    const got = await client.getTask({ tenant: "", id: wire.id, historyLength: 1 });
    expect(taskWire(got).history).toHaveLength(1);
    const kinds = await streamKinds(client.sendMessageStream(a2aMessage("stream it")));
    expect(kinds[0]).toMatch(/^task:TASK_STATE_(SUBMITTED|WORKING)$/);
    expect(kinds.slice(-2)).toEqual(["artifactUpdate:", "statusUpdate:TASK_STATE_COMPLETED"]);
    await expect(streamKinds(client.resubscribeTask({ tenant: "", id: wire.id }))).rejects.toBeInstanceOf(JsonRpcUnsupportedOperationError);
  });

  it("the same messageId answers with the same task, one after the other and at the same time", async () => {
    const client = await a2aClient(rpcUrl(), KEY, version);
    const messageId = `same-${version}`;
    const first = taskWire((await client.sendMessage(a2aMessage("once", { messageId }))) as never);
    const again = taskWire((await client.sendMessage(a2aMessage("once", { messageId }))) as never);
    expect(again.id).toBe(first.id);
    const racing = `race-${version}`;
    const answers = await Promise.all(Array.from({ length: 8 }, () => client.sendMessage(a2aMessage("at once", { messageId: racing }))));
    expect(new Set(answers.map((t) => taskWire(t as never).id)).size).toBe(1);
    expect(rows("SELECT count(*) AS n FROM a2a_tasks WHERE message_id = ?", racing)).toEqual([{ n: 1 }]);
    await expect(client.sendMessage(a2aMessage("another text", { messageId }))).rejects.toBeInstanceOf(JsonRpcRequestMalformedError);
  });
});

describe("A2A tasks", () => {
  it("a contextId stays with its bot and its session; another bot's context is refused", async () => {
    const client = await a2aClient(rpcUrl(), KEY);
    const one = taskWire((await client.sendMessage(a2aMessage("first"))) as never);
    const two = taskWire((await client.sendMessage(a2aMessage("second", { contextId: one.contextId }))) as never);
    expect(two.contextId).toBe(one.contextId);
    const sessions = rows("SELECT DISTINCT session_id FROM a2a_tasks WHERE context_id = ?", one.contextId);
    expect(sessions).toHaveLength(1);
    const helper = await a2aClient(`${base}/a2a/helper/`, KEY);
    await expect(helper.sendMessage(a2aMessage("yours?", { contextId: one.contextId }))).rejects.toThrow(/conversation with another bot/);
  });

  it("cancel stops a running turn; a finished task is not cancelable; an unknown id is not found", async () => {
    const client = await a2aClient(rpcUrl(), KEY);
    fake.failNext("hang");
    const queued = taskWire((await client.sendMessage(a2aMessage("wait forever", { returnImmediately: true }))) as never);
    await eventually(() => expect(fake.chatRequests().length).toBeGreaterThan(0));
    const canceled = await client.cancelTask({ tenant: "", id: queued.id, metadata: undefined });
    expect(stateOf(canceled)).toBe("TASK_STATE_CANCELED");
    expect(rows("SELECT state FROM a2a_tasks WHERE task_id = ?", queued.id)).toEqual([{ state: "canceled" }]);
    await expect(client.cancelTask({ tenant: "", id: queued.id, metadata: undefined })).resolves.toBeDefined();
    const done = taskWire((await client.sendMessage(a2aMessage("quick"))) as never);
    await expect(client.cancelTask({ tenant: "", id: done.id, metadata: undefined })).rejects.toBeInstanceOf(JsonRpcTaskNotCancelableError);
    await expect(client.getTask({ tenant: "", id: "no-such-task" })).rejects.toBeInstanceOf(JsonRpcTaskNotFoundError);
  });

  it("a failed turn fails the task with the typed reason in its status message", async () => {
    const client = await a2aClient(rpcUrl(), KEY);
    fake.failNext("rate_limited");
    const task = taskWire((await client.sendMessage(a2aMessage("too fast"))) as never);
    expect(task.status.state).toBe("TASK_STATE_FAILED");
    expect(task.status.message!.metadata).toEqual({ reason: "provider_rate_limit" });
    expect(task.status.message!.parts[0]!.text).toMatch(/^The turn failed \[reason: provider_rate_limit\]: /);
    expect(task.status.message!.parts[1]!.data).toMatchObject({ reason: "provider_rate_limit" });
  });

  it("an idle stream gets keep-alive comments, and the caller going away leaves the task running", async () => {
    fake.failNext("hang");
    const controller = new AbortController();
    const response = await post(
      { jsonrpc: "2.0", id: 7, method: "SendStreamingMessage", params: a2aWire("keep me company") },
      { accept: "text/event-stream" },
    );
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const reader = response.body!.getReader();
    let seen = "";
    while (!seen.includes(": keep-alive")) seen += new TextDecoder().decode((await reader.read()).value);
    const taskId = /"id":"([0-9a-f-]{36})"/.exec(seen)![1]!;
    controller.abort();
    await reader.cancel();
    const client = await a2aClient(rpcUrl(), KEY);
    expect(stateOf(await client.getTask({ tenant: "", id: taskId }))).toBe("TASK_STATE_WORKING");
    expect(stateOf(await client.cancelTask({ tenant: "", id: taskId, metadata: undefined }))).toBe("TASK_STATE_CANCELED");
  });
});

function a2aWire(text: string, parts?: unknown[]) {
  return { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: parts ?? [{ text }] } };
}

describe("A2A in hermes status", () => {
  it("lists the cards served and the latest tasks", async () => {
    const client = await a2aClient(rpcUrl(), KEY);
    const task = taskWire((await client.sendMessage(a2aMessage("for the status"))) as never);
    const r = await hermes(["--json", "status"], { home });
    expect(r.code).toBe(0);
    const { a2a } = JSON.parse(r.stdout) as {
      a2a: { cards: { profile: string; card_url: string }[]; tasks: { task_id: string; state: string }[] };
    };
    expect(a2a.cards.map((c) => c.card_url)).toEqual([
      `${base}/a2a/default/.well-known/agent-card.json`,
      `${base}/a2a/helper/.well-known/agent-card.json`,
    ]);
    expect(a2a.tasks[0]).toMatchObject({ task_id: task.id, state: "completed" });
    const human = await hermes(["status"], { home });
    expect(human.stdout).toContain(`${task.id}`);
  });
});

describe("A2A bad input", () => {
  it("is refused with typed errors, and a body over 1 MiB is not read", async () => {
    const client = await a2aClient(rpcUrl(), KEY);
    await expect(client.sendMessage(a2aMessage("", { parts: [] }))).rejects.toThrow(/has no text/);
    await expect(client.sendMessage(a2aMessage("", { parts: [{ data: { a: 1 } }] }))).rejects.toBeInstanceOf(
      JsonRpcContentTypeNotSupportedError,
    );
    const huge = await post({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: a2aWire("x".repeat(20 * 1024 * 1024)) });
    expect(huge.status).toBe(413);
    expect(await huge.json()).toMatchObject({ error: { code: -32602, data: [{ metadata: { reason: "payload_too_large" } }] } });
    await expect(client.sendMessage(a2aMessage("z".repeat(20 * 1024 * 1024)))).rejects.toBeInstanceOf(JsonRpcRequestMalformedError);
    await expect(client.sendMessage(a2aMessage("y".repeat(70_000)))).rejects.toThrow(/payload_too_large/);
    expect(await (await post("{not json")).json()).toMatchObject({ error: { code: -32700 } });
    expect(
      await (await post({ jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: "x" } }, { "a2a-version": "2.0" })).json(),
    ).toMatchObject({
      id: 2,
      error: { code: -32009 },
    });
    const noKey = await fetch(rpcUrl(), { method: "POST", body: "{}" });
    expect(noKey.status).toBe(401);
    const hostile = await post({ jsonrpc: "2.0", id: 3, method: "GetTask", params: { id: "x" } }, { origin: "http://evil.example" });
    expect(hostile.status).toBe(403);
    const own = await post({ jsonrpc: "2.0", id: 4, method: "GetTask", params: { id: "x" } }, { origin: base });
    expect(own.headers.get("access-control-allow-origin")).toBe(base);
    // The gateway is still answering after all of it.
    expect(stateOf((await client.sendMessage(a2aMessage("still here"))) as never)).toBe("TASK_STATE_COMPLETED");
  });
});

describe("A2A across a crash", () => {
  it("a task running at kill -9 is failed with runtime_offline at the next start, never re-run; ended tasks and their messageIds survive", async () => {
    const client = await a2aClient(rpcUrl(), KEY);
    const done = taskWire((await client.sendMessage(a2aMessage("before the crash", { messageId: "kept" }))) as never);
    fake.failNext("hang");
    const cut = taskWire((await client.sendMessage(a2aMessage("cut off", { returnImmediately: true }))) as never);
    await eventually(() => expect(fake.chatRequests().at(-1)?.raw).toContain("cut off"));
    const requests = fake.chatRequests().length;
    await gateway.kill9();
    gateway = await startGatewayProcess(home, { http: gateway.http });
    const after = await a2aClient(rpcUrl(), KEY);
    const failed = taskWire(await after.getTask({ tenant: "", id: cut.id }));
    expect(failed.status.state).toBe("TASK_STATE_FAILED");
    expect(failed.status.message!.metadata).toEqual({ reason: "runtime_offline" });
    expect(taskWire((await after.sendMessage(a2aMessage("before the crash", { messageId: "kept" }))) as never).id).toBe(done.id);
    expect(fake.chatRequests().length).toBe(requests);
  });
});
