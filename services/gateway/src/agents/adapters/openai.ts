import { z } from "zod";
import { classifyProviderError } from "../../delivery/core/reasons.js";
import { type ChatMessage, type Provider, ProviderError, type ToolCall, type TurnRequest, type TurnResult } from "../core/provider.js";

/** The `openai` provider: any OpenAI-compatible chat-completions endpoint. */
export interface OpenAIProviderOptions {
  /** The key of this provider in config (`providers.<name>`); used in messages and results. */
  name?: string;
  /** e.g. `https://api.openai.com/v1` (the `/chat/completions` path is appended). */
  base_url: string;
  api_key?: string | undefined;
  /** Where the key is expected to come from, for the missing_config message. */
  api_key_env?: string | undefined;
  /** Per-turn timeout; on expiry the turn fails with delivery_timeout. */
  timeout_ms?: number;
  /** Injected for tests; defaults to the global fetch. */
  fetch?: typeof fetch;
  headers?: Record<string, string>;
}

export const DEFAULT_OPENAI_TIMEOUT_MS = 120_000;

const toolCallSchema = z.object({
  id: z.string().min(1),
  type: z.string().optional(),
  function: z.object({ name: z.string().min(1), arguments: z.string().default("") }),
});

const contentSchema = z
  .union([z.string(), z.null(), z.array(z.object({ type: z.string().optional(), text: z.string().optional() }).passthrough())])
  .optional();

const completionSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({ role: z.string().optional(), content: contentSchema, tool_calls: z.array(toolCallSchema).nullish() }),
        finish_reason: z.string().nullish(),
      }),
    )
    .min(1, "no choices in the response"),
});

const errorEnvelopeSchema = z.object({
  error: z.union([
    z
      .object({ message: z.string().nullish(), type: z.string().nullish(), code: z.union([z.string(), z.number()]).nullish() })
      .passthrough(),
    z.string(),
  ]),
});

/** OpenAI restricts `name` on messages to this; anything else is left out rather than rejected by the API. */
const OPENAI_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function wireMessage(m: ChatMessage): Record<string, unknown> {
  switch (m.role) {
    case "user":
      return { role: "user", content: m.content, ...(m.name && OPENAI_NAME.test(m.name) ? { name: m.name } : {}) };
    case "assistant": {
      const calls = m.tool_calls ?? [];
      if (calls.length === 0) return { role: "assistant", content: m.content };
      return {
        role: "assistant",
        content: m.content.length > 0 ? m.content : null,
        tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })),
      };
    }
    case "tool":
      return { role: "tool", tool_call_id: m.tool_call_id, content: m.content };
  }
}

function joinContent(content: z.infer<typeof contentSchema>): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => part.text ?? "").join("");
  return "";
}

function describeNetworkError(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } })?.cause;
  const code = typeof cause?.code === "string" ? cause.code : undefined;
  const message = typeof cause?.message === "string" ? cause.message : err instanceof Error ? err.message : String(err);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

export class OpenAIProvider implements Provider {
  readonly name: string;
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(private readonly options: OpenAIProviderOptions) {
    this.name = options.name ?? "openai";
    this.baseUrl = options.base_url.replace(/\/+$/, "");
    this.timeoutMs = options.timeout_ms ?? DEFAULT_OPENAI_TIMEOUT_MS;
    this.fetchImpl = options.fetch ?? fetch;
  }

  async complete(request: TurnRequest): Promise<TurnResult> {
    const apiKey = this.options.api_key;
    if (apiKey === undefined || apiKey.trim().length === 0) {
      const where = this.options.api_key_env
        ? `set ${this.options.api_key_env} in HERMES_HOME/.env or the environment`
        : "configure an API key";
      throw this.error("missing_config", `no API key configured for provider ${this.name}: ${where}`);
    }
    const body: Record<string, unknown> = {
      model: request.model,
      messages: [
        ...(request.system_prompt.length > 0 ? [{ role: "system", content: request.system_prompt }] : []),
        ...request.messages.map(wireMessage),
      ],
    };
    if (request.tools && request.tools.length > 0) {
      body["tools"] = request.tools.map((t) => ({
        type: "function",
        function: { name: t.name, description: t.description, parameters: t.parameters },
      }));
    }

    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
    const url = `${this.baseUrl}/chat/completions`;
    let status: number;
    let raw: string;
    try {
      const response = await this.fetchImpl(url, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}`, ...this.options.headers },
        body: JSON.stringify(body),
        signal,
      });
      status = response.status;
      raw = await response.text();
    } catch (err) {
      if (request.signal?.aborted) {
        throw this.error("unknown", `turn cancelled before ${this.name} answered`, { cancelled: true, cause: err });
      }
      if (timeout.aborted) {
        throw this.error("delivery_timeout", `${this.name} did not answer within ${Math.round(this.timeoutMs / 1000)} s (${url})`, {
          cause: err,
        });
      }
      // Connection refused, reset, DNS: the provider endpoint is unavailable, which one retry may fix.
      throw this.error("provider_server_error", `cannot reach ${this.name} at ${url}: ${describeNetworkError(err)}`, { cause: err });
    }

    if (status < 200 || status > 299) throw this.httpError(status, raw);

    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      throw this.error("unknown", `${this.name} answered HTTP ${status} with a body that is not JSON: ${raw.slice(0, 200)}`, {
        http_status: status,
        raw,
      });
    }
    const embedded = errorEnvelopeSchema.safeParse(json);
    if (embedded.success) throw this.httpError(undefined, raw, embedded.data);
    const parsed = completionSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const where = issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
      throw this.error("unknown", `${this.name} answered with an unexpected shape (${where}${issue.message})`, {
        http_status: status,
        raw,
      });
    }
    const message = parsed.data.choices[0]!.message;
    const text = joinContent(message.content);
    const calls = message.tool_calls ?? [];
    if (calls.length > 0) {
      const tool_calls: ToolCall[] = calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }));
      return { kind: "tool_calls", tool_calls, ...(text.length > 0 ? { text } : {}) };
    }
    return { kind: "text", text };
  }

  /** A failed HTTP answer, classified from the status and the provider's own error fields; its text is kept. */
  private httpError(status: number | undefined, raw: string, envelope?: z.infer<typeof errorEnvelopeSchema>): ProviderError {
    let parsedEnvelope = envelope;
    if (parsedEnvelope === undefined) {
      try {
        const candidate = errorEnvelopeSchema.safeParse(JSON.parse(raw));
        if (candidate.success) parsedEnvelope = candidate.data;
      } catch {
        // Not JSON (an HTML error page from a proxy, say): classify from the status and the text.
      }
    }
    const err = parsedEnvelope?.error;
    const detail = typeof err === "string" ? { message: err } : err;
    const providerText =
      (detail?.message ?? "").trim() ||
      raw
        .replace(/<[^>]*>/g, " ")
        .replace(/\s+/g, " ")
        .trim()
        .slice(0, 300);
    const reason = classifyProviderError({ http_status: status, code: detail?.code, type: detail?.type, message: providerText });
    const head = status === undefined ? `${this.name}` : `${this.name} HTTP ${status}`;
    return this.error(reason, providerText.length > 0 ? `${head}: ${providerText}` : head, { http_status: status, raw });
  }

  private error(
    reason: ProviderError["reason"],
    message: string,
    extra: { http_status?: number | undefined; raw?: string; cancelled?: boolean; cause?: unknown } = {},
  ): ProviderError {
    return new ProviderError(reason, message, { provider: this.name, ...extra });
  }
}
