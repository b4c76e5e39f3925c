import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Registry } from "prom-client";
import { formatHostPort, type HostPort, isLoopbackAddress } from "./net.js";

export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => boolean;

export interface HttpOptions {
  listen: HostPort;
  registry: Registry;
  /** /readyz answers 200 only while this returns true. */
  ready: () => boolean;
  /** /metrics is open only on loopback unless this is set. */
  metricsPublic?: boolean;
  routes?: RouteHandler[];
  upgrades?: UpgradeHandler[];
}

export interface HttpServer {
  server: Server;
  address: HostPort;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: string, type = "text/plain; charset=utf-8"): void {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
  res.end(body);
}

/** The operational HTTP port: /livez, /readyz, /metrics, plus the routes and upgrades a daemon adds. */
export function startHttpServer(options: HttpOptions): Promise<HttpServer> {
  const server = createServer(async (req, res) => {
    try {
      const path = (req.url ?? "/").split("?")[0];
      if (req.method === "GET" && path === "/livez") return send(res, 200, "ok\n");
      if (req.method === "GET" && path === "/readyz") return options.ready() ? send(res, 200, "ready\n") : send(res, 503, "not ready\n");
      if (req.method === "GET" && path === "/metrics") {
        if (!options.metricsPublic && !isLoopbackAddress(req.socket.remoteAddress ?? "")) {
          return send(res, 403, "metrics are served on loopback only; set metrics_public: true to expose them\n");
        }
        return send(res, 200, await options.registry.metrics(), options.registry.contentType);
      }
      for (const route of options.routes ?? []) if (await route(req, res)) return;
      send(res, 404, "not found\n");
    } catch (err) {
      if (!res.headersSent) send(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}\n`);
      else res.destroy();
    }
  });
  server.on("upgrade", (req, socket, head) => {
    for (const upgrade of options.upgrades ?? []) if (upgrade(req, socket, head)) return;
    socket.end("HTTP/1.1 404 Not Found\r\n\r\n");
  });
  server.on("clientError", (_err, socket) => socket.destroy());
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.listen.port, options.listen.host, () => {
      server.off("error", reject);
      const addr = server.address();
      const port = typeof addr === "object" && addr ? addr.port : options.listen.port;
      resolve({
        server,
        address: { host: options.listen.host, port },
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/**
 * The browser origin check of a WebSocket upgrade: any web page can open a WebSocket to a loopback
 * daemon, and the browser names the page in `Origin`. Without `Origin` the client is not a browser
 * (the CLI, scripts) and is let through. Otherwise the origin must be the daemon's own,
 * `http://<address>:<port>` of the address the connection came in on (on loopback also
 * `localhost`, `127.0.0.1` and `[::1]`), or one of `allowed` (canonical origins).
 *
 * The Host header does not make an origin the daemon's own: under DNS rebinding a hostile page
 * reaches 127.0.0.1 with its own name in both Host and Origin. A daemon served under a DNS name or
 * behind a TLS proxy lists that origin.
 */
export function originAllowed(req: IncomingMessage, allowed: readonly string[]): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  if (allowed.includes(origin)) return true;
  const { localAddress, localPort } = req.socket;
  if (localAddress === undefined || localPort === undefined) return false;
  const address = localAddress.replace(/^::ffff:/, "");
  const own = [formatHostPort({ host: address, port: localPort })];
  if (isLoopbackAddress(address)) own.push(`localhost:${localPort}`, `127.0.0.1:${localPort}`, `[::1]:${localPort}`);
  return own.some((hostPort) => origin === `http://${hostPort}`);
}

/**
 * The canonical form of an origin from configuration (`scheme://host[:port]`, lower case, default
 * port dropped, as browsers send it), or undefined when `value` is not one (a path, a query,
 * credentials, another scheme).
 */
export function canonicalOrigin(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  if (url.username || url.password || url.search || url.hash || url.pathname !== "/") return undefined;
  return url.origin;
}
