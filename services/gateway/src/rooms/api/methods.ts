import type { handleUnaryCall } from "@grpc/grpc-js";
import { HermesError, type ServiceHandlers } from "@hermes/common";
import type {
  ReplicateRequest,
  RoomServiceServer,
  SubscribeRequest,
  ReplicateProgress as WireProgress,
} from "@hermes/proto/hermes/v1/rooms";
import { z } from "zod";
import type { TunnelPage } from "../../relay-link/app/relay-room-source.js";
import type { AnyPage, PageSink, TailSubscription } from "../app/live-tail.js";
import type { ReplicateProgress, ReplicateResult } from "../app/replicator.js";
import type { SourceSpec } from "../app/room-source.js";
import type { RoomsService } from "../app/rooms-service.js";
import { checkSendParams, MAX_EPOCH, refusalError, sendParamsSchema } from "../core/index.js";
import {
  fromWireMember,
  fromWireReplication,
  fromWireSend,
  optionalAuthority,
  toJsonEvent,
  toJsonPage,
  toTunnelPage,
  toWireAnyPage,
  toWireDiscussion,
  toWireDivergence,
  toWireEvent,
  toWireReplicaState,
  toWireReplication,
  toWireRoom,
  toWireSend,
} from "./wire.js";

/**
 * THE room API (`groups.*`): every method once, with its params, its call into RoomsService, its
 * codecs and its JSON-RPC error code. The gRPC RoomService handlers (rooms/api/room-service.ts),
 * the JSON-RPC methods (rooms/api/room-methods.ts) and the relay tunnel's room methods
 * (rooms/api/room-tunnel.ts) are generated from this table, and `groups.capabilities` lists it,
 * so a method exists on every transport it names with the same validation and the same answers.
 *
 * Params are parsed the same way on every transport: a transport's request codec turns its
 * request into the JSON-RPC params object (gRPC: unset fields left out), then parseParams checks
 * it against the method's schema. Types and ranges are checked here; ids, names, members, payloads and limits by the
 * pure core, so every transport gives the same answer to the same input.
 */

/**
 * How a transport carries log pages: `tuples` as the packed bytes of a gRPC LogPage (gRPC, the
 * relay tunnel), `objects` as event objects (JSON-RPC). A `packed` read is served as the store's
 * packed tuples only where they travel as bytes.
 */
export type PageForm = "tuples" | "objects";

/** Parses a method's params (the JSON-RPC params object) or throws `invalid_params` naming the field. */
export type ParamsParser<P> = (raw: unknown) => P;

type MaybePromise<T> = T | Promise<T>;

/** RoomService's unary gRPC methods, with their request and reply messages. */
type GrpcMethodName = keyof ServiceHandlers<RoomServiceServer>;
type GrpcUnaryName = {
  [K in GrpcMethodName]: RoomServiceServer[K] extends handleUnaryCall<infer _Req, infer _Res> ? K : never;
}[GrpcMethodName];
type GrpcRequest<K extends GrpcUnaryName> = RoomServiceServer[K] extends handleUnaryCall<infer Req, infer _Res> ? Req : never;
type GrpcReply<K extends GrpcUnaryName> = RoomServiceServer[K] extends handleUnaryCall<infer _Req, infer Res> ? Res : never;

/** A unary method over gRPC: which RoomService method, its request as params, its result as the reply. */
export type GrpcUnaryCodec<R> = {
  [K in GrpcUnaryName]: { method: K; request(req: GrpcRequest<K>): unknown; reply(result: R): GrpcReply<K> };
}[GrpcUnaryName];

interface MethodBase<P> {
  /** The JSON-RPC method name; what `groups.capabilities` lists. */
  name: `groups.${string}`;
  /** The JSON-RPC error code of every refusal (4110–4119); without one, the standard codes. */
  code?: number;
  /** The params (the JSON-RPC params object), checked by parseParams. */
  params: z.ZodType<P>;
  /** A check of the method's own that replaces the schema's (it must accept exactly what the schema does). */
  parse?: ParamsParser<P>;
}

/** One request, one answer. */
interface UnaryDefinition<P, R> extends MethodBase<P> {
  /** `answerBytes`: what the answer may take, for a call of a JSON-RPC batch (the room the batch has left). */
  call(rooms: RoomsService, params: P, pages: PageForm, answerBytes?: number): MaybePromise<R>;
  /** The JSON-RPC result. */
  json(result: R): unknown;
  grpc?: GrpcUnaryCodec<R>;
  /** Served through the relay tunnel (to other gateways): the params there, and the answer as JSON. */
  tunnel?: { request?(params: Record<string, unknown>): unknown; reply(result: R): unknown };
}

/** Progress items, then one answer (`groups.replicate`): gRPC streams both, JSON-RPC notifies the items. */
interface ServerStreamDefinition<P, I, R> extends MethodBase<P> {
  call(rooms: RoomsService, params: P, progress: (item: I) => void, signal?: AbortSignal): Promise<R>;
  json: { notification: `groups.${string}`; item(item: I, params: P): unknown; result(result: R): unknown };
  grpc: {
    method: "replicate";
    request(req: ReplicateRequest): unknown;
    item(item: I): WireProgress;
    /** The last message: it carries the result. */
    result(result: R, rooms: RoomsService, params: P): WireProgress;
  };
}

/** What every live tail's params hold. */
export interface TailParams {
  room_id: string;
  since_seq?: number | undefined;
}

/**
 * A live tail: pages until the subscriber goes away. gRPC and the tunnel stream the pages;
 * JSON-RPC answers a subscription id and sends the pages as notifications.
 */
interface SubscriptionDefinition<P extends TailParams> extends MethodBase<P> {
  open(rooms: RoomsService, params: P, pages: PageForm, sink: PageSink<AnyPage>): TailSubscription;
  json: { notification: `groups.${string}`; page(page: AnyPage): unknown };
  grpc: { method: "subscribe"; request(req: SubscribeRequest): unknown };
  tunnel?: { request?(params: Record<string, unknown>): unknown; page(page: AnyPage): TunnelPage };
}

/** Ends a subscription of the same JSON-RPC connection (a gRPC or tunnel stream ends by being cancelled). */
export type UnsubscribeRoomMethod<P extends { subscription: string }> = MethodBase<P> & { kind: "unsubscribe" };
export type UnaryRoomMethod<P, R> = UnaryDefinition<P, R> & { kind: "unary" };
export type ServerStreamRoomMethod<P, I, R> = ServerStreamDefinition<P, I, R> & { kind: "server_stream" };
export type SubscriptionRoomMethod<P extends TailParams> = SubscriptionDefinition<P> & { kind: "subscription" };

export type RoomMethod =
  | UnaryRoomMethod<unknown, unknown>
  | ServerStreamRoomMethod<unknown, unknown, unknown>
  | SubscriptionRoomMethod<TailParams>
  | UnsubscribeRoomMethod<{ subscription: string }>;

// Helpers that infer each entry's params and result types from its schema and call.
const unary = <P, R>(m: UnaryDefinition<P, R>): UnaryRoomMethod<P, R> => ({ kind: "unary", ...m });
const serverStream = <P, I, R>(m: ServerStreamDefinition<P, I, R>): ServerStreamRoomMethod<P, I, R> => ({ kind: "server_stream", ...m });
const subscription = <P extends TailParams>(m: SubscriptionDefinition<P>): SubscriptionRoomMethod<P> => ({ kind: "subscription", ...m });

/** A method's params, or `invalid_params` naming the field of the first issue (`data.field`). */
export function parseParams<P>(method: Pick<MethodBase<P>, "params" | "parse">, raw: unknown): P {
  if (method.parse) return method.parse(raw);
  const parsed = method.params.safeParse(raw ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.join(".") : "params";
  throw new HermesError("invalid_params", `${field}: ${issue?.message ?? "invalid"}`, { data: { field } });
}

const roomId = z.string();
const seq = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const authority = z.object({ gateway_id: z.string(), epoch: z.number().int().nonnegative().max(MAX_EPOCH) });
const room = z.object({ room_id: roomId });
const identity = <T>(value: T): T => value;

/** The tunnel's reads are replication reads: packed pages of up to 5000 events. */
const packedRead = (params: Record<string, unknown>) => ({ ...params, packed: true });

/** `from` of groups.replicate: a registered peer name, or {url, key}. */
export function sourceSpecOf(from: string | { url: string; key?: string | undefined }): SourceSpec {
  if (typeof from === "string") {
    // A URL given as a plain string still works (its key may come from the peer registry only).
    return /^grpcs?:\/\//.test(from) ? { url: from } : { peer: from };
  }
  return { url: from.url, key: from.key };
}

/** gRPC's ReplicaSource as the JSON-RPC `from`: exactly one of url (with key) and peer. */
function replicateRequest(req: ReplicateRequest): unknown {
  const url = req.from?.url ?? "";
  const peer = req.from?.peer ?? "";
  if ((url === "") === (peer === "")) {
    throw new HermesError("invalid_params", "from: give either url (with key) or the name of a registered peer", {
      data: { field: "from" },
    });
  }
  return { room_id: req.room_id, from: url !== "" ? { url, key: req.from?.key || undefined } : peer, follow: req.follow };
}

/** `groups.send`, also the unit of gRPC's pipelined `Append` stream. */
export const SEND_METHOD = unary({
  name: "groups.send",
  code: 4111,
  params: sendParamsSchema,
  // The core's check of this schema: a hand-written fast path for well-formed sends (every send of
  // an Append stream), zod for the message otherwise, then ids and payload limits (reserved ids…).
  parse: (raw) => {
    const checked = checkSendParams(raw);
    if (!checked.ok) throw refusalError(checked.refusal);
    return checked.value;
  },
  call: (rooms, p) => rooms.send(p),
  json: (r) => ({ ...r, event: toJsonEvent(r.event) }),
  grpc: { method: "send", request: fromWireSend, reply: toWireSend },
  // A member's message to a room led here; the answer is the gRPC SendReply as JSON.
  tunnel: { reply: toWireSend },
});

/** Every room method, in the order `groups.capabilities` lists them. */
export const ROOM_METHODS: readonly RoomMethod[] = [
  unary({
    name: "groups.capabilities",
    params: z.object({}).loose(),
    call: (rooms) => ({ ...rooms.capabilities(), methods: roomMethodNames() }),
    json: identity,
    grpc: { method: "capabilities", request: () => ({}), reply: identity },
  }),
  unary({
    name: "groups.create",
    code: 4110,
    params: z.object({
      room_id: z.string().optional(),
      name: z.unknown().optional(),
      members: z.unknown().optional(),
      // Checked by the core (checkReplicationParams), which names the bad field.
      replication: z.unknown().optional(),
    }),
    call: (rooms, p) => rooms.create(p),
    json: (view) => ({ room: view }),
    grpc: {
      method: "create",
      request: (req) => ({
        room_id: req.room_id,
        name: req.name,
        members: req.members.map(fromWireMember),
        ...(req.replication ? { replication: fromWireReplication(req.replication) } : {}),
      }),
      reply: (view) => ({ room: toWireRoom(view) }),
    },
  }),
  SEND_METHOD,
  unary({
    name: "groups.log",
    code: 4112,
    params: z.object({
      room_id: roomId,
      since_seq: seq.optional(),
      limit: z.number().int().optional(),
      max_bytes: z.number().int().optional(),
      packed: z.boolean().optional(),
      known_authority: authority.optional(),
    }),
    call: (rooms, p, pages, answerBytes): AnyPage =>
      p.packed && pages === "tuples" ? rooms.logPacked(p) : rooms.log({ ...p, answer_bytes: answerBytes }),
    json: toJsonPage,
    grpc: {
      method: "log",
      request: (req) => ({
        room_id: req.room_id,
        since_seq: req.since_seq,
        limit: req.limit,
        max_bytes: req.max_bytes,
        packed: req.packed,
        known_authority: optionalAuthority(req.known_authority),
      }),
      reply: toWireAnyPage,
    },
    tunnel: { request: packedRead, reply: toTunnelPage },
  }),
  subscription({
    name: "groups.subscribe",
    code: 4112,
    params: z.object({ room_id: roomId, since_seq: seq.optional(), packed: z.boolean().optional(), known_authority: authority.optional() }),
    open: (rooms, p, pages, sink) => {
      // Replication-sized pages of packed tuples where they travel as bytes; JSON-RPC tails pages of up to 500 events.
      const packed = p.packed === true && pages === "tuples";
      return rooms.subscribe(
        { room_id: p.room_id, since_seq: p.since_seq ?? 0, known_authority: p.known_authority, packed, tuples: packed },
        sink,
      );
    },
    json: { notification: "groups.events", page: toJsonPage },
    grpc: {
      method: "subscribe",
      request: (req) => ({
        room_id: req.room_id,
        since_seq: req.since_seq,
        packed: req.packed,
        known_authority: optionalAuthority(req.known_authority),
      }),
    },
    tunnel: { request: packedRead, page: toTunnelPage },
  }),
  { kind: "unsubscribe", name: "groups.unsubscribe", params: z.object({ subscription: z.string() }) },
  serverStream({
    name: "groups.replicate",
    code: 4116,
    params: z.object({
      room_id: roomId,
      from: z.union([z.string().min(1), z.object({ url: z.string().min(1), key: z.string().optional() })]),
      follow: z.boolean().optional(),
    }),
    call: (rooms, p, progress: (item: ReplicateProgress) => void, signal): Promise<ReplicateResult> =>
      rooms.replicate({ room_id: p.room_id, from: sourceSpecOf(p.from), follow: p.follow ?? false }, progress, signal),
    json: {
      notification: "groups.replicate.progress",
      item: (progress, p) => ({ room_id: p.room_id, ...progress }),
      result: identity,
    },
    grpc: {
      method: "replicate",
      request: replicateRequest,
      item: (progress) => ({ ...progress, result: undefined }),
      result: (result, rooms, p) => ({
        stored_seq: result.stored_seq,
        latest_seq: rooms.replicaState(p.room_id).latest_seq,
        ingested: result.ingested,
        result: { ...result, divergences: result.divergences.map(toWireDivergence) },
      }),
    },
  }),
  unary({
    name: "groups.replica_state",
    code: 4117,
    params: room,
    call: (rooms, p) => rooms.replicaState(p.room_id),
    json: identity,
    grpc: { method: "replicaState", request: identity, reply: toWireReplicaState },
  }),
  unary({
    name: "groups.promote",
    code: 4118,
    params: z.object({ room_id: roomId, confirm: z.unknown().optional(), reason: z.unknown().optional(), unclean: z.boolean().optional() }),
    call: (rooms, p) => rooms.promote(p),
    json: identity,
    grpc: { method: "promote", request: identity, reply: identity },
  }),
  unary({
    name: "groups.demote",
    code: 4119,
    params: z.object({ room_id: roomId, observed_gateway_id: z.unknown().optional(), observed_epoch: z.unknown().optional() }),
    call: (rooms, p) => rooms.demote(p),
    json: identity,
    grpc: { method: "demote", request: identity, reply: identity },
  }),
  unary({
    name: "groups.state",
    code: 4114,
    params: z.object({ room_id: roomId, include_disbanded: z.boolean().optional() }),
    call: (rooms, p) => rooms.state(p.room_id),
    json: identity,
    grpc: {
      method: "state",
      request: identity,
      reply: (s) => ({
        room: toWireRoom(s.room),
        driver_status: s.driver_status,
        needs_you: s.needs_you,
        discussion: toWireDiscussion(s.discussion),
        replication: toWireReplication(s.replication),
      }),
    },
  }),
  unary({
    name: "groups.stop",
    code: 4115,
    params: room,
    call: (rooms, p) => rooms.stopRoom(p.room_id),
    json: identity,
    grpc: { method: "stop", request: identity, reply: identity },
  }),
  unary({
    name: "groups.rename",
    code: 4117,
    params: z.object({ room_id: roomId, name: z.unknown().optional(), event_id: z.string().optional() }),
    call: (rooms, p) => rooms.rename(p),
    json: (view) => ({ room: view }),
    grpc: {
      method: "rename",
      request: (req) => ({ room_id: req.room_id, name: req.name, event_id: req.event_id || undefined }),
      reply: (view) => ({ room: toWireRoom(view) }),
    },
  }),
  unary({
    name: "groups.disband",
    code: 4113,
    params: room,
    call: (rooms, p) => rooms.disband(p.room_id),
    json: (r) => ({ ...r, event: toJsonEvent(r.event) }),
    grpc: {
      method: "disband",
      request: identity,
      reply: (r) => ({ room_id: r.room_id, event: toWireEvent(r.event), idempotent: r.idempotent }),
    },
  }),
  unary({
    name: "groups.list",
    params: z.object({
      limit: z.number().int().optional(),
      offset: z.number().int().optional(),
      include_disbanded: z.boolean().optional(),
    }),
    call: (rooms, p) => rooms.list(p),
    json: identity,
    grpc: {
      method: "list",
      request: identity,
      reply: (r) => ({ rooms: r.rooms.map(toWireRoom), next_offset: r.next_offset ?? undefined }),
    },
  }),
  unary({
    name: "groups.divergence",
    params: room,
    call: (rooms, p) => rooms.divergence(p.room_id),
    json: (r) => ({ ...r, branches: r.branches.map((b) => ({ ...b, events: b.events.map(toJsonEvent) })) }),
    grpc: { method: "divergence", request: identity, reply: (r) => ({ room_id: r.room_id, branches: r.branches.map(toWireDivergence) }) },
  }),
  unary({
    name: "groups.repost",
    code: 4111,
    params: z.object({
      room_id: roomId,
      seqs: z.array(seq).max(1000).optional(),
      divergence_id: seq.optional(),
      messages: z
        .array(z.object({ event_id: z.string(), text: z.string(), thread_id: z.string().optional(), origin: z.string().max(200) }))
        .max(1000)
        .optional(),
    }),
    call: (rooms, p) => rooms.repost(p),
    json: (r) => ({ ...r, items: r.items.map((i) => ({ ...i, event: toJsonEvent(i.event) })) }),
    grpc: {
      method: "repost",
      request: (req) => ({
        room_id: req.room_id,
        seqs: req.seqs,
        divergence_id: req.divergence_id,
        messages: req.messages.map((m) => (m.thread_id === undefined ? { event_id: m.event_id, text: m.text, origin: m.origin } : m)),
      }),
      reply: (r) => ({ room_id: r.room_id, items: r.items.map((i) => ({ ...i, event: toWireEvent(i.event) })) }),
    },
  }),
  unary({
    name: "groups.release",
    code: 4117,
    params: room,
    call: (rooms, p) => rooms.release(p.room_id),
    json: identity,
    grpc: { method: "releaseSafety", request: identity, reply: toWireReplicaState },
  }),
];

/** The methods `groups.capabilities` lists: every method of the table. */
export function roomMethodNames(): string[] {
  return ROOM_METHODS.map((m) => m.name);
}

const ERROR_CODES: ReadonlyMap<string, number> = new Map(
  ROOM_METHODS.flatMap((m) => (m.code === undefined ? [] : [[m.name, m.code] as const])),
);

/** The JSON-RPC error code of a room method's refusals, or undefined (the standard codes apply). */
export function roomErrorCode(method: string): number | undefined {
  return ERROR_CODES.get(method);
}

/** Whether a method's call answers at once or later (JSON-RPC starts the next request only after an answer at once is sent). */
export function isPromise(value: unknown): value is Promise<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}
