import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBot, transcript, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";

/**
 * The inbound `api` platform over real HTTP, and channel overrides through it: the resolution
 * order, the ephemeral system prompt (never stored), `/model` and `/model --global`, one cached
 * agent per chat, and the post-turn fallback check that still evicts on a real fallback.
 */

let fake: FakeOpenAIServer;
let t: TestGateway;
const CHANNEL = "123456789012345678";
const CONFIG = `# gateway-wide defaults (this comment must survive /model --global)
provider: fake
model: small-model
providers:
  fake: {base_url: FAKE_URL, api_key_env: FAKE_KEY}
  backup: {base_url: FAKE_URL, api_key_env: FAKE_KEY}
platforms:
  api:
    channel_overrides:
      ${CHANNEL}: {model: big-model, system_prompt: "You review code."}
      "555": {model: thread-model}
      "777": {model: parent-model, system_prompt: "Parent channel prompt."}
      "888": {system_prompt: "Only a prompt here."}
`;

beforeAll(async () => {
  fake = await startFakeOpenAIServer();
  const home = mkdtempSync(join(tmpdir(), "hermes-api-"));
  writeFileSync(join(home, "config.yaml"), CONFIG.replaceAll("FAKE_URL", fake.url));
  writeHomeEnv(home, { FAKE_KEY: "sk-fake" });
  t = await startTestGateway({ home });
  t.gateway.profiles.create("helper", {});
  createBot(t, "failover", { fallback_providers: ["backup"] });
});
afterAll(async () => {
  await t?.destroy();
  await fake?.close();
});

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

async function post(body: unknown, key: string | null = TEST_KEY, gateway = t): Promise<Reply> {
  const res = await fetch(`http://${gateway.gateway.httpAddress}/v1/platforms/api/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

function lastRequest(): { model: string; system: string | undefined } {
  const body = fake.chatRequests().at(-1)!.body as { model: string; messages: { role: string; content: string }[] };
  return { model: body.model, system: body.messages.find((m) => m.role === "system")?.content };
}

describe("api platform: auth and validation", () => {
  it("requires the key (constant-time check) and answers JSON errors", async () => {
    expect(await post({ profile: "helper", chat_id: "1", text: "hi" }, null)).toMatchObject({
      status: 401,
      body: { error: { reason: "unauthenticated" } },
    });
    expect((await post({ profile: "helper", chat_id: "1", text: "hi" }, "wrong-key-000000000")).status).toBe(401);
  });

  it("refuses to run at all on a gateway with no key configured", async () => {
    const open = await startTestGateway({ key: "" });
    try {
      const r = await post({ profile: "default", chat_id: "1", text: "hi" }, "anything", open);
      expect(r).toMatchObject({ status: 503, body: { error: { reason: "missing_config" } } });
      expect(String((r.body["error"] as { message: string }).message)).toContain("API_SERVER_KEY");
    } finally {
      await open.destroy();
    }
  });

  it.each([
    ["not JSON", "{nope", 400, "not JSON"],
    ["a missing chat_id", { profile: "helper", text: "hi" }, 400, "chat_id"],
    ["an unknown field", { profile: "helper", chat_id: "1", text: "hi", extra: 1 }, 400, "unknown field extra"],
    ["a ':' in an id (it would break the routing key)", { profile: "helper", chat_id: "a:b", text: "hi" }, 400, "chat_id"],
    ["empty text", { profile: "helper", chat_id: "1", text: "" }, 400, "text"],
    ["an unknown profile", { profile: "ghost", chat_id: "1", text: "hi" }, 404, "unknown profile ghost"],
    ["an invalid profile name", { profile: "../etc", chat_id: "1", text: "hi" }, 400, "must match"],
    ["text over 64 KiB", { profile: "helper", chat_id: "1", text: "x".repeat(70_000) }, 413, "the limit is 65536"],
  ])("answers %s with a clear error", async (_what, body, status, says) => {
    const r = await post(body);
    expect(r.status).toBe(status);
    expect(String((r.body["error"] as { message: string }).message)).toContain(says);
  });

  it("answers other methods with 405", async () => {
    const res = await fetch(`http://${t.gateway.httpAddress}/v1/platforms/api/messages`);
    expect(res.status).toBe(405);
  });
});

describe("channel overrides through the api platform", () => {
  it("creates the session and its routing entry, and replies with model and provider", async () => {
    const r = await post({ profile: "helper", chat_id: 1000, chat_type: "group", text: "hello" });
    expect(r).toMatchObject({
      status: 200,
      body: { reply: "echo(small-model): hello", model: "small-model", provider: "fake", session_id: expect.stringMatching(/^ses_/) },
    });
    const session = t.gateway.sessions.store.byKey("agent:helper:api:group:1000");
    expect(session?.session_id).toBe(r.body["session_id"]);
    expect(t.gateway.routing.keysOf("helper")).toContain("agent:helper:api:group:1000");
    const again = await post({ profile: "helper", chat_id: "1000", chat_type: "group", text: "again" });
    expect(again.body["session_id"]).toBe(r.body["session_id"]);
  });

  it.each([
    ["exact chat id", { chat_id: CHANNEL }, "big-model", "You review code."],
    ["thread id", { chat_id: "9001", thread_id: "555" }, "thread-model", undefined],
    ["parent channel id", { chat_id: "9002", thread_id: "4242", parent_id: "777" }, "parent-model", "Parent channel prompt."],
    ["chat beats parent", { chat_id: CHANNEL, parent_id: "777" }, "big-model", "You review code."],
    ["prompt-only override keeps the global model", { chat_id: "888" }, "small-model", "Only a prompt here."],
    ["no override: global config", { chat_id: "9003" }, "small-model", undefined],
  ])("resolves by %s", async (_what, where, model, prompt) => {
    const r = await post({ profile: "helper", ...where, text: "which model?" });
    expect(r.body["model"]).toBe(model);
    const sent = lastRequest();
    expect(sent.model).toBe(model);
    if (prompt) expect(sent.system?.endsWith(prompt)).toBe(true);
    else expect(sent.system).not.toMatch(/review code|Parent channel|Only a prompt/);
    // The ephemeral prompt is never stored in the transcript.
    const stored = JSON.stringify(transcript(t, "helper", String(r.body["session_id"])));
    expect(stored).not.toContain("You review code.");
    expect(stored).not.toContain("Parent channel prompt.");
  });

  it("/model in a chat beats its channel override; --reset returns to it", async () => {
    const set = await post({ profile: "helper", chat_id: CHANNEL, text: "/model custom-model" });
    expect(set.body["reply"]).toBe("This chat now uses custom-model on fake (from this chat's /model choice).");
    expect((await post({ profile: "helper", chat_id: CHANNEL, text: "now?" })).body["model"]).toBe("custom-model");
    // Other chats are not affected by a session choice.
    expect((await post({ profile: "helper", chat_id: "9003", text: "here?" })).body["model"]).toBe("small-model");
    await post({ profile: "helper", chat_id: CHANNEL, text: "/model --reset" });
    expect((await post({ profile: "helper", chat_id: CHANNEL, text: "and now?" })).body["model"]).toBe("big-model");
  });

  it("/model --global writes the default (comments kept) but does not beat a channel override", async () => {
    const r = await post({ profile: "default", chat_id: CHANNEL, text: "/model global-two --global" });
    expect(r.body["reply"]).toContain("Global default set to global-two.");
    expect(r.body["reply"]).toContain(`This chat keeps big-model from platforms.api.channel_overrides.${CHANNEL}`);
    const file = readFileSync(join(t.home, "config.yaml"), "utf8");
    expect(file).toContain("this comment must survive /model --global");
    expect(file).toMatch(/^model: global-two$/m);
    expect(file).toContain(CHANNEL);
    expect((await post({ profile: "default", chat_id: CHANNEL, text: "x" })).body["model"]).toBe("big-model");
    expect((await post({ profile: "default", chat_id: "9004", text: "x" })).body["model"]).toBe("global-two");
    // A profile without its own model inherits the gateway-wide default.
    expect((await post({ profile: "helper", chat_id: "9004", text: "x" })).body["model"]).toBe("global-two");
    writeFileSync(join(t.home, "config.yaml"), CONFIG.replaceAll("FAKE_URL", fake.url));
  });

  it("N turns in an overridden channel build the agent exactly once", async () => {
    await post({ profile: "helper", chat_id: "7001", parent_id: "777", text: "warm up" });
    const builds = t.gateway.chat.agents.builds;
    for (let i = 0; i < 5; i++) {
      const r = await post({ profile: "helper", chat_id: "7001", parent_id: "777", text: `turn ${i}` });
      expect(r.body["model"]).toBe("parent-model");
    }
    expect(t.gateway.chat.agents.builds - builds).toBe(0);
    // A new chat in the same channel builds its own agent, once.
    for (let i = 0; i < 3; i++) await post({ profile: "helper", chat_id: "7002", parent_id: "777", text: `turn ${i}` });
    expect(t.gateway.chat.agents.builds - builds).toBe(1);
  });

  it("a real provider fallback still evicts the cached agent, even when it serves the configured model name", async () => {
    const where = { profile: "failover", chat_id: CHANNEL };
    await post({ ...where, text: "warm up" });
    const builds = t.gateway.chat.agents.builds;
    await post({ ...where, text: "stable" });
    expect(t.gateway.chat.agents.builds).toBe(builds);
    fake.failNext("server_error");
    const r = await post({ ...where, text: "primary is down" });
    // The fallback provider answered with the same model name the channel configures...
    expect(r.body).toMatchObject({ model: "big-model", provider: "backup", fallback_used: true });
    // ...and the fallback flag still evicted the agent: the next turn rebuilds it on the primary.
    const next = await post({ ...where, text: "back to normal" });
    expect(next.body).toMatchObject({ model: "big-model", provider: "fake", fallback_used: false });
    expect(t.gateway.chat.agents.builds).toBe(builds + 1);
    await post({ ...where, text: "and stays" });
    expect(t.gateway.chat.agents.builds).toBe(builds + 1);
    const metrics = await t.gateway.metrics.registry.metrics();
    expect(metrics).toMatch(/hermes_agent_evictions_total\{[^}]*why="provider_fallback"[^}]*\} 1/);
  });

  it("editing config.yaml takes effect on the next turn (the agent is rebuilt from the new spec)", async () => {
    const builds = t.gateway.chat.agents.builds;
    writeFileSync(
      join(t.home, "config.yaml"),
      CONFIG.replaceAll("FAKE_URL", fake.url).replace("model: small-model", "model: edited-model"),
    );
    expect((await post({ profile: "helper", chat_id: "1000", chat_type: "group", text: "after edit" })).body["model"]).toBe("edited-model");
    expect(t.gateway.chat.agents.builds).toBe(builds + 1);
    writeFileSync(join(t.home, "config.yaml"), CONFIG.replaceAll("FAKE_URL", fake.url));
  });
});
