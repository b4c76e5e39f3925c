import { randomBytes } from "node:crypto";
import { HermesError } from "@hermes/common";
import type { TailSubscription } from "../../app/rooms/live-tail.js";
import type { RoomsService } from "../../app/rooms/rooms-service.js";
import { toJsonEvent, toJsonPage } from "../../app/rooms/wire.js";
import type { LogPage } from "../../core/rooms/index.js";
import { parseRoomParams, sourceSpecOf } from "../room-params.js";

/** What a JSON-RPC connection offers the methods: notifications and per-connection subscriptions. */
export interface RpcPeer {
  /** Sends a notification; false when the socket is full. */
  notify(method: string, params: unknown): boolean;
  drained(): Promise<void>;
  readonly subscriptions: Map<string, TailSubscription>;
}

export type RoomMethod = (params: unknown, peer: RpcPeer) => unknown;

/** Most live tails one connection may hold. */
const MAX_SUBSCRIPTIONS_PER_CONNECTION = 256;

/**
 * The `groups.*` methods over JSON-RPC: the same RoomsService as gRPC, events with actor
 * and payload as JSON objects. `groups.subscribe` answers {subscription, latest_seq} and then sends
 * `groups.events` notifications ({subscription, page}); `groups.replicate` sends
 * `groups.replicate.progress` notifications while it pulls.
 */
export function roomMethods(rooms: RoomsService): Record<string, RoomMethod> {
  return {
    "groups.capabilities": (params) => {
      parseRoomParams("capabilities", params);
      return rooms.capabilities();
    },
    "groups.create": (params) => ({ room: rooms.create(parseRoomParams("create", params)) }),
    "groups.send": async (params) => {
      const r = await rooms.send(params);
      return { ...r, event: toJsonEvent(r.event) };
    },
    "groups.log": (params) => toJsonPage(rooms.log(parseRoomParams("log", params))),
    "groups.subscribe": (params, peer) => {
      const p = parseRoomParams("subscribe", params);
      if (peer.subscriptions.size >= MAX_SUBSCRIPTIONS_PER_CONNECTION) {
        throw new HermesError("limit_exceeded", `a connection may hold at most ${MAX_SUBSCRIPTIONS_PER_CONNECTION} subscriptions`, {
          data: { limit: MAX_SUBSCRIPTIONS_PER_CONNECTION },
        });
      }
      const id = `sub_${randomBytes(8).toString("hex")}`;
      const subscription = rooms.subscribe(
        { room_id: p.room_id, since_seq: p.since_seq ?? 0, known_authority: p.known_authority },
        {
          send: (page) => peer.notify("groups.events", { subscription: id, page: toJsonPage(page as LogPage) }),
          drained: () => peer.drained(),
          end: (error) => {
            peer.subscriptions.delete(id);
            peer.notify("groups.subscription_ended", {
              subscription: id,
              ...(error ? { error: { reason: error.reason, message: error.message, data: error.data } } : {}),
            });
          },
        },
      );
      peer.subscriptions.set(id, subscription);
      return { subscription: id, room_id: p.room_id, since_seq: p.since_seq ?? 0 };
    },
    "groups.unsubscribe": (params, peer) => {
      const { subscription } = parseRoomParams("unsubscribe", params);
      const sub = peer.subscriptions.get(subscription);
      if (!sub) throw new HermesError("not_found", `no subscription ${subscription} on this connection`);
      peer.subscriptions.delete(subscription);
      sub.close();
      return { unsubscribed: true };
    },
    "groups.replicate": async (params, peer) => {
      const p = parseRoomParams("replicate", params);
      const result = await rooms.replicate({ room_id: p.room_id, from: sourceSpecOf(p.from), follow: p.follow ?? false }, (progress) =>
        peer.notify("groups.replicate.progress", { room_id: p.room_id, ...progress }),
      );
      return result;
    },
    "groups.replica_state": (params) => rooms.replicaState(parseRoomParams("room", params).room_id),
    "groups.promote": (params) => rooms.promote(parseRoomParams("promote", params)),
    "groups.demote": (params) => rooms.demote(parseRoomParams("demote", params)),
    "groups.state": (params) => rooms.state(parseRoomParams("state", params).room_id),
    "groups.stop": (params) => rooms.stopRoom(parseRoomParams("room", params).room_id),
    "groups.rename": async (params) => ({ room: await rooms.rename(parseRoomParams("rename", params)) }),
    "groups.disband": async (params) => {
      const r = await rooms.disband(parseRoomParams("room", params).room_id);
      return { ...r, event: toJsonEvent(r.event) };
    },
    "groups.list": (params) => rooms.list(parseRoomParams("list", params)),
    "groups.divergence": (params) => {
      const r = rooms.divergence(parseRoomParams("room", params).room_id);
      return { ...r, branches: r.branches.map((b) => ({ ...b, events: b.events.map(toJsonEvent) })) };
    },
    "groups.repost": async (params) => {
      const r = await rooms.repost(parseRoomParams("repost", params));
      return { ...r, items: r.items.map((i) => ({ ...i, event: toJsonEvent(i.event) })) };
    },
    "groups.release": (params) => rooms.release(parseRoomParams("room", params).room_id),
  };
}
