import { HermesError } from "@hermes/common";
import type { LogPage as WireLogPage, RoomEvent as WireRoomEvent } from "@hermes/proto/hermes/v1/rooms";
import {
  type Authority,
  type EventKind,
  isEventKind,
  type LineageEntry,
  type LogPage,
  type PackedEvent,
  type PackedLogPage,
  type RoomEvent,
} from "../../core/rooms/index.js";

/**
 * Conversions between the core's types and the two wire forms: protobuf (gRPC) and JSON (JSON-RPC).
 * The packed page encoding is the lean replication form: one UTF-8 JSON array of tuples instead of
 * thousands of protobuf messages, which V8 decodes in one native call.
 */

export function packEvents(events: readonly RoomEvent[]): Buffer {
  const tuples = new Array<PackedEvent>(events.length);
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    tuples[i] = [e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash];
  }
  return Buffer.from(JSON.stringify(tuples), "utf8");
}

function malformed(detail: string): HermesError {
  return new HermesError("invalid_params", `malformed packed page: ${detail}`);
}

/** Decodes packed events, checking every field's type (a remote page is untrusted input). */
export function unpackEvents(roomId: string, packed: Buffer): RoomEvent[] {
  if (packed.length === 0) return [];
  let tuples: unknown;
  try {
    tuples = JSON.parse(packed.toString("utf8"));
  } catch {
    throw malformed("not JSON");
  }
  if (!Array.isArray(tuples)) throw malformed("not an array");
  const events = new Array<RoomEvent>(tuples.length);
  for (let i = 0; i < tuples.length; i++) {
    const t = tuples[i] as unknown[];
    if (
      !Array.isArray(t) ||
      t.length !== 8 ||
      typeof t[0] !== "number" ||
      typeof t[1] !== "string" ||
      !isEventKind(t[2]) ||
      typeof t[3] !== "string" ||
      typeof t[4] !== "number" ||
      typeof t[5] !== "string" ||
      typeof t[6] !== "string" ||
      typeof t[7] !== "string"
    ) {
      throw malformed(`entry ${i} is not [seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash]`);
    }
    events[i] = {
      room_id: roomId,
      seq: t[0],
      event_id: t[1],
      kind: t[2] as EventKind,
      actor_json: t[3],
      epoch: t[4],
      payload_json: t[5],
      created_at: t[6],
      hash: t[7],
    };
  }
  return events;
}

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

export function fromWireEvent(e: WireRoomEvent): RoomEvent {
  if (!isEventKind(e.kind)) throw new HermesError("invalid_params", `unknown event kind ${JSON.stringify(e.kind)} at seq ${e.seq}`);
  return { ...e, kind: e.kind };
}

export function toWirePage(page: LogPage, packed: boolean): WireLogPage {
  return {
    room_id: page.room_id,
    events: packed ? [] : page.events.map(toWireEvent),
    packed_events: packed ? packEvents(page.events) : Buffer.alloc(0),
    cursor: page.cursor,
    latest_seq: page.latest_seq,
    has_more: page.has_more,
    authority: { ...page.authority },
    lineage: page.lineage.map((entry) => ({ ...entry })),
    prev: page.prev === null ? undefined : { ...page.prev },
  };
}

/** The JSON array of a packed page: the tuples' JSON texts the store read, joined as they are. */
export function packedPageBytes(page: PackedLogPage): Buffer {
  const texts = new Array<string>(page.packed.length);
  for (let i = 0; i < texts.length; i++) texts[i] = page.packed[i]![2];
  return Buffer.from(`[${texts.join(",")}]`, "utf8");
}

/** A page whose events the store read as packed tuples: serialised as they are. */
export function toWirePackedPage(page: PackedLogPage): WireLogPage {
  return {
    room_id: page.room_id,
    events: [],
    packed_events: packedPageBytes(page),
    cursor: page.cursor,
    latest_seq: page.latest_seq,
    has_more: page.has_more,
    authority: { ...page.authority },
    lineage: page.lineage.map((entry) => ({ ...entry })),
    prev: page.prev === null ? undefined : { ...page.prev },
  };
}

/** Either kind of page to the wire (a packed page stays packed). */
export function toWireAnyPage(page: LogPage | PackedLogPage): WireLogPage {
  return "packed" in page ? toWirePackedPage(page) : toWirePage(page, false);
}

/** A page received over gRPC, in the core's shape (packed or not). */
export function fromWirePage(page: WireLogPage): LogPage {
  const events = page.packed_events.length > 0 ? unpackEvents(page.room_id, page.packed_events) : page.events.map(fromWireEvent);
  return {
    room_id: page.room_id,
    events,
    cursor: page.cursor,
    latest_seq: page.latest_seq,
    has_more: page.has_more,
    authority: page.authority ? { gateway_id: page.authority.gateway_id, epoch: page.authority.epoch } : { gateway_id: "", epoch: 0 },
    lineage: page.lineage.map((entry): LineageEntry => ({ epoch: entry.epoch, gateway_id: entry.gateway_id, start_seq: entry.start_seq })),
    prev: page.prev ? { seq: page.prev.seq, epoch: page.prev.epoch, hash: page.prev.hash } : null,
  };
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

export function toJsonPage(page: LogPage) {
  return { ...page, events: page.events.map(toJsonEvent) };
}

export function optionalAuthority(a: { gateway_id: string; epoch: number } | undefined): Authority | undefined {
  return a && a.gateway_id !== "" && a.epoch > 0 ? { gateway_id: a.gateway_id, epoch: a.epoch } : undefined;
}
