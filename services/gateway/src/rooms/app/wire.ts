import { HermesError } from "@hermes/common";
import type { LogPage as WireLogPage, RoomEvent as WireRoomEvent } from "@hermes/proto/hermes/v1/rooms";
import {
  encodeTuples,
  isEventKind,
  type LineageEntry,
  type LogPage,
  packedBytes,
  type RoomEvent,
  runOfPackedPage,
  tuplesToEvents,
  utf8Text,
} from "../core/index.js";

/**
 * The packed page encoding, and pages a replica receives over gRPC (or the relay tunnel) back into
 * the core's types. The packed encoding is the lean replication form: one UTF-8 JSON array of
 * tuples instead of thousands of protobuf messages, which V8 decodes in one native call. What the
 * room methods answer in each transport's form is rooms/api/wire.ts.
 */

export function packEvents(events: readonly RoomEvent[]): Buffer {
  return packedBytes(events.length > 0 ? [encodeTuples(events)] : []);
}

/** Decodes packed events, checking every field's type (a remote page is untrusted input). */
export function unpackEvents(roomId: string, packed: Uint8Array): RoomEvent[] {
  return unpackPage(roomId, packed).events;
}

/** The events of packed bytes and the text they were decoded from. */
function unpackPage(roomId: string, packed: Uint8Array): { events: RoomEvent[]; text: string } {
  if (packed.length === 0) return { events: [], text: "" };
  const text = utf8Text(packed);
  let tuples: unknown;
  try {
    tuples = JSON.parse(text);
  } catch {
    throw new HermesError("invalid_params", "malformed packed page: not JSON");
  }
  return { events: tuplesToEvents(roomId, tuples), text };
}

export function fromWireEvent(e: WireRoomEvent): RoomEvent {
  if (!isEventKind(e.kind)) throw new HermesError("invalid_params", `unknown event kind ${JSON.stringify(e.kind)} at seq ${e.seq}`);
  return { ...e, kind: e.kind };
}

/** A page received over gRPC, in the core's shape (packed or not). */
export function fromWirePage(page: WireLogPage): LogPage {
  const packed = page.packed_events.length > 0;
  const { events, text } = packed ? unpackPage(page.room_id, page.packed_events) : { events: page.events.map(fromWireEvent), text: "" };
  return {
    room_id: page.room_id,
    events,
    cursor: page.cursor,
    latest_seq: page.latest_seq,
    has_more: page.has_more,
    authority: page.authority ? { gateway_id: page.authority.gateway_id, epoch: page.authority.epoch } : { gateway_id: "", epoch: 0 },
    lineage: page.lineage.map((entry): LineageEntry => ({ epoch: entry.epoch, gateway_id: entry.gateway_id, start_seq: entry.start_seq })),
    prev: page.prev ? { seq: page.prev.seq, epoch: page.prev.epoch, hash: page.prev.hash } : null,
    // The bytes the events came from: a replica stores them as they are (after checking them).
    tuples: packed && events.length > 0 ? runOfPackedPage(page.packed_events, events, text) : undefined,
  };
}
