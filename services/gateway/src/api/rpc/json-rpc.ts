import { type ErrorReason, HermesError, toHermesError } from "@hermes/common";
import { roomErrorCode } from "../../rooms/api/methods.js";

/**
 * JSON-RPC 2.0 framing (https://www.jsonrpc.org/specification) and the error answers: a refusal
 * of a room method carries that method's code (4110–4119, from the room method table, as
 * upstream numbers them) with `data.reason` and, where a client should redirect,
 * `data.authority`. Every error answer has `data.reason`.
 */

export type JsonRpcId = string | number | null;

export interface JsonRpcRequest {
  jsonrpc: "2.0";
  id?: JsonRpcId;
  method: string;
  params?: unknown;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data: { reason: ErrorReason; [key: string]: unknown };
}

export type JsonRpcResponse =
  | { jsonrpc: "2.0"; id: JsonRpcId; result: unknown }
  | { jsonrpc: "2.0"; id: JsonRpcId; error: JsonRpcErrorObject };

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
/** Implementation-defined server error, for methods without a room code. */
export const SERVER_ERROR = -32000;

/** Largest batch (array of requests) one frame may carry. */
export const MAX_BATCH = 1000;

export function errorObject(code: number, err: HermesError): JsonRpcErrorObject {
  return { code, message: err.message, data: { ...err.data, reason: err.reason } };
}

/** The error answer for a failed call of `method` (its room code, else the standard code). */
export function methodError(method: string, err: unknown): JsonRpcErrorObject {
  const e = toHermesError(err);
  const roomCode = roomErrorCode(method);
  if (roomCode !== undefined) return errorObject(roomCode, e);
  if (e.reason === "invalid_params") return errorObject(INVALID_PARAMS, e);
  if (e.reason === "method_not_found") return errorObject(METHOD_NOT_FOUND, e);
  return errorObject(SERVER_ERROR, e);
}

export function isRequestShape(value: unknown): value is JsonRpcRequest {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  if (v.jsonrpc !== "2.0" || typeof v.method !== "string") return false;
  if ("id" in v && v.id !== null && typeof v.id !== "string" && !(typeof v.id === "number" && Number.isFinite(v.id))) return false;
  if ("params" in v && v.params !== undefined && (v.params === null || typeof v.params !== "object")) return false;
  return true;
}

/** The id to answer an invalid request with: its own when readable, else null (as JSON-RPC 2.0 says). */
export function readableId(value: unknown): JsonRpcId {
  if (value === null || typeof value !== "object") return null;
  const id = (value as Record<string, unknown>).id;
  return typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) ? id : null;
}

/** Bytes of one answer in a batch array: its JSON plus the comma before it. */
function entryBytes(text: string): number {
  return Buffer.byteLength(text) + 1;
}

/**
 * The answer to one batch frame, built as its calls finish and never over `limit` bytes of JSON,
 * however large the calls' answers are. An answer that would take the array over the limit is
 * replaced by that call's `payload_too_large` error (the call itself ran); room for those errors
 * is kept from the start, so every call that expects an answer gets one.
 */
export class BatchAnswer {
  private readonly entries: string[] = [];
  /** The brackets, then every entry so far. */
  private bytes = 2;
  /** What the fallback errors of the calls still running would take. */
  private reserved = 0;
  private pending: number;

  private constructor(
    private readonly limit: number,
    /** Per call: its `payload_too_large` answer, or null for a notification (no answer). */
    private readonly fallbacks: (string | null)[],
  ) {
    this.pending = fallbacks.length;
    for (const f of fallbacks) if (f !== null) this.reserved += entryBytes(f);
  }

  /** Null when even the errors of every call would not fit in `limit` (only with huge ids). */
  static plan(requests: readonly unknown[], limit: number): BatchAnswer | null {
    const tooLarge = new HermesError(
      "payload_too_large",
      `the answer to this call would take the batch answer over ${limit} bytes; send the call alone or ask for less (limit, max_bytes)`,
      { data: { limit } },
    );
    const fallbacks = requests.map((request) => {
      if (isRequestShape(request) && !("id" in request)) return null;
      const method = isRequestShape(request) ? request.method : "";
      const answer: JsonRpcResponse = { jsonrpc: "2.0", id: readableId(request), error: methodError(method, tooLarge) };
      return JSON.stringify(answer);
    });
    const answer = new BatchAnswer(limit, fallbacks);
    return answer.bytes + answer.reserved <= limit ? answer : null;
  }

  /** Bytes the answer of call `index` may take and still be kept (room left after the other calls' errors). */
  room(index: number): number {
    const fallback = this.fallbacks[index] ?? null;
    const own = fallback === null ? 0 : entryBytes(fallback);
    return this.limit - this.bytes - (this.reserved - own) - 1;
  }

  /** Records the answer of call `index` (null: none, a notification); true once every call has answered. */
  add(index: number, answer: JsonRpcResponse | null): boolean {
    this.pending--;
    const fallback = this.fallbacks[index] ?? null;
    if (answer !== null) {
      const text = JSON.stringify(answer);
      const kept = Buffer.byteLength(text) <= this.room(index) || fallback === null ? text : fallback;
      this.entries.push(kept);
      this.bytes += entryBytes(kept);
    }
    if (fallback !== null) this.reserved -= entryBytes(fallback);
    return this.pending === 0;
  }

  /** The frame to send; null when no call of the batch expects an answer. */
  text(): string | null {
    return this.entries.length > 0 ? `[${this.entries.join(",")}]` : null;
  }
}
