import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A real OpenAI-compatible HTTP server for tests (node:http on 127.0.0.1, a free port). It answers
 * `POST /v1/chat/completions` and `GET /v1/models` deterministically, can answer with tool calls, and
 * injects the failures real providers produce, per model name or from a programmable queue. It
 * records every request so tests can assert what was sent.
 */

export const FAKE_FAILURES = [
  "unauthorized",
  "forbidden",
  "payment_required",
  "insufficient_quota",
  "rate_limited",
  "server_error",
  "overloaded",
  "bad_gateway_html",
  "context_length",
  "model_not_found",
  "hang",
  "malformed_json",
  "bad_shape",
  "error_in_200",
] as const;

export type FakeFailure = (typeof FAKE_FAILURES)[number];

export type FakeReply =
  | { text: string }
  | { tool_calls: { name: string; arguments: Record<string, unknown> | string; id?: string }[]; text?: string };

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body (undefined when it was not JSON). */
  body: unknown;
  raw: string;
}

export interface FakeOpenAIServerOptions {
  /** When set, requests must carry `Authorization: Bearer <api_key>` or get a real-looking 401. */
  api_key?: string;
  /** Listed by /v1/models; when `strict_models` is set, any other model gets 404 model_not_found. */
  models?: string[];
  strict_models?: boolean;
}

export interface FakeOpenAIServer {
  /** The base_url to configure: `http://127.0.0.1:<port>/v1`. */
  readonly url: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Every chat request for this model fails this way until cleared. */
  failModel(model: string, failure: FakeFailure): void;
  clearModel(model: string): void;
  /** The next `times` chat requests fail this way. failNext and replyNext share one first-in, first-out queue, which beats failModel. */
  failNext(failure: FakeFailure, times?: number): void;
  /** The next chat request answers exactly this. */
  replyNext(reply: FakeReply): void;
  /** Chat requests only (what a provider sent), in order. */
  chatRequests(): RecordedRequest[];
  /** Forgets recorded requests, queues and per-model failures. */
  reset(): void;
  close(): Promise<void>;
}

const FIXED_CREATED = 1_700_000_000;

function errorBody(message: string, type: string | null, code: string | number | null, param: string | null = null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

interface Canned {
  status: number;
  body: string;
  contentType?: string;
  headers?: Record<string, string>;
}

function cannedFailure(failure: Exclude<FakeFailure, "hang">, model: string): Canned {
  switch (failure) {
    case "unauthorized":
      return {
        status: 401,
        body: errorBody(
          "Incorrect API key provided: sk-wrong. You can find your API key at https://platform.openai.com/account/api-keys.",
          "invalid_request_error",
          "invalid_api_key",
        ),
      };
    case "forbidden":
      return { status: 403, body: errorBody(`You are not allowed to sample from ${model}.`, "permission_error", null) };
    case "payment_required":
      return {
        status: 402,
        body: JSON.stringify({ error: { message: "Insufficient credits. Add more using https://example.test/credits", code: 402 } }),
      };
    case "insufficient_quota":
      return {
        status: 429,
        body: errorBody(
          "You exceeded your current quota, please check your plan and billing details.",
          "insufficient_quota",
          "insufficient_quota",
        ),
      };
    case "rate_limited":
      return {
        status: 429,
        headers: { "retry-after": "20" },
        body: errorBody(
          `Rate limit reached for ${model} in organization org-fake on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.`,
          "requests",
          "rate_limit_exceeded",
        ),
      };
    case "server_error":
      return {
        status: 500,
        body: errorBody("The server had an error while processing your request. Sorry about that!", "server_error", null),
      };
    case "overloaded":
      return { status: 503, body: errorBody("The engine is currently overloaded, please try again later.", "server_error", null) };
    case "bad_gateway_html":
      return { status: 502, contentType: "text/html", body: "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>" };
    case "context_length":
      return {
        status: 400,
        body: errorBody(
          "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
          "invalid_request_error",
          "context_length_exceeded",
          "messages",
        ),
      };
    case "model_not_found":
      return {
        status: 404,
        body: errorBody(
          `The model \`${model}\` does not exist or you do not have access to it.`,
          "invalid_request_error",
          "model_not_found",
        ),
      };
    case "malformed_json":
      return { status: 200, body: '{"id":"chatcmpl-broken","object":"chat.completion","choices":[{"message":{"content":"hal' };
    case "bad_shape":
      return { status: 200, body: JSON.stringify({ id: "chatcmpl-odd", object: "chat.completion", choices: [] }) };
    case "error_in_200":
      return { status: 200, body: errorBody("Provider returned error: upstream overloaded", "server_error", 503) };
  }
}

type Message = { role?: unknown; content?: unknown; name?: unknown; tool_call_id?: unknown };

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p === "object" && "text" in p ? String(p.text) : "")).join("");
  return "";
}

/** The default deterministic answer: echo the newest input; `#call <tool> <json>` in a user message asks for a tool call. */
function defaultReply(model: string, messages: Message[], toolNames: string[]): FakeReply {
  const last = messages.at(-1);
  if (last?.role === "tool") return { text: `tool result: ${contentText(last.content)}` };
  const lastUser = [...messages].reverse().find((m) => m.role === "user");
  const text = contentText(lastUser?.content);
  const call = /#call\s+([A-Za-z0-9_-]+)\s+(\{[\s\S]*\})\s*$/.exec(text);
  if (call && toolNames.includes(call[1]!)) return { tool_calls: [{ name: call[1]!, arguments: call[2]! }] };
  return { text: `echo(${model}): ${text}` };
}

function completion(model: string, reply: FakeReply, n: number): string {
  const toolCalls =
    "tool_calls" in reply
      ? reply.tool_calls.map((c, i) => ({
          id: c.id ?? `call_fake_${n}_${i}`,
          type: "function",
          function: { name: c.name, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments) },
        }))
      : undefined;
  const content = "text" in reply && reply.text !== undefined ? reply.text : null;
  return JSON.stringify({
    id: `chatcmpl-fake-${n}`,
    object: "chat.completion",
    created: FIXED_CREATED,
    model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
        finish_reason: toolCalls ? "tool_calls" : "stop",
      },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export async function startFakeOpenAIServer(options: FakeOpenAIServerOptions = {}): Promise<FakeOpenAIServer> {
  const requests: RecordedRequest[] = [];
  const modelFailures = new Map<string, FakeFailure>();
  const queue: ({ kind: "fail"; failure: FakeFailure } | { kind: "reply"; reply: FakeReply })[] = [];
  const models = options.models ?? ["fake-small", "fake-large"];
  let served = 0;

  function send(res: ServerResponse, canned: Canned): void {
    res.writeHead(canned.status, { "content-type": canned.contentType ?? "application/json", ...canned.headers });
    res.end(canned.body);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    let body: unknown;
    try {
      body = raw.length > 0 ? JSON.parse(raw) : undefined;
    } catch {
      body = undefined;
    }
    const path = (req.url ?? "/").split("?")[0]!;
    requests.push({ method: req.method ?? "", path, headers: req.headers, body, raw });

    if (options.api_key !== undefined && req.headers.authorization !== `Bearer ${options.api_key}`) {
      send(res, cannedFailure("unauthorized", ""));
      return;
    }
    if (req.method === "GET" && path === "/v1/models") {
      send(res, {
        status: 200,
        body: JSON.stringify({
          object: "list",
          data: models.map((id) => ({ id, object: "model", created: FIXED_CREATED, owned_by: "fake" })),
        }),
      });
      return;
    }
    if (req.method !== "POST" || path !== "/v1/chat/completions") {
      send(res, { status: 404, body: errorBody(`Unknown request URL: ${req.method} ${path}.`, "invalid_request_error", "unknown_url") });
      return;
    }
    const request = body as { model?: unknown; messages?: unknown; tools?: unknown } | undefined;
    if (!request || typeof request.model !== "string" || !Array.isArray(request.messages)) {
      send(res, { status: 400, body: errorBody("'model' and 'messages' are required properties.", "invalid_request_error", null) });
      return;
    }
    const model = request.model;
    const next = queue.shift();
    const failure = next === undefined ? modelFailures.get(model) : next.kind === "fail" ? next.failure : undefined;
    if (failure === undefined && next === undefined && options.strict_models && !models.includes(model)) {
      send(res, cannedFailure("model_not_found", model));
      return;
    }
    if (failure === "hang") return; // never answers; close() destroys the socket
    if (failure !== undefined) {
      send(res, cannedFailure(failure, model));
      return;
    }
    const toolNames = Array.isArray(request.tools)
      ? request.tools.map((t: { function?: { name?: unknown } }) => String(t?.function?.name ?? ""))
      : [];
    const reply = next?.kind === "reply" ? next.reply : defaultReply(model, request.messages as Message[], toolNames);
    send(res, { status: 200, body: completion(model, reply, ++served) });
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, { status: 500, body: errorBody(`fake server bug: ${String(err)}`, "server_error", null) });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    failModel: (model, failure) => void modelFailures.set(model, failure),
    clearModel: (model) => void modelFailures.delete(model),
    failNext: (failure, times = 1) => {
      for (let i = 0; i < times; i++) queue.push({ kind: "fail", failure });
    },
    replyNext: (reply) => void queue.push({ kind: "reply", reply }),
    chatRequests: () => requests.filter((r) => r.path === "/v1/chat/completions"),
    reset: () => {
      requests.length = 0;
      queue.length = 0;
      modelFailures.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
