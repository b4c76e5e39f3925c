import { HermesError, type Logger } from "@hermes/common";
import { type RawData, WebSocket } from "ws";
import { isPromise } from "../../rooms/api/methods.js";
import type { RpcMethod, RpcPeer } from "../../rooms/api/room-methods.js";
import type { TailSubscription } from "../../rooms/app/live-tail.js";
import {
  BatchAnswer,
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

/** A frame above this is refused by closing the connection (1009); a room payload is at most 256 KiB. */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;
/**
 * Bytes of answers and notifications a connection may have waiting for its client to read. Above
 * it, the connection starts no further request, stops reading frames, and live tails wait.
 */
export const MAX_UNSENT_BYTES = 1024 * 1024;
/** Requests of one connection running at once (waiting for a commit, a pull…); more wait, in order. */
export const MAX_RUNNING_PER_CONNECTION = 64;

export interface RpcConnectionOptions {
  methods: Record<string, RpcMethod>;
  logger: Logger;
}

/** One request of a frame, waiting to start. */
interface QueuedCall {
  request: unknown;
  /** The batch this call belongs to; undefined for a frame holding one request. */
  batch?: BatchAnswer;
  /** In a batch: the bytes this call's answer may take now (BatchAnswer.room). */
  room?: () => number;
  answered(response: JsonRpcResponse | null): void;
}

type Answer = JsonRpcResponse | null;

/**
 * Serves one /rpc WebSocket with bounded memory. Frames are parsed as they arrive and their
 * requests queued; a request starts only while the connection's unsent bytes are under
 * MAX_UNSENT_BYTES and fewer than MAX_RUNNING_PER_CONNECTION requests run, and while requests
 * wait the socket is not read (the client's further frames stay in TCP). A request that answers
 * at once (a log page) has sent its answer before the next one starts, so a client that never
 * reads pins at most about one answer over the limit. A batch runs alone and its answer is built
 * within the frame limit (BatchAnswer).
 */
export function serveConnection(ws: WebSocket, options: RpcConnectionOptions): void {
  const subscriptions = new Map<string, TailSubscription>();
  const queue: QueuedCall[] = [];
  const drainWaiters: (() => void)[] = [];
  let running = 0;
  /** The batch whose requests are running; no other frame starts until it has answered. */
  let runningBatch: BatchAnswer | undefined;

  const open = () => ws.readyState === WebSocket.OPEN;
  const full = () => ws.bufferedAmount >= MAX_UNSENT_BYTES;
  const written = (err?: Error | null) => {
    if (err) {
      // The client is gone (a reset): run nothing more for it, even before ws reports the close.
      queue.length = 0;
      ws.terminate();
    }
    if (!full() || !open()) for (const resolve of drainWaiters.splice(0)) resolve();
    if (!err) pump();
  };
  const sendText = (text: string) => {
    if (open()) ws.send(text, written);
  };
  const send = (response: JsonRpcResponse | JsonRpcResponse[]) => sendText(JSON.stringify(response));

  const peer: RpcPeer = {
    subscriptions,
    notify(method, params) {
      sendText(JSON.stringify({ jsonrpc: "2.0", method, params }));
      return !full();
    },
    drained() {
      return new Promise<void>((resolve) => {
        if (full() && open()) drainWaiters.push(resolve);
        else resolve();
      });
    },
  };

  /** Runs one request; the answer comes back synchronously when the method answers at once. */
  const invoke = (request: unknown, callPeer: RpcPeer): Answer | Promise<Answer> => {
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
    const succeeded = (result: unknown): Answer => (isNotification ? null : { jsonrpc: "2.0", id, result });
    const failed = (err: unknown): Answer => (isNotification ? null : { jsonrpc: "2.0", id, error: methodError(request.method, err) });
    try {
      const result = method(request.params, callPeer);
      return isPromise(result) ? result.then(succeeded, failed) : succeeded(result);
    } catch (err) {
      return failed(err);
    }
  };

  const start = (call: QueuedCall) => {
    running++;
    // A call of a batch is told the room its answer has left, so a read can ask for no more.
    const callPeer = call.room === undefined ? peer : { ...peer, answerBytes: call.room() };
    const answer = invoke(call.request, callPeer);
    if (!isPromise(answer)) {
      running--;
      call.answered(answer);
      return;
    }
    answer
      .then((response) => {
        running--;
        call.answered(response);
        pump();
      })
      .catch((err: unknown) => options.logger.error({ err }, "JSON-RPC call failed"));
  };

  function pump(): void {
    while (queue.length > 0 && running < MAX_RUNNING_PER_CONNECTION && open()) {
      const next = queue[0]!;
      if (next.batch === undefined || next.batch !== runningBatch) {
        // The first request of a frame: only once earlier answers have drained and no batch runs.
        if (runningBatch !== undefined || full()) break;
        runningBatch = next.batch;
      }
      queue.shift();
      start(next);
    }
    if (queue.length > 0) ws.pause();
    else ws.resume();
  }

  const enqueueBatch = (requests: unknown[]) => {
    if (requests.length === 0 || requests.length > MAX_BATCH) {
      send({
        jsonrpc: "2.0",
        id: null,
        error: errorObject(INVALID_REQUEST, new HermesError("invalid_params", `a batch holds 1..${MAX_BATCH} requests`)),
      });
      return;
    }
    const batch = BatchAnswer.plan(requests, MAX_FRAME_BYTES);
    if (batch === null) {
      send({
        jsonrpc: "2.0",
        id: null,
        error: errorObject(
          INVALID_REQUEST,
          new HermesError("payload_too_large", `the ids of this batch alone would not fit in one ${MAX_FRAME_BYTES}-byte answer`, {
            data: { limit: MAX_FRAME_BYTES },
          }),
        ),
      });
      return;
    }
    requests.forEach((request, index) => {
      queue.push({
        request,
        batch,
        room: () => batch.room(index),
        answered: (response) => {
          if (!batch.add(index, response)) return;
          runningBatch = undefined;
          const text = batch.text();
          if (text !== null) sendText(text);
        },
      });
    });
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
    if (Array.isArray(parsed)) enqueueBatch(parsed);
    else
      queue.push({
        request: parsed,
        answered: (response) => {
          if (response) send(response);
        },
      });
    pump();
  });
  ws.on("error", (err) => options.logger.debug({ err }, "WebSocket connection failed"));
  ws.on("close", () => {
    queue.length = 0;
    for (const resolve of drainWaiters.splice(0)) resolve();
    for (const sub of subscriptions.values()) sub.close();
    subscriptions.clear();
  });
}
