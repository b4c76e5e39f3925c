import { HermesError } from "@hermes/common";
import { utf8Bytes } from "./canonical-json.js";
import { DEFAULT_LOG_LIMIT, DEFAULT_PAGE_MAX_BYTES } from "./limits.js";
import { refusal } from "./refusal.js";
import type { LogPage, RoomEvent, RoomState } from "./types.js";
import { type Checked, checkLogRead, type LogRead } from "./validation.js";

export interface LogReadParams {
  since_seq?: number;
  limit?: number;
  max_bytes?: number;
}

/**
 * Checks `groups.log` params against the room and applies defaults. The store then reads the event
 * at `since_seq` (for `prev`, when since_seq > 0) and up to `limit` events after it, and calls
 * buildLogPage. `since_seq` beyond the log is refused with `cursor_conflict` and `data.latest_seq`,
 * so a replica that is ahead of a restored authority learns where the authority really ends.
 */
export function planLogRead(state: RoomState, params: LogReadParams): Checked<LogRead> {
  const checked = checkLogRead({
    since_seq: params.since_seq ?? 0,
    limit: params.limit ?? DEFAULT_LOG_LIMIT,
    max_bytes: params.max_bytes ?? DEFAULT_PAGE_MAX_BYTES,
  });
  if (!checked.ok) return checked;
  if (checked.value.since_seq > state.last_seq) {
    return {
      ok: false,
      refusal: refusal(
        "cursor_conflict",
        `since_seq ${checked.value.since_seq} is beyond the end of room ${state.room_id} (latest_seq ${state.last_seq}); read from ${state.last_seq} or earlier`,
        {
          since_seq: checked.value.since_seq,
          latest_seq: state.last_seq,
          authority: { ...state.authority },
          lineage: state.lineage.map((entry) => ({ ...entry })),
        },
      ),
    };
  }
  return checked;
}

/** Bytes an event takes on the wire (its JSON), the unit of the page byte budget. */
export function eventWireBytes(event: RoomEvent): number {
  return utf8Bytes(JSON.stringify(event));
}

/**
 * Builds a page from events the store read in seq order from `read.since_seq + 1`. The page holds at
 * most `read.limit` events and at most `read.max_bytes` of event JSON, but always at least one event
 * when one exists, so a reader always makes progress. `prev` is the stored event at since_seq.
 */
export function buildLogPage(state: RoomState, read: LogRead, prevEvent: RoomEvent | null, events: readonly RoomEvent[]): LogPage {
  if (read.since_seq > 0 && (prevEvent === null || prevEvent.seq !== read.since_seq)) {
    throw new HermesError("internal", `the store passed no event at seq ${read.since_seq} for the page of room ${state.room_id}`);
  }
  const page: RoomEvent[] = [];
  let bytes = 0;
  for (const event of events) {
    if (page.length >= read.limit) break;
    const expected = read.since_seq + page.length + 1;
    if (event.seq !== expected || event.room_id !== state.room_id) {
      throw new HermesError("database_corrupt", `room ${state.room_id} log is not dense: expected seq ${expected}, read ${event.seq}`);
    }
    if (event.seq > state.last_seq) break;
    const size = eventWireBytes(event);
    if (page.length > 0 && bytes + size > read.max_bytes) break;
    page.push(event);
    bytes += size;
  }
  const cursor = page.length > 0 ? page[page.length - 1]!.seq : read.since_seq;
  return {
    room_id: state.room_id,
    events: page,
    cursor,
    latest_seq: state.last_seq,
    has_more: cursor < state.last_seq,
    authority: { ...state.authority },
    lineage: state.lineage.map((entry) => ({ ...entry })),
    prev: prevEvent === null || read.since_seq === 0 ? null : { seq: prevEvent.seq, epoch: prevEvent.epoch, hash: prevEvent.hash },
  };
}
