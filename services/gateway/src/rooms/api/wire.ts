import { HermesError } from "@hermes/common";
import {
  type DiscussionStatus,
  type ReplicaStateReply,
  type ReplicationState,
  type Room,
  type SendReply,
  type SendRequest,
  type DivergenceRecord as WireDivergence,
  LogPage as WireLogPage,
  type Member as WireMember,
  type RoomEvent as WireRoomEvent,
  type RoomReplication as WireRoomReplication,
} from "@hermes/proto/hermes/v1/rooms";
import type { TunnelPage } from "../../relay-link/app/relay-room-source.js";
import type { AnyPage } from "../app/live-tail.js";
import type { ReplicationView } from "../app/quorum/coordinated-rooms.js";
import type { ReplicaStateResult, RoomDriverStatus, RoomView } from "../app/rooms-service.js";
import { packEvents } from "../app/wire.js";
import { type Authority, type DivergenceRecord, type LogPage, type Member, packedBytes, type RoomEvent } from "../core/index.js";

/**
 * What the room methods answer, in each transport's form: protobuf messages for gRPC (and the
 * relay tunnel, which carries them as JSON or as protobuf bytes), JSON objects for JSON-RPC, where
 * an event's actor and payload are objects instead of canonical JSON texts. Decoding pages a
 * replica receives is the app's (rooms/app/wire.ts), next to the packed encoding.
 */

// -------------------------------------------------------------------------------------------
// Events and pages

export function toWireEvent(e: RoomEvent): WireRoomEvent {
  return {
    room_id: e.room_id,
    seq: e.seq,
    event_id: e.event_id,
    kind: e.kind,
    actor_json: e.actor_json,
    epoch: e.epoch,
    payload_json: e.payload_json,
    created_at: e.created_at,
    hash: e.hash,
  };
}

/**
 * The wire message of a page holds the page's own objects, not copies: a page is made afresh by
 * every read and never changed after (live tails share one), and its authority, lineage entries,
 * prev and events have exactly the fields of their wire messages.
 */
function pageFrame(page: AnyPage): Omit<WireLogPage, "events" | "packed_events"> {
  return {
    room_id: page.room_id,
    cursor: page.cursor,
    latest_seq: page.latest_seq,
    has_more: page.has_more,
    authority: page.authority,
    lineage: page.lineage,
    prev: page.prev ?? undefined,
  };
}

export function toWirePage(page: LogPage, packed: boolean): WireLogPage {
  return {
    ...pageFrame(page),
    events: packed ? [] : page.events,
    packed_events: packed ? packEvents(page.events) : Buffer.alloc(0),
  };
}

/** Either kind of page to the wire: a page the store read as packed tuples is serialised as it is. */
export function toWireAnyPage(page: AnyPage): WireLogPage {
  if (!("packed" in page)) return toWirePage(page, false);
  return { ...pageFrame(page), events: [], packed_events: packedBytes(page.packed) };
}

/** A page through the relay tunnel: the gRPC LogPage, protobuf-encoded, base64 (what a direct pull gets, byte for byte). */
export function toTunnelPage(page: AnyPage): TunnelPage {
  return { page_b64: Buffer.from(WireLogPage.encode(toWireAnyPage(page)).finish()).toString("base64") };
}

/** An event as JSON-RPC shows it: actor and payload as objects (they are canonical JSON in the store). */
export interface JsonEvent {
  room_id: string;
  seq: number;
  event_id: string;
  kind: string;
  actor: unknown;
  epoch: number;
  payload: unknown;
  created_at: string;
  hash: string;
}

export function toJsonEvent(e: RoomEvent): JsonEvent {
  return {
    room_id: e.room_id,
    seq: e.seq,
    event_id: e.event_id,
    kind: e.kind,
    actor: JSON.parse(e.actor_json),
    epoch: e.epoch,
    payload: JSON.parse(e.payload_json),
    created_at: e.created_at,
    hash: e.hash,
  };
}

/** A page for JSON-RPC. Pages of packed tuples are read only for transports that carry them as bytes. */
export function toJsonPage(page: AnyPage) {
  if ("packed" in page) throw new HermesError("internal", "a page of packed tuples was read for JSON-RPC, which shows events as objects");
  return { ...page, events: page.events.map(toJsonEvent) };
}

/** `known_authority` of a gRPC request: unset, an empty id or epoch 0 mean "none". */
export function optionalAuthority(a: { gateway_id: string; epoch: number } | undefined): Authority | undefined {
  return a && a.gateway_id !== "" && a.epoch > 0 ? { gateway_id: a.gateway_id, epoch: a.epoch } : undefined;
}

// -------------------------------------------------------------------------------------------
// Rooms, sends, replica state, divergences (gRPC)

function toWireMember(m: Member): WireMember {
  return { member_id: m.member_id, profile: m.profile, gateway_id: m.gateway_id, display_name: m.display_name };
}

/** A member from the wire, unset optional fields left out (the core validates it). */
export function fromWireMember(m: WireMember): Record<string, string> {
  const member: Record<string, string> = { member_id: m.member_id, profile: m.profile };
  if (m.gateway_id !== undefined) member.gateway_id = m.gateway_id;
  if (m.display_name !== undefined) member.display_name = m.display_name;
  return member;
}

/** CreateRoomRequest.replication as the JSON-RPC params (min_insync 0: the default). */
export function fromWireReplication(r: WireRoomReplication): Record<string, unknown> {
  return { mode: r.mode, replicas: r.replicas, ...(r.min_insync > 0 ? { min_insync: r.min_insync } : {}) };
}

export function toWireReplication(v: ReplicationView): ReplicationState {
  return {
    mode: v.mode,
    replicas: v.replicas,
    min_insync: v.min_insync,
    isr: v.isr,
    missing: v.missing,
    lease: v.lease ? { holder: v.lease.holder, expires_in_ms: v.lease.expires_in_ms } : undefined,
  };
}

export function toWireRoom(v: RoomView): Room {
  return {
    room_id: v.room_id,
    name: v.name,
    members: v.members.map(toWireMember),
    authority_gateway_id: v.authority_gateway_id,
    authority_epoch: v.authority_epoch,
    latest_seq: v.latest_seq,
    revision: v.revision,
    created_at: v.created_at,
    updated_at: v.updated_at,
    disbanded_at: v.disbanded_at ?? undefined,
    role: v.role,
    safety_status: v.safety_status,
    safety_reason: v.safety_reason ?? undefined,
    fenced_by: v.fenced_by ?? undefined,
    demoted: v.demoted ?? undefined,
  };
}

export function toWireReplicaState(s: ReplicaStateResult): ReplicaStateReply {
  return {
    ...s,
    safety_reason: s.safety_reason ?? undefined,
    following: s.following ? { ...s.following, last_error: s.following.last_error ?? undefined } : undefined,
    demoted: s.demoted ?? undefined,
  };
}

/** The discussion of groups.state for the wire; unset optionals left out. */
export function toWireDiscussion(d: RoomDriverStatus["discussion"]): DiscussionStatus | undefined {
  if (!d) return undefined;
  return {
    state: d.state,
    reason: d.reason,
    discussion_seq: d.discussion_seq,
    round_index: d.round_index,
    replies: d.replies,
    turn_id: d.turn?.turn_id,
    turn_member_id: d.turn?.member_id,
    unavailable: d.unavailable,
  };
}

export function toWireSend(r: { event: RoomEvent; accepted: boolean; idempotent: boolean }): SendReply {
  return { event: toWireEvent(r.event), accepted: r.accepted, idempotent: r.idempotent };
}

export function toWireDivergence(d: DivergenceRecord & { divergence_id: number; events?: RoomEvent[] }): WireDivergence {
  return {
    divergence_id: d.divergence_id,
    room_id: d.room_id,
    detected_at: d.detected_at,
    from_seq: d.from_seq,
    branch_epoch: d.branch_epoch,
    branch_gateway_id: d.branch_gateway_id,
    winning_epoch: d.winning_epoch,
    winning_gateway_id: d.winning_gateway_id,
    count: d.count,
    markers_only: d.markers_only,
    events: (d.events ?? []).map(toWireEvent),
  };
}

/** A send request from the wire, in the JSON shape the core validates (unset optional fields left out). */
export function fromWireSend(send: SendRequest | undefined): unknown {
  if (!send) return {};
  const params: Record<string, unknown> = { room_id: send.room_id, event_id: send.event_id };
  if (send.payload) {
    params.payload =
      send.payload.thread_id === undefined ? { text: send.payload.text } : { text: send.payload.text, thread_id: send.payload.thread_id };
  }
  if (send.expected_latest_seq !== undefined) params.expected_latest_seq = send.expected_latest_seq;
  return params;
}
