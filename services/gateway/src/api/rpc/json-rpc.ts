import { type ErrorReason, type HermesError, toHermesError } from "@hermes/common";

/**
 * JSON-RPC 2.0 framing (https://www.jsonrpc.org/specification) and the upstream room error codes
 * (docs/PROTOCOL.md, JSON-RPC "Errors"): a refusal of a room method carries that method's code
 * (4110–4119) with `data.reason` and, where a client should redirect, `data.authority`. Every error
 * answer has `data.reason`.
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

/** Upstream's room error codes by method (rename shares 4117 as upstream does; repost is a send). */
export const ROOM_ERROR_CODES: Readonly<Record<string, number>> = {
  "groups.create": 4110,
  "groups.send": 4111,
  "groups.repost": 4111,
  "groups.log": 4112,
  "groups.subscribe": 4112,
  "groups.disband": 4113,
  "groups.state": 4114,
  "groups.stop": 4115,
  "groups.replicate": 4116,
  "groups.replica_state": 4117,
  "groups.rename": 4117,
  "groups.release": 4117,
  "groups.promote": 4118,
  "groups.demote": 4119,
};

/** Largest batch (array of requests) one frame may carry. */
export const MAX_BATCH = 1000;

export function errorObject(code: number, err: HermesError): JsonRpcErrorObject {
  return { code, message: err.message, data: { ...err.data, reason: err.reason } };
}

/** The error answer for a failed call of `method` (its room code, else the standard code). */
export function methodError(method: string, err: unknown): JsonRpcErrorObject {
  const e = toHermesError(err);
  const roomCode = ROOM_ERROR_CODES[method];
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
