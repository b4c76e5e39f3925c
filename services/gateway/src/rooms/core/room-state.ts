import { canonicalJson } from "./canonical-json.js";
import { eventHashOfCanonical, GENESIS_HASH } from "./hash-chain.js";
import { type Refusal, refusal } from "./refusal.js";
import type { Actor, Authority, EventKind, RoomEvent, RoomState, SafetyStatus } from "./types.js";
import { checkId, checkMembers, checkRoomName, type Member, withHosts } from "./validation.js";

/** Actor of room lifecycle events. */
export const ROOM_CONTROL_ACTOR: Actor = { kind: "system", id: "room-control" };
/** Actor of authority.claimed / authority.lost. */
export const AUTHORITY_CONTROL_ACTOR: Actor = { kind: "system", id: "authority-control" };

export interface UnsealedEvent {
  room_id: string;
  seq: number;
  event_id: string;
  kind: EventKind;
  actor_json: string;
  epoch: number;
  payload_json: string;
  created_at: string;
}

/**
 * Fills in the hash of an event that chains from `prevHash`. `actor_json` and `payload_json` must be
 * canonical JSON (as checkActor, checkPayload and canonicalJson produce).
 */
export function sealEvent(event: UnsealedEvent, prevHash: string): RoomEvent {
  // Field by field rather than a spread: this runs once per appended event.
  return {
    room_id: event.room_id,
    seq: event.seq,
    event_id: event.event_id,
    kind: event.kind,
    actor_json: event.actor_json,
    epoch: event.epoch,
    payload_json: event.payload_json,
    created_at: event.created_at,
    hash: eventHashOfCanonical(prevHash, event),
  };
}

/** A server-written event at the head of the log of an authority (seq = last_seq + 1, epoch = its own). */
export function nextServerEvent(
  state: RoomState,
  fields: { event_id: string; kind: EventKind; actor: Actor; payload: Record<string, unknown>; epoch?: number },
  now: string,
): RoomEvent {
  return sealEvent(
    {
      room_id: state.room_id,
      seq: state.last_seq + 1,
      event_id: fields.event_id,
      kind: fields.kind,
      actor_json: canonicalJson(fields.actor),
      epoch: fields.epoch ?? state.authority.epoch,
      payload_json: canonicalJson(fields.payload),
      created_at: now,
    },
    state.last_hash,
  );
}

/** The kind of the event a room holds under an event id, or undefined (a store lookup, synchronous). */
export type EventIdLookup = (eventId: string) => EventKind | undefined;

/**
 * The id of a server event: `base`, or when a log already holds `base` for something else (a
 * client's message that an older gateway accepted under a server id, or that came with a page of
 * such a gateway), the first free of `base.2`, `base.3`, …. `reusableBy` names the kind whose event
 * under the id is the operation itself again (a repeated disband): that id is returned, so the
 * append answers idempotently. Terminates: a log holds finitely many ids.
 */
export function serverEventId(base: string, stored: EventIdLookup, reusableBy?: EventKind): string {
  for (let n = 1; ; n++) {
    const id = n === 1 ? base : `${base}.${n}`;
    const kind = stored(id);
    if (kind === undefined || kind === reusableBy) return id;
  }
}

export function roleFor(selfGatewayId: string, authority: Authority): RoomState["role"] {
  return authority.gateway_id === selfGatewayId ? "authority" : "replica";
}

export interface CreateRoomInput {
  room_id: unknown;
  name: unknown;
  members: unknown;
  self_gateway_id: string;
  now: string;
  /** The store found the id in the retired-id table (a disbanded room): re-creating it is refused. */
  retired: boolean;
  /** The store already holds a room (authority or replica) with this id. */
  exists: boolean;
}

export type CreateRoomPlan =
  | { ok: true; state: RoomState; event: RoomEvent; name: string; members: Member[] }
  | { ok: false; refusal: Refusal };

/**
 * `groups.create` on this gateway: epoch 1, lineage [(1, self, 1)] and `room.created` at seq 1 with
 * `{name, members}`. The caller generates a room id (from its injected id source) when the client gave none.
 */
export function planCreateRoom(input: CreateRoomInput): CreateRoomPlan {
  const roomId = checkId(input.room_id, "room_id");
  if (!roomId.ok) return roomId;
  const name = checkRoomName(input.name);
  if (!name.ok) return name;
  const checkedMembers = checkMembers(input.members);
  if (!checkedMembers.ok) return checkedMembers;
  if (input.retired) {
    return {
      ok: false,
      refusal: refusal("room_retired", `room id ${roomId.value} belongs to a disbanded room and cannot be reused; pick another id`, {
        room_id: roomId.value,
      }),
    };
  }
  if (input.exists) {
    return {
      ok: false,
      refusal: refusal("already_exists", `room ${roomId.value} already exists on this gateway`, { room_id: roomId.value }),
    };
  }
  // Every member is stored with the gateway that hosts it, so its turns still find it after the
  // room's authority moves: members given without one are profiles of this gateway.
  const members = withHosts(checkedMembers.value, input.self_gateway_id);
  const authority = { gateway_id: input.self_gateway_id, epoch: 1 };
  const empty = emptyRoomState(roomId.value, input.self_gateway_id, authority);
  const event = nextServerEvent(
    empty,
    {
      event_id: "system:room-created",
      kind: "room.created",
      actor: ROOM_CONTROL_ACTOR,
      payload: { name: name.value, members },
    },
    input.now,
  );
  const state: RoomState = {
    ...empty,
    lineage: [{ epoch: 1, gateway_id: input.self_gateway_id, start_seq: 1 }],
    last_seq: 1,
    last_hash: event.hash,
    latest_seq: 1,
    max_epoch_seen: 1,
  };
  return { ok: true, state, event, name: name.value, members };
}

function emptyRoomState(roomId: string, selfGatewayId: string, authority: Authority): RoomState {
  return {
    room_id: roomId,
    self_gateway_id: selfGatewayId,
    role: roleFor(selfGatewayId, authority),
    authority,
    lineage: [],
    last_seq: 0,
    last_hash: GENESIS_HASH,
    latest_seq: 0,
    max_epoch_seen: authority.epoch,
    fenced_by: null,
    disbanded: false,
    safety_status: "passive",
    safety_reason: null,
  };
}

/**
 * A replica that holds nothing yet and will pull from `sourceGatewayId`. Its authority epoch is 0
 * ("not known"): the first page's lineage establishes it.
 */
export function newReplicaState(roomId: string, selfGatewayId: string, sourceGatewayId: string): RoomState {
  return emptyRoomState(roomId, selfGatewayId, { gateway_id: sourceGatewayId, epoch: 0 });
}

/**
 * `caught_up`: last_seq ≥ latest_seq of the last page. False before the first page
 * of the current authority (latest_seq 0: every room log has at least `room.created`).
 */
export function isCaughtUp(state: RoomState): boolean {
  if (state.role === "authority") return true;
  return state.latest_seq > 0 && state.last_seq >= state.latest_seq;
}

/** `groups.replica_state` result. */
export interface ReplicaStateView {
  room_id: string;
  authority: Authority;
  last_seq: number;
  latest_seq: number;
  caught_up: boolean;
  safety_status: SafetyStatus;
  safety_reason: string | null;
}

export function replicaStateView(state: RoomState): ReplicaStateView {
  return {
    room_id: state.room_id,
    authority: { ...state.authority },
    last_seq: state.last_seq,
    latest_seq: state.latest_seq,
    caught_up: isCaughtUp(state),
    safety_status: state.safety_status,
    safety_reason: state.safety_reason,
  };
}

/**
 * Operator action: clear `quarantined` or `diverged` after looking at the reason (and the preserved
 * branch). A fenced room is not released here: it leaves `fenced` by demote (or promote).
 */
export function releaseSafety(state: RoomState): { ok: true; state: RoomState } | { ok: false; refusal: Refusal } {
  if (state.safety_status === "fenced") {
    return {
      ok: false,
      refusal: refusal(
        "authority_conflict",
        `room ${state.room_id} is fenced by ${state.fenced_by?.gateway_id}@${state.fenced_by?.epoch}; demote this gateway (or promote it again) instead`,
        { authority: state.fenced_by },
      ),
    };
  }
  return { ok: true, state: { ...state, safety_status: "passive", safety_reason: null } };
}
