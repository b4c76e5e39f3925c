import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import type { AddressInfo } from "node:net";
import { eventually } from "./eventually.js";

/**
 * A fake Telegram Bot API server for tests: real HTTP on 127.0.0.1 (a free port), paths
 * `/bot<token>/<method>`, GET and POST with JSON, url-encoded or multipart bodies (what grammY
 * and curl send). It serves getMe, getUpdates (long polls honouring `offset`, `limit` and
 * `timeout`, forgetting updates below the offset like Telegram, and 409 when two polls of one token
 * overlap), sendMessage (recorded, with the real 4,096-character and empty-text 400s), sendChatAction,
 * setMyCommands and deleteWebhook. Failures are injected per method: 429 with retry_after, a 5xx
 * as JSON or as a proxy's HTML page, or a dropped connection. An unknown token gets Telegram's 401.
 */

export interface FakeBot {
  token: string;
  id: number;
  username: string;
  first_name: string;
}

export type FakeTelegramFailure =
  | { kind: "rate_limited"; retry_after: number }
  | { kind: "server_error"; status?: number }
  | { kind: "server_error_html"; status?: number }
  | { kind: "drop" };

export interface SentMessage {
  message_id: number;
  chat_id: number | string;
  text: string;
  message_thread_id?: number;
  parse_mode?: string;
  entities?: unknown[];
}

export interface CallRecord {
  method: string;
  http_method: string;
  params: Record<string, unknown>;
}

export type PollOutcome = "updates" | "empty" | "conflict" | "terminated" | "aborted";

export interface PollRecord {
  id: number;
  offset: number | undefined;
  timeout: number;
  started_at: number;
  ended_at?: number;
  outcome?: PollOutcome;
  /** update_ids answered. */
  delivered: number[];
}

/** A getUpdates that arrived while another one of the same token was being served. */
export interface OverlapRecord {
  active: number;
  newcomer: number;
  /** Who got the 409: the newcomer (default), or the older poll (`conflict: "terminate_old"`, like Telegram does). */
  refused: "newcomer" | "active";
}

export interface FakeTelegramOptions {
  /** Default: one bot, id 100001, username hermes_test_bot. */
  bots?: Partial<FakeBot>[];
  conflict?: "reject_new" | "terminate_old";
}

export interface UserFields {
  id: number;
  first_name: string;
  username?: string;
  is_bot?: boolean;
}

const ALICE: UserFields = { id: 42, first_name: "Alice", username: "alice" };
const TEXT_LIMIT = 4096;
const CONFLICT_DESCRIPTION = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";
const MARKDOWN_V2_SPECIAL = new Set("_*[]()~`>#+-=|{}.!");
const JSON_FIELDS = new Set([
  "entities",
  "allowed_updates",
  "commands",
  "reply_parameters",
  "link_preview_options",
  "reply_markup",
  "scope",
]);
const INTEGER_FIELDS = new Set(["offset", "limit", "timeout", "message_thread_id"]);

interface Entry {
  id: number;
  /** What getUpdates answers (usually with update_id = id; raw entries may be anything). */
  json: unknown;
}

interface ActivePoll {
  record: PollRecord;
  answer: (outcome: PollOutcome) => void;
}

class BotState {
  entries: Entry[] = [];
  nextUpdateId = 500_000;
  nextMessageId = 1;
  sent: SentMessage[] = [];
  calls: CallRecord[] = [];
  polls: PollRecord[] = [];
  overlaps: OverlapRecord[] = [];
  active: ActivePoll | undefined;
  failures = new Map<string, { failure: FakeTelegramFailure; times: number }[]>();
  servedAtOnce = 0;
  maxServedAtOnce = 0;

  constructor(readonly bot: FakeBot) {}

  /** Telegram forgets every update below the offset a getUpdates asks for. */
  confirm(offset: number | undefined): void {
    if (offset === undefined) return;
    if (offset < 0) this.entries = this.entries.slice(offset);
    else this.entries = this.entries.filter((e) => e.id >= offset);
  }

  available(limit: number): Entry[] {
    return this.entries.slice(0, limit);
  }
}

function apiError(res: ServerResponse, status: number, description: string, parameters?: Record<string, unknown>): void {
  respond(res, status, { ok: false, error_code: status, description, ...(parameters ? { parameters } : {}) });
}

function respond(res: ServerResponse, status: number, body: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** Form and query values are text; the Bot API reads numbers and JSON out of them. */
function coerce(key: string, value: unknown): unknown {
  if (typeof value !== "string") return value;
  if (JSON_FIELDS.has(key)) {
    try {
      return JSON.parse(value);
    } catch {
      return value;
    }
  }
  if ((INTEGER_FIELDS.has(key) || key === "chat_id") && /^-?\d+$/.test(value)) return Number(value);
  return value;
}

async function parseParams(req: IncomingMessage, url: URL): Promise<Record<string, unknown>> {
  const params: Record<string, unknown> = {};
  for (const [k, v] of url.searchParams) params[k] = coerce(k, v);
  if (req.method !== "POST") return params;
  const body = await readBody(req);
  if (body.length === 0) return params;
  const type = req.headers["content-type"] ?? "";
  if (type.includes("application/json")) {
    const parsed = JSON.parse(body.toString("utf8")) as unknown;
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) Object.assign(params, parsed);
    return params;
  }
  // url-encoded and multipart alike: the platform's own parser (undici) reads both.
  const form = await new Response(new Uint8Array(body), { headers: { "content-type": type } }).formData();
  for (const [k, v] of form) params[k] = coerce(k, typeof v === "string" ? v : "(file)");
  return params;
}

function intParam(params: Record<string, unknown>, key: string): number | undefined {
  const value = params[key];
  return typeof value === "number" && Number.isInteger(value) ? value : undefined;
}

/** The 400 description the Bot API answers for these sendMessage parameters, if any. */
function sendMessageRefusal(params: Record<string, unknown>): string | undefined {
  const chatId = params["chat_id"];
  const text = params["text"];
  if (chatId === undefined || chatId === "") return "Bad Request: chat_id is empty";
  if (typeof text !== "string" || text.trim().length === 0) return "Bad Request: message text is empty";
  if (text.length > TEXT_LIMIT) return "Bad Request: message is too long";
  if (params["parse_mode"] === "MarkdownV2") {
    const bad = unescapedMarkdownV2(text);
    if (bad) return `Bad Request: can't parse entities: Character '${bad}' is reserved and must be escaped with the preceding '\\'`;
  }
  const entities = params["entities"];
  if (entities === undefined) return undefined;
  if (!Array.isArray(entities)) return "Bad Request: can't parse entities JSON object";
  for (const e of entities as { offset?: unknown; length?: unknown; type?: unknown }[]) {
    const inside =
      typeof e.type === "string" &&
      typeof e.offset === "number" &&
      typeof e.length === "number" &&
      e.offset >= 0 &&
      e.length > 0 &&
      e.offset + e.length <= text.length;
    if (!inside) return "Bad Request: can't parse entities: entity is out of the text";
  }
  return undefined;
}

function unescapedMarkdownV2(text: string): string | undefined {
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === "\\") {
      i += 1;
      continue;
    }
    if (MARKDOWN_V2_SPECIAL.has(ch)) return ch;
  }
  return undefined;
}

export class FakeTelegram {
  private readonly bots = new Map<string, BotState>();
  private readonly conflictPolicy: "reject_new" | "terminate_old";
  private pollIds = 0;
  private nextChatMessageId = 1;

  private constructor(
    private readonly server: Server,
    readonly apiRoot: string,
    options: FakeTelegramOptions,
  ) {
    this.conflictPolicy = options.conflict ?? "reject_new";
    for (const bot of options.bots ?? [{}]) this.addBot(bot);
  }

  static async start(options: FakeTelegramOptions = {}): Promise<FakeTelegram> {
    let fake: FakeTelegram | undefined;
    const server = createServer((req, res) => {
      fake!.serve(req, res).catch((err: unknown) => apiError(res, 500, `Internal Server Error: ${String(err)}`));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    fake = new FakeTelegram(server, `http://127.0.0.1:${port}`, options);
    return fake;
  }

  /** Adds a bot; its token has the shape BotFather gives. */
  addBot(bot: Partial<FakeBot> = {}): FakeBot {
    const id = bot.id ?? 100_001 + this.bots.size;
    const full: FakeBot = {
      id,
      token: bot.token ?? `${id}:AAFakeTokenForTests${String(id).padStart(16, "0")}`,
      username: bot.username ?? (this.bots.size === 0 ? "hermes_test_bot" : `hermes_test_bot_${this.bots.size + 1}`),
      first_name: bot.first_name ?? "Hermes",
    };
    this.bots.set(full.token, new BotState(full));
    return full;
  }

  /** The first bot (most tests have one). */
  get bot(): FakeBot {
    return this.bots.values().next().value!.bot;
  }

  private state(token?: string): BotState {
    const state = this.bots.get(token ?? this.bot.token);
    if (!state) throw new Error("no such fake bot");
    return state;
  }

  // ---- updates -------------------------------------------------------------------------------

  /** Queues an update; `update_id` is assigned. Returns it. */
  enqueue(update: Record<string, unknown>, token?: string): number {
    const state = this.state(token);
    const id = state.nextUpdateId++;
    state.entries.push({ id, json: { update_id: id, ...update } });
    this.wake(state);
    return id;
  }

  /** Queues any JSON as an update, as-is (bad-input tests). It is forgotten like an update with the next id. */
  enqueueRaw(json: unknown, token?: string): number {
    const state = this.state(token);
    const id = state.nextUpdateId++;
    state.entries.push({ id, json });
    this.wake(state);
    return id;
  }

  privateMessage(text: string, options: { from?: UserFields; token?: string; extra?: Record<string, unknown> } = {}): number {
    const from = options.from ?? ALICE;
    return this.enqueue(
      {
        message: {
          message_id: this.nextChatMessageId++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: from.id, type: "private", first_name: from.first_name, ...(from.username ? { username: from.username } : {}) },
          from: { is_bot: false, ...from },
          text,
          ...options.extra,
        },
      },
      options.token,
    );
  }

  groupMessage(text: string, options: { chat_id: number; type?: "group" | "supergroup"; from?: UserFields; token?: string }): number {
    return this.enqueue(
      {
        message: {
          message_id: this.nextChatMessageId++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: options.chat_id, type: options.type ?? "group", title: "Test group" },
          from: { is_bot: false, ...(options.from ?? ALICE) },
          text,
        },
      },
      options.token,
    );
  }

  topicMessage(text: string, options: { chat_id: number; topic_id: number; from?: UserFields; token?: string }): number {
    return this.enqueue(
      {
        message: {
          message_id: this.nextChatMessageId++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: options.chat_id, type: "supergroup", title: "Test forum", is_forum: true },
          from: { is_bot: false, ...(options.from ?? ALICE) },
          message_thread_id: options.topic_id,
          is_topic_message: true,
          text,
        },
      },
      options.token,
    );
  }

  /** update_ids Telegram still holds (not yet confirmed by an offset). */
  pending(token?: string): number[] {
    return this.state(token).entries.map((e) => e.id);
  }

  // ---- inspection ----------------------------------------------------------------------------

  sent(token?: string): SentMessage[] {
    return [...this.state(token).sent];
  }

  calls(method?: string, token?: string): CallRecord[] {
    return this.state(token).calls.filter((c) => method === undefined || c.method === method);
  }

  polls(token?: string): PollRecord[] {
    return [...this.state(token).polls];
  }

  overlaps(token?: string): OverlapRecord[] {
    return [...this.state(token).overlaps];
  }

  /** Most getUpdates of one token ever served at the same time (1 when pollers behave). */
  maxConcurrentPolls(token?: string): number {
    return this.state(token).maxServedAtOnce;
  }

  /** Waits until at least `count` messages were sent; returns them all. */
  waitForSent(count: number, token?: string, timeoutMs = 10_000): Promise<SentMessage[]> {
    return eventually(() => this.state(token).sent.length >= count && this.sent(token), { timeoutMs, what: `${count} sent message(s)` });
  }

  // ---- failure injection ---------------------------------------------------------------------

  /** The next `times` calls of `method` fail this way (before anything else happens, so a failed getUpdates confirms nothing). */
  failNext(method: string, times: number, failure: FakeTelegramFailure, token?: string): void {
    const state = this.state(token);
    const list = state.failures.get(method.toLowerCase()) ?? [];
    list.push({ failure, times });
    state.failures.set(method.toLowerCase(), list);
  }

  clearFailures(token?: string): void {
    this.state(token).failures.clear();
  }

  async close(): Promise<void> {
    for (const state of this.bots.values()) state.active?.answer("aborted");
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  // ---- serving -------------------------------------------------------------------------------

  private wake(state: BotState): void {
    if (state.active && state.entries.length > 0) state.active.answer("updates");
  }

  private takeFailure(state: BotState, method: string): FakeTelegramFailure | undefined {
    const list = state.failures.get(method);
    const head = list?.[0];
    if (!list || !head) return undefined;
    head.times -= 1;
    if (head.times <= 0) list.shift();
    return head.failure;
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    if (!match) return apiError(res, 404, "Not Found");
    const [, token, methodName] = match as unknown as [string, string, string];
    const state = this.bots.get(decodeURIComponent(token));
    if (!state) return apiError(res, 401, "Unauthorized");
    const method = methodName.toLowerCase();
    let params: Record<string, unknown>;
    try {
      params = await parseParams(req, url);
    } catch {
      return apiError(res, 400, "Bad Request: can't parse request body");
    }
    state.calls.push({ method: methodName, http_method: req.method ?? "GET", params });
    const failure = this.takeFailure(state, method);
    if (failure) return this.fail(req, res, failure);
    switch (method) {
      case "getme":
        return respond(res, 200, {
          ok: true,
          result: { id: state.bot.id, is_bot: true, first_name: state.bot.first_name, username: state.bot.username },
        });
      case "deletewebhook":
      case "setmycommands":
        return respond(res, 200, { ok: true, result: true });
      case "sendchataction":
        if (params["chat_id"] === undefined) return apiError(res, 400, "Bad Request: chat_id is empty");
        return respond(res, 200, { ok: true, result: true });
      case "sendmessage":
        return this.sendMessage(state, params, res);
      case "getupdates":
        return this.getUpdates(state, params, res);
      default:
        return apiError(res, 404, "Not Found");
    }
  }

  private fail(req: IncomingMessage, res: ServerResponse, failure: FakeTelegramFailure): void {
    switch (failure.kind) {
      case "rate_limited":
        apiError(res, 429, `Too Many Requests: retry after ${failure.retry_after}`, { retry_after: failure.retry_after });
        return;
      case "server_error":
        apiError(res, failure.status ?? 502, STATUS_CODES[failure.status ?? 502] ?? "Server Error");
        return;
      case "server_error_html": {
        const status = failure.status ?? 502;
        res.writeHead(status, { "content-type": "text/html" });
        res.end(`<html><head><title>${status} ${STATUS_CODES[status] ?? ""}</title></head><body><center>nginx</center></body></html>`);
        return;
      }
      case "drop":
        req.socket.destroy();
        return;
    }
  }

  private sendMessage(state: BotState, params: Record<string, unknown>, res: ServerResponse): void {
    const refusal = sendMessageRefusal(params);
    if (refusal) {
      apiError(res, 400, refusal);
      return;
    }
    const chatId = params["chat_id"];
    const text = params["text"] as string;
    const parseMode = typeof params["parse_mode"] === "string" ? params["parse_mode"] : undefined;
    const entities = params["entities"];
    const threadId = intParam(params, "message_thread_id");
    const message: SentMessage = {
      message_id: state.nextMessageId++,
      chat_id: chatId as number | string,
      text,
      ...(threadId !== undefined ? { message_thread_id: threadId } : {}),
      ...(parseMode ? { parse_mode: parseMode } : {}),
      ...(Array.isArray(entities) ? { entities } : {}),
    };
    state.sent.push(message);
    respond(res, 200, {
      ok: true,
      result: {
        message_id: message.message_id,
        date: Math.floor(Date.now() / 1000),
        chat: { id: chatId, type: typeof chatId === "number" && chatId < 0 ? "supergroup" : "private" },
        text,
        ...(threadId !== undefined ? { message_thread_id: threadId, is_topic_message: true } : {}),
      },
    });
  }

  private getUpdates(state: BotState, params: Record<string, unknown>, res: ServerResponse): void {
    const offset = intParam(params, "offset");
    const limit = Math.min(100, Math.max(1, intParam(params, "limit") ?? 100));
    const timeout = Math.max(0, intParam(params, "timeout") ?? 0);
    const record: PollRecord = { id: ++this.pollIds, offset, timeout, started_at: Date.now(), delivered: [] };
    state.polls.push(record);

    if (state.active) {
      const refused = this.conflictPolicy === "reject_new" ? "newcomer" : "active";
      state.overlaps.push({ active: state.active.record.id, newcomer: record.id, refused });
      if (refused === "newcomer") {
        record.outcome = "conflict";
        record.ended_at = Date.now();
        apiError(res, 409, CONFLICT_DESCRIPTION);
        return;
      }
      state.active.answer("terminated");
    }

    state.confirm(offset);
    let timer: NodeJS.Timeout | undefined;
    const answer = (outcome: PollOutcome) => {
      if (record.outcome) return;
      record.outcome = outcome;
      record.ended_at = Date.now();
      clearTimeout(timer);
      if (state.active?.record === record) state.active = undefined;
      state.servedAtOnce -= 1;
      if (outcome === "terminated") {
        apiError(res, 409, CONFLICT_DESCRIPTION);
      } else if (outcome !== "aborted") {
        const batch = state.available(limit);
        record.delivered = batch.map((e) => e.id);
        if (batch.length > 0) record.outcome = "updates";
        respond(res, 200, { ok: true, result: batch.map((e) => e.json) });
      }
    };
    state.active = { record, answer };
    state.servedAtOnce += 1;
    state.maxServedAtOnce = Math.max(state.maxServedAtOnce, state.servedAtOnce);
    res.on("close", () => {
      if (!res.writableEnded) answer("aborted");
    });
    if (state.entries.length > 0 || timeout === 0) answer(state.entries.length > 0 ? "updates" : "empty");
    else timer = setTimeout(() => answer("empty"), timeout * 1000);
  }
}
