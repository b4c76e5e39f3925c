import type { IncomingMessage, ServerResponse } from "node:http";
import { AgentCard, formatSSEErrorEvent, formatSSEEvent, SSE_HEADERS } from "@a2a-js/sdk";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { ERROR_INFO_TYPE } from "@a2a-js/sdk/errors";
import { JsonRpcTransportHandler, ServerCallContext } from "@a2a-js/sdk/server";
import { bearerToken, type ErrorReason, HermesError, type Logger, originAllowed, type RouteHandler, toHermesError } from "@hermes/common";
import { DEFAULT_PROFILE } from "@hermes/contract";
import type { ModelConfigSource } from "../../agents/app/model-config.js";
import { readBody } from "../../api/http/read-body.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { A2aCallers } from "../app/a2a-callers.js";
import type { A2aTasks } from "../app/a2a-tasks.js";
import { BotRequestHandler } from "../app/bot-request-handler.js";
import {
  A2A_VERSIONS,
  type A2aVersion,
  AGENT_CARD_PATH,
  botCard,
  type CardBot,
  type CardSite,
  indexCard,
  isServedVersion,
  requestedVersion,
} from "../core/card.js";
import type { A2aCaller } from "../core/task.js";

/** A JSON-RPC request body is refused past this size, before it is parsed (a message's text is at most 64 Ki characters). */
export const MAX_A2A_BODY_BYTES = 1024 * 1024;

export interface A2aRouteDeps {
  tasks: A2aTasks;
  callers: A2aCallers;
  profiles: ProfileService;
  config: ModelConfigSource;
  /** Whether a bot is listed in the gateway's index card (hidden bots are not; their own cards still answer). */
  listed(profile: string): boolean;
  gatewayId: string;
  version: string;
  /** `a2a.public_url`: the base URL cards advertise instead of the address the caller reached. */
  publicUrl?: string | undefined;
  /** Comment lines on an idle stream, so proxies and clients keep it. */
  keepAliveMs: number;
  /** Browser origins besides the gateway's own (http.allowed_origins). */
  allowedOrigins: readonly string[];
  logger: Logger;
}

type A2aPath = { kind: "index" } | { kind: "card"; bot: string } | { kind: "rpc"; bot: string };

const BOT_PATH = /^\/a2a\/([^/]{1,200})(\/.*)?$/;

/** Which A2A resource a path names, or undefined for none. */
export function a2aPath(path: string): A2aPath | undefined {
  if (path === `/${AGENT_CARD_PATH}`) return { kind: "index" };
  const match = BOT_PATH.exec(path);
  if (!match) return undefined;
  let bot: string;
  try {
    bot = decodeURIComponent(match[1]!);
  } catch {
    return undefined;
  }
  const rest = match[2] ?? "/";
  if (rest === "/") return { kind: "rpc", bot };
  if (rest === `/${AGENT_CARD_PATH}`) return { kind: "card", bot };
  return undefined;
}

/** HTTP status and JSON-RPC code of the refusals made before a request reaches the protocol. */
const REFUSALS: Partial<Record<ErrorReason, { status: number; code: number }>> = {
  unauthenticated: { status: 401, code: -32600 },
  refused: { status: 403, code: -32600 },
  not_found: { status: 404, code: -32600 },
  method_not_found: { status: 405, code: -32600 },
  payload_too_large: { status: 413, code: -32602 },
  invalid_params: { status: 400, code: -32602 },
  missing_config: { status: 503, code: -32603 },
};

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", ...headers });
  res.end(JSON.stringify(body));
}

/** A refusal: `{error: {reason, message, data}}` on a card, a JSON-RPC error envelope (SDK clients read it as a typed error) on an endpoint. */
function sendRefusal(res: ServerResponse, err: HermesError, rpc: boolean, legacy: boolean): void {
  const { status, code } = REFUSALS[err.reason] ?? { status: 500, code: -32603 };
  const headers: Record<string, string> = {};
  if (err.reason === "unauthenticated") headers["www-authenticate"] = 'Bearer realm="hermes-a2a"';
  // A refused body may still be arriving: it is read and dropped (readBody), never kept, so the
  // client can finish sending and read this answer (an SDK client then sees a typed error, not EPIPE).
  if (!rpc) {
    sendJson(res, status, { error: { reason: err.reason, message: err.message, data: err.data } }, headers);
    return;
  }
  const info = { "@type": ERROR_INFO_TYPE, reason: err.reason.toUpperCase(), domain: "hermes-mesh", metadata: { reason: err.reason } };
  const error = { code, message: `${err.message} [${err.reason}]`, ...(legacy ? {} : { data: [info] }) };
  sendJson(res, status, { jsonrpc: "2.0", id: null, error }, headers);
}

const HOST = /^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$|^\[[0-9A-Fa-f:.]{2,45}\](:\d{1,5})?$/;

/** The base URL cards name: the configured public URL, else the host the caller reached (when it is a plain host[:port]). */
function baseUrl(req: IncomingMessage, publicUrl: string | undefined): string {
  if (publicUrl) return publicUrl;
  const host = req.headers.host;
  if (host && HOST.test(host)) return `http://${host}`;
  const { localAddress, localPort } = req.socket;
  const address = (localAddress ?? "127.0.0.1").replace(/^::ffff:/, "");
  return `http://${address.includes(":") ? `[${address}]` : address}:${localPort}`;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(",") : value;
}

/**
 * The A2A endpoints on the gateway's HTTP port: `GET /.well-known/agent-card.json` (the gateway's
 * index card), `GET /a2a/<profile>/.well-known/agent-card.json` (a bot's card) and
 * `POST /a2a/<profile>/` (JSON-RPC, 1.0 with `A2A-Version: 1.0`, the 0.3 names without it; the
 * streaming methods answer with SSE). Every request needs a bearer key (the gateway's API key or
 * a caller's); a request from a browser page needs an allowed Origin.
 */
export function a2aRoutes(deps: A2aRouteDeps): RouteHandler {
  const site = (req: IncomingMessage): CardSite => ({
    base_url: baseUrl(req, deps.publicUrl),
    version: deps.version,
    gateway_id: deps.gatewayId,
  });

  const cardBot = (profile: string): CardBot => {
    const persona = deps.config.forProfile(profile).persona;
    return { profile, display_name: persona.display_name, title: persona.title, description: persona.description };
  };

  /** The bot a path names (a current or former profile name); unknown ones are not_found. */
  const bot = (name: string): string => {
    try {
      return deps.profiles.resolve(name);
    } catch (err) {
      if (err instanceof HermesError && (err.reason === "not_found" || err.reason === "invalid_name")) {
        throw new HermesError(
          "not_found",
          `no bot called ${JSON.stringify(name)} on this gateway; its index card lists them: /${AGENT_CARD_PATH}`,
          {
            data: { profile: name },
          },
        );
      }
      throw err;
    }
  };

  const admit = (req: IncomingMessage, res: ServerResponse): A2aCaller | undefined => {
    const origin = req.headers.origin;
    if (origin !== undefined) {
      if (!originAllowed(req, deps.allowedOrigins)) {
        throw new HermesError("refused", `origin ${origin} may not call this gateway's A2A endpoints; list it in http.allowed_origins`, {
          data: { origin },
        });
      }
      res.setHeader("access-control-allow-origin", origin);
      res.setHeader("vary", "Origin, A2A-Version");
    }
    if (req.method === "OPTIONS") {
      res.writeHead(204, {
        "access-control-allow-methods": "GET, POST, OPTIONS",
        "access-control-allow-headers": "authorization, content-type, a2a-version, a2a-extensions, x-a2a-extensions",
        "access-control-max-age": "600",
      });
      res.end();
      return undefined;
    }
    if (!deps.callers.configured) {
      throw new HermesError(
        "missing_config",
        "A2A needs a key and this gateway has none: set API_SERVER_KEY (or gateway.api_key, or a2a.callers) and restart",
      );
    }
    const caller = deps.callers.identify(bearerToken(req.headers.authorization));
    if (!caller) throw new HermesError("unauthenticated", "missing or wrong key: send `Authorization: Bearer <key>`");
    return caller;
  };

  const sendCard = (req: IncomingMessage, res: ServerResponse, which: A2aPath) => {
    if (req.method !== "GET") throw new HermesError("method_not_found", "use GET for an Agent Card");
    const wanted = requestedVersion(header(req, "a2a-version"));
    // A card is discovery: a caller naming a version not served still gets the newest card (its calls are then refused).
    const version: A2aVersion = isServedVersion(wanted) ? wanted : A2A_VERSIONS[0];
    const card =
      which.kind === "index"
        ? indexCard(
            deps.profiles
              .names()
              .filter((p) => deps.listed(p))
              .map(cardBot),
            site(req),
            version,
            DEFAULT_PROFILE,
          )
        : botCard(cardBot(bot((which as { bot: string }).bot)), site(req), version);
    sendJson(res, 200, card, { vary: "A2A-Version, Origin" });
  };

  const serveRpc = async (req: IncomingMessage, res: ServerResponse, name: string, caller: A2aCaller, version: string) => {
    if (req.method !== "POST") {
      res.setHeader("allow", "POST");
      throw new HermesError("method_not_found", "the A2A endpoint takes JSON-RPC over POST");
    }
    const profile = bot(name);
    const raw = await readBody(req, MAX_A2A_BODY_BYTES);
    const legacy = version === "0.3";
    const envelope = (id: unknown, error: unknown) => ({ jsonrpc: "2.0", id: id ?? null, error });
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      sendJson(res, 200, envelope(null, { code: -32700, message: "the body is not JSON" }));
      return;
    }
    const id = (body as { id?: unknown } | null)?.id;
    if (!isServedVersion(version)) {
      const message = `A2A-Version ${version} is not served here; send ${A2A_VERSIONS.map((v) => `"${v}"`).join(" or ")} (none means 0.3)`;
      sendJson(res, 200, envelope(id, { code: -32009, message }));
      return;
    }
    const aborted = new AbortController();
    res.on("close", () => aborted.abort());
    const card = AgentCard.fromJSON(botCard(cardBot(profile), site(req), "1.0"));
    const handler = new BotRequestHandler(deps.tasks, { profile, caller, card, signal: aborted.signal });
    const context = new ServerCallContext({ user: { isAuthenticated: true, userName: caller.id }, requestedVersion: version });
    const transport = legacy ? new LegacyJsonRpcTransportHandler(handler) : new JsonRpcTransportHandler(handler);
    const out = await transport.handle(body as Record<string, unknown>, context);
    if (!(Symbol.asyncIterator in out)) {
      sendJson(res, 200, out);
      return;
    }
    await stream(res, out, id, legacy, aborted.signal);
  };

  /**
   * SSE: the first event is awaited before the headers go out, so an early refusal (an unknown task,
   * a bad message) is a plain JSON-RPC error; then each event as `data:`, comments while idle.
   */
  const stream = async (res: ServerResponse, events: AsyncGenerator<unknown>, id: unknown, legacy: boolean, signal: AbortSignal) => {
    const mapError = legacy ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError : JsonRpcTransportHandler.mapToJSONRPCError;
    let next: IteratorResult<unknown>;
    try {
      next = await events.next();
    } catch (err) {
      sendJson(res, 200, { jsonrpc: "2.0", id: id ?? null, error: mapError(err) });
      return;
    }
    res.writeHead(200, SSE_HEADERS);
    let wrote = Date.now();
    const keepAlive = setInterval(() => {
      if (Date.now() - wrote < deps.keepAliveMs / 2) return;
      res.write(": keep-alive\n\n");
      wrote = Date.now();
    }, deps.keepAliveMs);
    try {
      while (!next.done && !signal.aborted) {
        res.write(formatSSEEvent(next.value));
        wrote = Date.now();
        next = await events.next();
      }
    } catch (err) {
      if (!signal.aborted) res.write(formatSSEErrorEvent({ jsonrpc: "2.0", id: id ?? null, error: mapError(err) }));
    } finally {
      clearInterval(keepAlive);
      await events.return?.(undefined);
      res.end();
    }
  };

  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const which = a2aPath(path);
    if (!which) return false;
    const rpc = which.kind === "rpc";
    const version = requestedVersion(header(req, "a2a-version"));
    try {
      const caller = admit(req, res);
      if (!caller) return true; // a preflight, answered
      if (which.kind === "rpc") await serveRpc(req, res, which.bot, caller, version);
      else sendCard(req, res, which);
    } catch (err) {
      const e = toHermesError(err);
      if (!REFUSALS[e.reason]) deps.logger.error({ err: e, path }, "a2a request failed");
      if (!res.headersSent) sendRefusal(res, e, rpc, version === "0.3");
      else res.end();
    }
    return true;
  };
}
