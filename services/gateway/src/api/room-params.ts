import { HermesError } from "@hermes/common";
import { z } from "zod";
import type { SourceSpec } from "../app/rooms/room-source.js";
import { MAX_EPOCH } from "../core/rooms/limits.js";

/**
 * Shapes of the room methods' params, shared by the gRPC and JSON-RPC adapters (validation at the
 * edge). Types and ranges are checked here; ids, names, members, payloads and limits by the
 * pure core, so both transports give the same answer to the same input.
 */

const roomId = z.string();
const seq = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const authority = z.object({ gateway_id: z.string(), epoch: z.number().int().nonnegative().max(MAX_EPOCH) });

export const roomParamSchemas = {
  capabilities: z.object({}).loose(),
  create: z.object({ room_id: z.string().optional(), name: z.unknown().optional(), members: z.unknown().optional() }),
  log: z.object({
    room_id: roomId,
    since_seq: seq.optional(),
    limit: z.number().int().optional(),
    max_bytes: z.number().int().optional(),
    packed: z.boolean().optional(),
    known_authority: authority.optional(),
  }),
  subscribe: z.object({
    room_id: roomId,
    since_seq: seq.optional(),
    known_authority: authority.optional(),
  }),
  unsubscribe: z.object({ subscription: z.string() }),
  replicate: z.object({
    room_id: roomId,
    from: z.union([z.string().min(1), z.object({ url: z.string().min(1), key: z.string().optional() })]),
    follow: z.boolean().optional(),
  }),
  room: z.object({ room_id: roomId }),
  state: z.object({ room_id: roomId, include_disbanded: z.boolean().optional() }),
  promote: z.object({ room_id: roomId, confirm: z.unknown().optional(), reason: z.unknown().optional() }),
  demote: z.object({ room_id: roomId, observed_gateway_id: z.unknown().optional(), observed_epoch: z.unknown().optional() }),
  rename: z.object({ room_id: roomId, name: z.unknown().optional(), event_id: z.string().optional() }),
  list: z.object({
    limit: z.number().int().optional(),
    offset: z.number().int().optional(),
    include_disbanded: z.boolean().optional(),
  }),
  repost: z.object({
    room_id: roomId,
    seqs: z.array(seq).max(1000).optional(),
    divergence_id: seq.optional(),
    messages: z
      .array(z.object({ event_id: z.string(), text: z.string(), thread_id: z.string().optional(), origin: z.string().max(200) }))
      .max(1000)
      .optional(),
  }),
} as const;

export type RoomParamKind = keyof typeof roomParamSchemas;

/** Parses params of a room method or throws `invalid_params` naming the field. */
export function parseRoomParams<K extends RoomParamKind>(kind: K, raw: unknown): z.infer<(typeof roomParamSchemas)[K]> {
  const parsed = roomParamSchemas[kind].safeParse(raw ?? {});
  if (parsed.success) return parsed.data as z.infer<(typeof roomParamSchemas)[K]>;
  const issue = parsed.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.join(".") : "params";
  throw new HermesError("invalid_params", `${field}: ${issue?.message ?? "invalid"}`, { data: { field } });
}

/** `from` of groups.replicate: a registered peer name, or {url, key}. */
export function sourceSpecOf(from: string | { url: string; key?: string | undefined }): SourceSpec {
  if (typeof from === "string") {
    // A URL given as a plain string still works (its key may come from the peer registry only).
    return /^grpcs?:\/\//.test(from) ? { url: from } : { peer: from };
  }
  return { url: from.url, key: from.key };
}
