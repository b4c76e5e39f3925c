import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger, UpgradeHandler } from "@hermes/common";
import { WebSocket, WebSocketServer } from "ws";
import type { RpcMethod } from "../../rooms/api/room-methods.js";
import { MAX_FRAME_BYTES, serveConnection } from "./rpc-connection.js";

export { MAX_FRAME_BYTES } from "./rpc-connection.js";

export interface RpcServerOptions {
  path?: string;
  /**
   * Who may open a socket: the console's admission rules (Origin, the Bearer key, the console
   * session cookie; `ConsoleGate.check` with mutating = true).
   */
  admit(req: IncomingMessage): { admit: true } | { admit: false; status: 401 | 403; why: string };
  methods: Record<string, RpcMethod>;
  logger: Logger;
  /** WebSocket connections served at once (`http.max_rpc_connections`). */
  maxConnections: number;
}

export interface RpcServer {
  upgrade: UpgradeHandler;
  /** Closes every connection (gateway shutdown). */
  close(): void;
  readonly connections: number;
}

/** Why the gateway closes a connection whose frame breaks a rule (ws sends the bare status code). */
const CLOSE_REASONS: Readonly<Record<number, string>> = {
  1009: `a frame is at most ${MAX_FRAME_BYTES} bytes`,
};

/** The ws socket, closing with a reason where ws would send only the code. */
class RpcSocket extends WebSocket {
  override close(code?: number, data?: string | Buffer): void {
    super.close(code, data ?? (code === undefined ? undefined : CLOSE_REASONS[code]));
  }
}

function refuse(socket: Duplex, status: string, body: string): void {
  socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n\r\n${body}\n`);
}

/**
 * JSON-RPC 2.0 over WebSocket at /rpc on the HTTP port. The upgrade is refused before
 * any WebSocket exists: 403 for a browser page of another origin (or a cookie without Origin),
 * 401 without the right key (`Authorization: Bearer <key>`) or a live console session, 503 when
 * `maxConnections` are open. Every frame
 * is untrusted: malformed JSON, wrong shapes, unknown methods and thrown errors all become typed
 * JSON-RPC errors with `data.reason`; nothing a client sends can throw out of the handler.
 */
export function createRpcServer(options: RpcServerOptions): RpcServer {
  const path = options.path ?? "/rpc";
  const maxConnections = options.maxConnections;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, WebSocket: RpcSocket });
  const sockets = new Set<WebSocket>();
  /** Upgrades accepted whose handshake has not completed yet: they count against the cap. */
  let upgrading = 0;

  const upgrade: UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = (req.url ?? "/").split("?")[0];
    if (url !== path) return false;
    const answer = options.admit(req);
    if (!answer.admit && answer.status === 403) {
      options.logger.warn(
        { origin: req.headers.origin, remote: req.socket.remoteAddress, why: answer.why },
        "refused a WebSocket upgrade from another origin",
      );
      refuse(
        socket,
        "403 Forbidden",
        req.headers.origin === undefined
          ? answer.why
          : `origin ${JSON.stringify(req.headers.origin)} may not use this gateway: list it in http.allowed_origins (or HERMES_HTTP_ALLOWED_ORIGINS)`,
      );
      return true;
    }
    if (!answer.admit) {
      refuse(
        socket,
        "401 Unauthorized",
        `${answer.why}: send \`Authorization: Bearer <key>\` in the WebSocket upgrade, or log in to the console`,
      );
      return true;
    }
    if (sockets.size + upgrading >= maxConnections) {
      refuse(
        socket,
        "503 Service Unavailable",
        `this gateway already serves ${maxConnections} WebSocket connections (http.max_rpc_connections); try again later`,
      );
      return true;
    }
    upgrading++;
    let handshaking = true;
    const handshakeOver = () => {
      if (handshaking) upgrading--;
      handshaking = false;
    };
    socket.once("close", handshakeOver);
    wss.handleUpgrade(req, socket, head, (ws) => {
      handshakeOver();
      sockets.add(ws);
      serveConnection(ws, options);
      ws.once("close", () => sockets.delete(ws));
    });
    return true;
  };

  return {
    upgrade,
    close() {
      for (const ws of sockets) ws.close(1001, "gateway shutting down");
      wss.close();
    },
    get connections() {
      return sockets.size;
    },
  };
}
