import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./fake-openai-server.js";

let server: FakeOpenAIServer;

async function chat(body: unknown, key = "sk-test"): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(`${server.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

beforeEach(async () => {
  server ??= await startFakeOpenAIServer({ api_key: "sk-test" });
  server.reset();
});

afterAll(async () => {
  await server?.close();
});

describe("fake OpenAI server", () => {
  it("listens on 127.0.0.1 and lists models", async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const res = await fetch(`${server.url}/models`, { headers: { authorization: "Bearer sk-test" } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(["fake-small", "fake-large"]);
  });

  it("answers deterministically and records the request", async () => {
    const body = {
      model: "fake-small",
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: "hello" },
      ],
    };
    const a = await chat(body);
    const b = await chat(body);
    expect(a.status).toBe(200);
    const json = JSON.parse(a.text);
    expect(json.choices[0].message.content).toBe("echo(fake-small): hello");
    expect(JSON.parse(b.text).choices[0].message.content).toBe("echo(fake-small): hello");
    expect(server.chatRequests()).toHaveLength(2);
    expect(server.chatRequests()[0]!.body).toEqual(body);
    expect(server.chatRequests()[0]!.headers.authorization).toBe("Bearer sk-test");
  });

  it("checks the API key like the real service", async () => {
    const res = await chat({ model: "fake-small", messages: [] }, "sk-wrong");
    expect(res.status).toBe(401);
    expect(JSON.parse(res.text).error.code).toBe("invalid_api_key");
  });

  it("answers with a tool call on request", async () => {
    const res = await chat({
      model: "fake-small",
      messages: [{ role: "user", content: '#call message_agent {"target":"bob","message":"hi"}' }],
      tools: [{ type: "function", function: { name: "message_agent", parameters: {} } }],
    });
    const msg = JSON.parse(res.text).choices[0];
    expect(msg.finish_reason).toBe("tool_calls");
    expect(msg.message.tool_calls[0].function).toEqual({ name: "message_agent", arguments: '{"target":"bob","message":"hi"}' });
  });

  it("replays programmed replies and failures in order, before per-model failures", async () => {
    server.failModel("fake-small", "server_error");
    server.replyNext({ text: "scripted" });
    server.failNext("rate_limited");
    const body = { model: "fake-small", messages: [{ role: "user", content: "x" }] };
    expect(JSON.parse((await chat(body)).text).choices[0].message.content).toBe("scripted");
    const limited = await chat(body);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("20");
    expect((await chat(body)).status).toBe(500);
    server.clearModel("fake-small");
    expect((await chat(body)).status).toBe(200);
  });

  it.each([
    ["unauthorized", 401],
    ["forbidden", 403],
    ["payment_required", 402],
    ["insufficient_quota", 429],
    ["rate_limited", 429],
    ["server_error", 500],
    ["overloaded", 503],
    ["bad_gateway_html", 502],
    ["context_length", 400],
    ["model_not_found", 404],
    ["malformed_json", 200],
    ["bad_shape", 200],
    ["error_in_200", 200],
  ] as const)("injects %s as HTTP %i", async (failure, status) => {
    server.failNext(failure);
    const res = await chat({ model: "fake-small", messages: [{ role: "user", content: "x" }] });
    expect(res.status).toBe(status);
  });

  it("hangs until closed", async () => {
    server.failNext("hang");
    const started = Date.now();
    await expect(
      fetch(`${server.url}/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer sk-test" },
        body: JSON.stringify({ model: "m", messages: [] }),
        signal: AbortSignal.timeout(200),
      }),
    ).rejects.toThrow();
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  });

  it("refuses unknown models in strict mode and closes with a hanging request open", async () => {
    const strict = await startFakeOpenAIServer({ strict_models: true, models: ["only"] });
    const res = await fetch(`${strict.url}/chat/completions`, { method: "POST", body: JSON.stringify({ model: "other", messages: [] }) });
    expect(res.status).toBe(404);
    expect(JSON.parse(await res.text()).error.code).toBe("model_not_found");
    strict.failNext("hang");
    const pending = fetch(`${strict.url}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "only", messages: [] }),
    }).catch((err: unknown) => err);
    // Closed with the hanging request open: it has reached the server (after the refused one).
    await eventually(() => expect(strict.chatRequests()).toHaveLength(2));
    await strict.close();
    expect(await pending).toBeInstanceOf(Error);
  });

  it("answers 404 for unknown paths and 400 for bad bodies", async () => {
    const res = await fetch(`${server.url}/embeddings`, { method: "POST", headers: { authorization: "Bearer sk-test" } });
    expect(res.status).toBe(404);
    expect((await chat({ nope: true })).status).toBe(400);
  });
});
