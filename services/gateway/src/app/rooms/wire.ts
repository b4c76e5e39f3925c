import { HermesError } from "@hermes/common";
import type { LogPage as WireLogPage, RoomEvent as WireRoomEvent } from "@hermes/proto/hermes/v1/rooms";
import { type EventKind, isEventKind, type LineageEntry, type LogPage, type PackedEvent, type RoomEvent } from "../../core/rooms/index.js";

/**
 * The packed page encoding, and pages a replica receives over gRPC (or the relay tunnel) back into
 * the core's types. The packed encoding is the lean replication form: one UTF-8 JSON array of
 * tuples instead of thousands of protobuf messages, which V8 decodes in one native call. What the
 * room methods answer in each transport's form is api/rooms/wire.ts.
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

export function fromWireEvent(e: WireRoomEvent): RoomEvent {
  if (!isEventKind(e.kind)) throw new HermesError("invalid_params", `unknown event kind ${JSON.stringify(e.kind)} at seq ${e.seq}`);
  return { ...e, kind: e.kind };
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
