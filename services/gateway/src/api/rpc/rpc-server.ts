import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { bearerToken, HermesError, type KeyRing, type Logger, type UpgradeHandler } from "@hermes/common";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import type { TailSubscription } from "../../app/rooms/live-tail.js";
import {
  errorObject,
  INVALID_REQUEST,
  isRequestShape,
  type JsonRpcResponse,
  MAX_BATCH,
  METHOD_NOT_FOUND,
  methodError,
  PARSE_ERROR,
  readableId,
} from "./json-rpc.js";
import type { RoomMethod, RpcPeer } from "./room-methods.js";

/** A frame above this is refused by closing the connection (1009); a room payload is at most 256 KiB. */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;
/** Socket buffer above which a sender waits for 'drain' (live tail backpressure). */
const HIGH_WATER_BYTES = 1024 * 1024;
/** Requests of one connection being answered at once; more wait (a client pipelining thousands of sends is fine). */
const MAX_PENDING_PER_CONNECTION = 50_000;

export interface RpcServerOptions {
  path?: string;
  keys: KeyRing;
  methods: Record<string, RoomMethod>;
  logger: Logger;
}

export interface RpcServer {
  upgrade: UpgradeHandler;
  /** Closes every connection (gateway shutdown). */
  close(): void;
  readonly connections: number;
}

/**
 * JSON-RPC 2.0 over WebSocket at /rpc on the HTTP port (§3.2, §7). The key travels in the HTTP
 * upgrade (`Authorization: Bearer <key>`); a missing or wrong key is answered 401 before any
 * WebSocket exists. Every frame is untrusted: malformed JSON, wrong shapes, unknown methods and
 * thrown errors all become typed JSON-RPC errors with `data.reason`; nothing a client sends can
 * throw out of the handler.
 */
export function createRpcServer(options: RpcServerOptions): RpcServer {
  const path = options.path ?? "/rpc";
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });
  const sockets = new Set<WebSocket>();

  const upgrade: UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = (req.url ?? "/").split("?")[0];
    if (url !== path) return false;
    if (!options.keys.accepts(bearerToken(req.headers.authorization))) {
      socket.end(
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nmissing or wrong API key: send `Authorization: Bearer <key>` in the WebSocket upgrade\n",
      );
      return true;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
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

function serveConnection(ws: WebSocket, options: RpcServerOptions): void {
  const subscriptions = new Map<string, TailSubscription>();
  let pending = 0;
  const peer: RpcPeer = {
    subscriptions,
    notify(method, params) {
      if (ws.readyState !== WebSocket.OPEN) return true;
      ws.send(JSON.stringify({ jsonrpc: "2.0", method, params }));
      return ws.bufferedAmount < HIGH_WATER_BYTES;
    },
    drained() {
      return new Promise<void>((resolve) => {
        const check = () => {
          if (ws.readyState !== WebSocket.OPEN || ws.bufferedAmount < HIGH_WATER_BYTES) resolve();
          else setTimeout(check, 5);
        };
        check();
      });
    },
  };
  const send = (response: JsonRpcResponse | JsonRpcResponse[]) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(response));
  };

  const call = async (request: unknown): Promise<JsonRpcResponse | null> => {
    if (!isRequestShape(request)) {
      return {
        jsonrpc: "2.0",
        id: readableId(request),
        error: errorObject(
          INVALID_REQUEST,
          new HermesError("invalid_params", 'not a JSON-RPC 2.0 request: send {"jsonrpc":"2.0","id":1,"method":"groups.…","params":{…}}'),
        ),
      };
    }
    const isNotification = !("id" in request);
    const id = request.id ?? null;
    const method = Object.hasOwn(options.methods, request.method) ? options.methods[request.method] : undefined;
    if (method === undefined) {
      if (isNotification) return null;
      return {
        jsonrpc: "2.0",
        id,
        error: errorObject(
          METHOD_NOT_FOUND,
          new HermesError(
            "method_not_found",
            `unknown method ${JSON.stringify(request.method).slice(0, 200)}; groups.capabilities lists the methods`,
          ),
        ),
      };
    }
    try {
      const result = await method(request.params, peer);
      return isNotification ? null : { jsonrpc: "2.0", id, result };
    } catch (err) {
      return isNotification ? null : { jsonrpc: "2.0", id, error: methodError(request.method, err) };
    }
  };

  ws.on("message", (data: RawData, isBinary: boolean) => {
    let parsed: unknown;
    try {
      const text = isBinary || !Buffer.isBuffer(data) ? Buffer.from(data as Buffer).toString("utf8") : data.toString("utf8");
      parsed = JSON.parse(text);
    } catch {
      send({ jsonrpc: "2.0", id: null, error: errorObject(PARSE_ERROR, new HermesError("invalid_params", "the frame is not valid JSON")) });
      return;
    }
    if (pending >= MAX_PENDING_PER_CONNECTION) {
      send({
        jsonrpc: "2.0",
        id: readableId(parsed),
        error: errorObject(
          -32000,
          new HermesError(
            "limit_exceeded",
            `more than ${MAX_PENDING_PER_CONNECTION} requests are waiting on this connection; wait for answers`,
          ),
        ),
      });
      return;
    }
    if (Array.isArray(parsed)) {
      if (parsed.length === 0 || parsed.length > MAX_BATCH) {
        send({
          jsonrpc: "2.0",
          id: null,
          error: errorObject(INVALID_REQUEST, new HermesError("invalid_params", `a batch holds 1..${MAX_BATCH} requests`)),
        });
        return;
      }
      pending += parsed.length;
      Promise.all(parsed.map(call))
        .then((answers) => {
          const responses = answers.filter((a): a is JsonRpcResponse => a !== null);
          if (responses.length > 0) send(responses);
        })
        .catch((err: unknown) => options.logger.error({ err }, "JSON-RPC batch failed"))
        .finally(() => {
          pending -= parsed.length;
        });
      return;
    }
    pending++;
    call(parsed)
      .then((answer) => {
        if (answer) send(answer);
      })
      .catch((err: unknown) => options.logger.error({ err }, "JSON-RPC call failed"))
      .finally(() => {
        pending--;
      });
  });
  ws.on("error", () => ws.terminate());
  ws.on("close", () => {
    for (const sub of subscriptions.values()) sub.close();
    subscriptions.clear();
  });
}
