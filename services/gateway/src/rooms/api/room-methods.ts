import { randomBytes } from "node:crypto";
import { HermesError } from "@hermes/common";
import type { TailSubscription } from "../app/live-tail.js";
import type { RoomsService } from "../app/rooms-service.js";
import {
  isPromise,
  parseParams,
  ROOM_METHODS,
  type RoomMethod,
  type ServerStreamRoomMethod,
  type SubscriptionRoomMethod,
  type TailParams,
  type UnaryRoomMethod,
  type UnsubscribeRoomMethod,
} from "./methods.js";

/** What a JSON-RPC connection offers the methods: notifications and per-connection subscriptions. */
export interface RpcPeer {
  /** Sends a notification; false when the socket is full. */
  notify(method: string, params: unknown): boolean;
  drained(): Promise<void>;
  readonly subscriptions: Map<string, TailSubscription>;
  /** Bytes this call's answer may take and still be kept: set for a call of a batch (the room the batch has left). */
  readonly answerBytes?: number;
}

/** A JSON-RPC method: its result, at once or later (a call answered at once is sent before the next starts). */
export type RpcMethod = (params: unknown, peer: RpcPeer) => unknown;

/** Most live tails one connection may hold. */
const MAX_SUBSCRIPTIONS_PER_CONNECTION = 256;

function unary(method: UnaryRoomMethod<unknown, unknown>, rooms: RoomsService): RpcMethod {
  return (raw, peer) => {
    const params = parseParams(method, raw);
    const result = method.call(rooms, params, "objects", peer.answerBytes);
    return isPromise(result) ? result.then((r) => method.json(r)) : method.json(result);
  };
}

/** Progress as notifications, then the answer. */
function serverStream(method: ServerStreamRoomMethod<unknown, unknown, unknown>, rooms: RoomsService): RpcMethod {
  return async (raw, peer) => {
    const params = parseParams(method, raw);
    const result = await method.call(rooms, params, (item) => peer.notify(method.json.notification, method.json.item(item, params)));
    return method.json.result(result);
  };
}

/**
 * Answers {subscription, room_id, since_seq} and sends the pages as notifications
 * ({subscription, page}); the tail waits while the socket is full. When it ends the connection
 * is told `groups.subscription_ended` ({subscription, error?}).
 */
function subscription(method: SubscriptionRoomMethod<TailParams>, rooms: RoomsService): RpcMethod {
  return (raw, peer) => {
    const params = parseParams(method, raw);
    if (peer.subscriptions.size >= MAX_SUBSCRIPTIONS_PER_CONNECTION) {
      throw new HermesError("limit_exceeded", `a connection may hold at most ${MAX_SUBSCRIPTIONS_PER_CONNECTION} subscriptions`, {
        data: { limit: MAX_SUBSCRIPTIONS_PER_CONNECTION },
      });
    }
    const id = `sub_${randomBytes(8).toString("hex")}`;
    const tail = method.open(rooms, params, "objects", {
      send: (page) => peer.notify(method.json.notification, { subscription: id, page: method.json.page(page) }),
      drained: () => peer.drained(),
      end: (error) => {
        peer.subscriptions.delete(id);
        peer.notify("groups.subscription_ended", {
          subscription: id,
          ...(error ? { error: { reason: error.reason, message: error.message, data: error.data } } : {}),
        });
      },
    });
    peer.subscriptions.set(id, tail);
    return { subscription: id, room_id: params.room_id, since_seq: params.since_seq ?? 0 };
  };
}

function unsubscribe(method: UnsubscribeRoomMethod<{ subscription: string }>): RpcMethod {
  return (raw, peer) => {
    const { subscription: id } = parseParams(method, raw);
    const tail = peer.subscriptions.get(id);
    if (!tail) throw new HermesError("not_found", `no subscription ${id} on this connection`);
    peer.subscriptions.delete(id);
    tail.close();
    return { unsubscribed: true };
  };
}

function rpcMethod(method: RoomMethod, rooms: RoomsService): RpcMethod {
  switch (method.kind) {
    case "unary":
      return unary(method, rooms);
    case "server_stream":
      return serverStream(method, rooms);
    case "subscription":
      return subscription(method, rooms);
    case "unsubscribe":
      return unsubscribe(method);
  }
}

/**
 * The `groups.*` methods over JSON-RPC, generated from the room method table: the same
 * RoomsService as gRPC, events with actor and payload as JSON objects.
 */
export function roomMethods(rooms: RoomsService): Record<string, RpcMethod> {
  return Object.fromEntries(ROOM_METHODS.map((method) => [method.name, rpcMethod(method, rooms)]));
}
