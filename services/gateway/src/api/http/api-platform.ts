import type { ServerResponse } from "node:http";
import { bearerToken, type ErrorReason, HermesError, type KeyRing, type Logger, type RouteHandler, toHermesError } from "@hermes/common";
import { z } from "zod";
import type { ChatService } from "../../agents/app/chat.js";
import { readBody } from "./read-body.js";

/** The inbound `api` platform: POST a chat message, get the bot's reply (how channel overrides are used from outside). */
export const API_PLATFORM_PATH = "/v1/platforms/api/messages";
const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Platform ids become part of routing keys (`agent:<profile>:api:<chat_type>:<chat_id>[:<thread_id>]`),
 * so they may not contain `:`; numbers are accepted and kept as their decimal text.
 */
const platformId = z
  .union([z.string(), z.number().int().nonnegative(), z.bigint()])
  .transform((v) => String(v))
  .pipe(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/, "1-128 letters, digits, '.', '_', '@' or '-' (no ':')"));

const messageSchema = z
  .object({
    profile: z.string().min(1, "name the bot (a profile)"),
    chat_id: platformId,
    thread_id: platformId.optional(),
    parent_id: platformId.optional(),
    chat_type: z
      .string()
      .regex(/^[a-z][a-z0-9_-]{0,31}$/, "lower-case letters, digits, '_' or '-' (e.g. dm, group, channel)")
      .default("dm"),
    text: z.string().min(1, "text is empty"),
  })
  .strict();

export type ApiPlatformMessage = z.infer<typeof messageSchema>;

const HTTP_STATUS: Partial<Record<ErrorReason, number>> = {
  invalid_params: 400,
  invalid_name: 400,
  payload_too_large: 413,
  unauthenticated: 401,
  not_found: 404,
  profile_deleted: 404,
  refused: 409,
  missing_config: 503,
  runtime_offline: 503,
  slot_wait_timeout: 503,
  target_busy: 503,
  delivery_timeout: 504,
  provider_auth_or_access: 502,
  provider_quota_limit: 502,
  provider_rate_limit: 502,
  provider_server_error: 502,
  context_overflow: 502,
  model_unavailable: 502,
  unknown: 502,
};

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" });
  res.end(text);
}

function sendError(res: ServerResponse, err: HermesError): void {
  const { raw: _raw, ...data } = err.data as Record<string, unknown>;
  // A refused body may still be arriving: answer, then close rather than read the rest for a next request.
  if (err.reason === "payload_too_large") res.setHeader("connection", "close");
  sendJson(res, HTTP_STATUS[err.reason] ?? 500, { error: { reason: err.reason, message: err.message, data } });
}

function parseMessage(raw: string): ApiPlatformMessage {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new HermesError("invalid_params", 'the body is not JSON; send {"profile": …, "chat_id": …, "text": …}');
  }
  const parsed = messageSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "body";
    const message = issue.code === "unrecognized_keys" ? `unknown field ${issue.keys.join(", ")}` : `${where}: ${issue.message}`;
    throw new HermesError("invalid_params", message, { data: { field: where } });
  }
  return parsed.data;
}

export interface ApiPlatformDeps {
  chat: ChatService;
  keys: KeyRing;
  logger: Logger;
}

/**
 * POST /v1/platforms/api/messages with `Authorization: Bearer <key>` (the gateway's API key; the
 * platform refuses to run at all without one configured, so it is never open by accident).
 * Creates the chat's session and routing entry on first use, runs the turn with the channel
 * overrides of `platforms.api.channel_overrides` applied, answers {reply, session_id, model, provider}.
 */
export function apiPlatformRoute(deps: ApiPlatformDeps): RouteHandler {
  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== API_PLATFORM_PATH) return false;
    try {
      if (req.method !== "POST") {
        res.setHeader("allow", "POST");
        sendJson(res, 405, { error: { reason: "method_not_found", message: `use POST ${API_PLATFORM_PATH}`, data: {} } });
        return true;
      }
      if (!deps.keys.required) {
        throw new HermesError(
          "missing_config",
          "the api platform needs an API key and this gateway has none: set API_SERVER_KEY (or gateway.api_key) and restart",
        );
      }
      if (!deps.keys.accepts(bearerToken(req.headers.authorization))) {
        throw new HermesError("unauthenticated", "missing or wrong API key: send `Authorization: Bearer <key>`");
      }
      const message = parseMessage(await readBody(req, MAX_BODY_BYTES));
      const abort = new AbortController();
      res.on("close", () => {
        if (!res.writableEnded) abort.abort();
      });
      const out = await deps.chat.turn({
        profile: message.profile,
        text: message.text,
        origin: {
          platform: "api",
          chat_type: message.chat_type,
          chat_id: message.chat_id,
          ...(message.thread_id !== undefined ? { thread_id: message.thread_id } : {}),
        },
        parent_id: message.parent_id,
        signal: abort.signal,
      });
      sendJson(res, 200, {
        reply: out.reply,
        session_id: out.session_id,
        model: out.model,
        provider: out.provider,
        fallback_used: out.fallback_used,
      });
    } catch (err) {
      const e = toHermesError(err);
      if (e.reason === "internal") deps.logger.error({ err }, "api platform request failed");
      if (!res.headersSent) sendError(res, e);
    }
    return true;
  };
}
