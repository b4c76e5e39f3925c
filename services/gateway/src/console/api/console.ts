import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, relative, sep } from "node:path";
import { bearerToken, type KeyRing, type Logger, originAllowed, type RouteHandler, toHermesError } from "@hermes/common";
import { Counter, type Registry } from "prom-client";
import { readBody } from "../../api/http/read-body.js";
import { type Admission, decideAdmission } from "../core/admission.js";
import type { ConsoleSessions } from "./console-sessions.js";
import { SESSION_LIFETIME_MS } from "./console-sessions.js";

/**
 * The web console on the HTTP port: the built single-page app (`@hermes/console`) at `/` and
 * `/assets/…`, the login form at `/login`, `POST /login` (the API key or a one-time login link's
 * token → an HttpOnly, SameSite=Strict session cookie), `POST /logout`. Every page but the login
 * form needs the cookie or the Bearer key; the data comes over the /rpc socket, admitted by the
 * same rules (`decideAdmission`).
 */

/** A login form is a few fields; anything bigger is refused unread (413). */
export const MAX_LOGIN_BODY_BYTES = 16 * 1024;

/** Every console response: no framing, no sniffing, no referrer, scripts and styles from the gateway only. */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  // Not no-referrer: with it a browser sends `Origin: null` on the login form's POST, which the origin check must refuse.
  "referrer-policy": "same-origin",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
};

interface Asset {
  body: Buffer;
  type: string;
}

/** The built console: `index.html` and every file under `assets/`, read once at start. Undefined when it was not built. */
export function loadConsoleAssets(dist: string): Map<string, Asset> | undefined {
  const index = join(dist, "index.html");
  if (!existsSync(index)) return undefined;
  const assets = new Map<string, Asset>([["/", { body: readFileSync(index), type: CONTENT_TYPES[".html"]! }]]);
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else
        assets.set(`/${relative(dist, path).split(sep).join("/")}`, {
          body: readFileSync(path),
          type: CONTENT_TYPES[extname(name)] ?? "application/octet-stream",
        });
    }
  };
  if (existsSync(join(dist, "assets"))) walk(join(dist, "assets"));
  return assets;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Cookie values of `name` in a Cookie header (a browser may send several). */
function cookieValues(header: string | undefined, name: string): string[] {
  if (!header) return [];
  return header
    .split(";")
    .map((part) => part.trim())
    .filter((part) => part.startsWith(`${name}=`))
    .map((part) => part.slice(name.length + 1));
}

/** The cookie's name on this gateway: several gateways on one host (ports do not separate cookies) keep theirs apart. */
export function sessionCookieName(gatewayId: string): string {
  return `hermes_console_${gatewayId.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

export interface ConsoleGateDeps {
  gatewayId: string;
  keys: KeyRing;
  sessions: ConsoleSessions;
  /** Browser origins allowed besides the gateway's own (`http.allowed_origins`, canonical). */
  allowedOrigins: readonly string[];
}

/** What the admission rules saw, and the session token when a live one was presented. */
export type GateAnswer = Admission & { session?: string };

/** The admission rules of the console and /rpc, applied to an HTTP request. */
export class ConsoleGate {
  readonly cookieName: string;

  constructor(private readonly deps: ConsoleGateDeps) {
    this.cookieName = sessionCookieName(deps.gatewayId);
  }

  get keyRequired(): boolean {
    return this.deps.keys.required;
  }

  /** The request's live session token, if it presents one. */
  liveSession(req: IncomingMessage): string | undefined {
    return cookieValues(req.headers.cookie, this.cookieName).find((t) => this.deps.sessions.isLive(t));
  }

  check(req: IncomingMessage, mutating: boolean): GateAnswer {
    const presented = cookieValues(req.headers.cookie, this.cookieName);
    const live = presented.find((t) => this.deps.sessions.isLive(t));
    const key = bearerToken(req.headers.authorization);
    const answer = decideAdmission({
      mutating,
      origin: req.headers.origin === undefined ? "none" : originAllowed(req, this.deps.allowedOrigins) ? "allowed" : "foreign",
      keyRequired: this.deps.keys.required,
      bearer: key === undefined ? "none" : this.deps.keys.required && !this.deps.keys.accepts(key) ? "invalid" : "valid",
      session: live ? "valid" : presented.length > 0 ? "invalid" : "none",
    });
    return live ? { ...answer, session: live } : answer;
  }

  /** Whether the request comes from a page of an allowed origin (and says so). */
  originPresentAndAllowed(req: IncomingMessage): boolean {
    return req.headers.origin !== undefined && originAllowed(req, this.deps.allowedOrigins);
  }

  setCookie(req: IncomingMessage, token: string): string {
    // Secure when the browser reached the gateway over https (through a TLS proxy: its Origin says so).
    const secure = req.headers.origin?.startsWith("https://") ? "; Secure" : "";
    return `${this.cookieName}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${Math.floor(SESSION_LIFETIME_MS / 1000)}${secure}`;
  }

  clearCookie(): string {
    return `${this.cookieName}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`;
  }
}

export interface ConsoleRoutesDeps {
  gatewayId: string;
  gate: ConsoleGate;
  sessions: ConsoleSessions;
  keys: KeyRing;
  /** The built console; undefined when it was not built (the pages then say how to build it). */
  assets: Map<string, Asset> | undefined;
  logger: Logger;
  registry?: Registry | undefined;
}

function send(res: ServerResponse, status: number, body: string | Buffer, type: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, "content-type": type, "cache-control": "no-store", ...headers });
  res.end(body);
}

function redirect(res: ServerResponse, location: string, headers: Record<string, string> = {}): void {
  res.writeHead(303, { ...SECURITY_HEADERS, location, "cache-control": "no-store", ...headers });
  res.end();
}

const LOGIN_CSS = `
:root { color-scheme: light dark; font-family: system-ui, sans-serif; }
body { margin: 0; min-height: 100vh; display: grid; place-items: center; background: Canvas; color: CanvasText; }
main { width: min(26rem, calc(100vw - 2rem)); }
h1 { font-size: 1.4rem; }
label { display: block; margin: 1rem 0 0.3rem; font-weight: 600; }
input { width: 100%; box-sizing: border-box; padding: 0.6rem; font-size: 1rem; }
button { margin-top: 1rem; padding: 0.6rem 1.2rem; font-size: 1rem; cursor: pointer; border: 0; border-radius: 6px; background: #1d4ed8; color: #fff; }
:focus-visible { outline: 3px solid #2563eb; outline-offset: 2px; }
.error { color: #b91c1c; font-weight: 600; }
.hint { color: GrayText; font-size: 0.9rem; }
`;

function loginPage(gatewayId: string, options: { error?: string; token?: string }): string {
  const id = escapeHtml(gatewayId);
  const fields = options.token
    ? `<input type="hidden" name="token" value="${escapeHtml(options.token)}">
      <p>A one-time login link for this gateway. It works once, for a few minutes.</p>`
    : `<label for="key">API key</label>
      <input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
      <p class="hint">The gateway's API_SERVER_KEY (or gateway.api_key), or open the one-time link that <code>hermes up</code> or <code>hermes console link</code> prints.</p>`;
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Hermes console: log in to ${id}</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/login.css"></head>
<body><main>
  <h1>Hermes console · ${id}</h1>
  ${options.error ? `<p class="error" role="alert">${escapeHtml(options.error)}</p>` : ""}
  <form method="post" action="/login">
      ${fields}
    <button type="submit">Log in</button>
  </form>
</main></body></html>`;
}

/** The console's HTTP routes (the /rpc socket is admitted by the same gate in the RPC server). */
export function consoleRoutes(deps: ConsoleRoutesDeps): RouteHandler {
  const { gate, sessions, logger } = deps;
  const logins = new Counter({
    name: "hermes_console_logins_total",
    help: "Console login attempts by outcome (ok, wrong_key, bad_link, refused)",
    labelNames: ["outcome"] as const,
    registers: deps.registry ? [deps.registry] : [],
  });

  const refuse = (res: ServerResponse, answer: Extract<Admission, { admit: false }>) =>
    send(
      res,
      answer.status,
      `${answer.why}\n`,
      "text/plain; charset=utf-8",
      answer.clearCookie ? { "set-cookie": gate.clearCookie() } : {},
    );

  const notBuilt = (res: ServerResponse) =>
    send(res, 503, "the console was not built: run npm run build (it builds services/console)\n", "text/plain; charset=utf-8");

  async function login(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!gate.originPresentAndAllowed(req)) {
      logins.inc({ outcome: "refused" });
      logger.warn({ origin: req.headers.origin, remote: req.socket.remoteAddress }, "refused a console login without an allowed Origin");
      send(res, 403, "a login must come from the console's own page (Origin missing or not allowed)\n", "text/plain; charset=utf-8");
      return;
    }
    if (!gate.keyRequired) return redirect(res, "/");
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/x-www-form-urlencoded") {
      send(res, 415, "send the login form (application/x-www-form-urlencoded)\n", "text/plain; charset=utf-8");
      return;
    }
    let form: URLSearchParams;
    try {
      form = new URLSearchParams(await readBody(req, MAX_LOGIN_BODY_BYTES));
    } catch (err) {
      const e = toHermesError(err);
      if (e.reason !== "payload_too_large") throw err;
      logins.inc({ outcome: "refused" });
      send(res, 413, `${e.message}\n`, "text/plain; charset=utf-8", { connection: "close" });
      return;
    }
    const key = form.get("key");
    const token = form.get("token");
    const ok = token !== null ? sessions.redeemLoginLink(token) : key !== null && deps.keys.accepts(key);
    if (!ok) {
      const outcome = token !== null ? "bad_link" : "wrong_key";
      logins.inc({ outcome });
      logger.warn({ remote: req.socket.remoteAddress, outcome }, "console login refused");
      const error =
        token !== null ? "This login link was used already or has expired: log in with the key, or print a new link." : "Wrong key.";
      send(res, 401, loginPage(deps.gatewayId, { error }), CONTENT_TYPES[".html"]!);
      return;
    }
    const session = sessions.open();
    logins.inc({ outcome: "ok" });
    logger.info({ remote: req.socket.remoteAddress, expires_at: session.expires_at }, "console login");
    redirect(res, "/", { "set-cookie": gate.setCookie(req, session.token) });
  }

  return async (req, res) => {
    const url = new URL(req.url ?? "/", "http://gateway");
    const path = url.pathname;
    const isAsset = path.startsWith("/assets/");
    if (path !== "/" && path !== "/index.html" && path !== "/login" && path !== "/login.css" && path !== "/logout" && !isAsset)
      return false;

    if (path === "/login.css" && req.method === "GET") {
      send(res, 200, LOGIN_CSS, CONTENT_TYPES[".css"]!, { "cache-control": "public, max-age=3600" });
      return true;
    }
    if (path === "/login" && req.method === "GET") {
      if (!gate.keyRequired || gate.liveSession(req)) redirect(res, "/");
      else send(res, 200, loginPage(deps.gatewayId, { token: url.searchParams.get("token") ?? undefined }), CONTENT_TYPES[".html"]!);
      return true;
    }
    if (path === "/login" && req.method === "POST") {
      await login(req, res);
      return true;
    }
    if (path === "/logout" && req.method === "POST") {
      const answer = gate.check(req, true);
      if (!answer.admit) {
        refuse(res, answer);
        return true;
      }
      if (answer.session) sessions.close(answer.session);
      redirect(res, "/login", { "set-cookie": gate.clearCookie() });
      return true;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      send(res, 405, "method not allowed\n", "text/plain; charset=utf-8", { allow: "GET" });
      return true;
    }
    const answer = gate.check(req, false);
    if (!answer.admit) {
      // A person opening the console is sent to the login form; a script or an asset gets the status.
      if (!isAsset && answer.status === 401) redirect(res, "/login", answer.clearCookie ? { "set-cookie": gate.clearCookie() } : {});
      else refuse(res, answer);
      return true;
    }
    if (!deps.assets) {
      notBuilt(res);
      return true;
    }
    const asset = deps.assets.get(path === "/index.html" ? "/" : path);
    if (!asset) {
      send(res, 404, "not found\n", "text/plain; charset=utf-8");
      return true;
    }
    // Built assets carry a content hash in their names; the page itself is never cached.
    send(res, 200, asset.body, asset.type, isAsset ? { "cache-control": "private, max-age=31536000, immutable" } : {});
    return true;
  };
}
