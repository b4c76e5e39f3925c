import { HermesError } from "@hermes/common/pure";
import { utf8Bytes } from "./canonical-json.js";
import { DEFAULT_LOG_LIMIT, DEFAULT_PAGE_MAX_BYTES, MIN_PAGE_MAX_BYTES } from "./limits.js";
import { formatAuthority, maxEpoch } from "./lineage.js";
import { sliceRun, tupleBytes } from "./log-segment.js";
import { refusal } from "./refusal.js";
import type { LogPage, PackedLogPage, PrevPointer, RoomEvent, RoomState, TupleRun } from "./types.js";
import { type Checked, checkLogRead, type LogRead } from "./validation.js";

export interface LogReadParams {
  since_seq?: number;
  limit?: number;
  max_bytes?: number;
}

export interface LogReadOptions {
  /** Most events a page may hold (replication pages hold more). */
  maxLimit?: number;
  /**
   * Bytes the whole answer may take, when less than a page's usual room (a read in a JSON-RPC
   * batch gets what the batch's answer has left): a valid max_bytes above that is lowered to it, so
   * the read asks for less instead of being built whole and then refused as payload_too_large.
   */
  answerBytes?: number | undefined;
}

/** What an answer holds besides its page's events (ids, seqs, the authority): under a KiB. */
const ANSWER_FRAME_BYTES = 1024;

/**
 * Checks `groups.log` params against the room and applies defaults. The store then reads the event
 * at `since_seq` (for `prev`, when since_seq > 0) and up to `limit` events after it, and calls
 * buildLogPage. `since_seq` beyond the log is refused with `cursor_conflict` and `data.latest_seq`,
 * so a replica that is ahead of a restored authority learns where the authority really ends.
 *
 * A demoted gateway that knows its new authority but not yet that authority's lineage refuses
 * every read with `not_authority` naming it, whatever the cursor: its pages would name an authority
 * their lineage does not show (a replica would quarantine them), and a `cursor_conflict` would only
 * send the reader round again to the same refusal.
 */
export function planLogRead(state: RoomState, params: LogReadParams, options: LogReadOptions = {}): Checked<LogRead> {
  if (state.role === "replica" && state.authority.epoch > maxEpoch(state.lineage) && state.last_seq > 0) {
    return {
      ok: false,
      refusal: refusal(
        "not_authority",
        `this gateway was demoted in favour of ${formatAuthority(state.authority)} and has not replicated its log yet; read from there`,
        { authority: { ...state.authority } },
      ),
    };
  }
  const checked = checkLogRead(
    {
      since_seq: params.since_seq ?? 0,
      limit: params.limit ?? DEFAULT_LOG_LIMIT,
      max_bytes: params.max_bytes ?? DEFAULT_PAGE_MAX_BYTES,
    },
    options.maxLimit,
  );
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
  const { answerBytes } = options;
  if (answerBytes === undefined) return checked;
  // A page holds at least one event, so an answer with no room left is still refused as too large.
  const maxBytes = Math.max(MIN_PAGE_MAX_BYTES, Math.min(checked.value.max_bytes, answerBytes - ANSWER_FRAME_BYTES));
  return { ok: true, value: { ...checked.value, max_bytes: maxBytes } };
}

/** Bytes of the JSON object keys, quotes, colons and commas of an event; the values are added per event. */
const EVENT_JSON_FRAME_BYTES = utf8Bytes(
  JSON.stringify({ room_id: "", seq: 0, event_id: "", kind: "", actor_json: "", epoch: 0, payload_json: "", created_at: "", hash: "" }),
);

/**
 * Bytes an event takes on the wire (its JSON), the unit of the page byte budget. Summed per field
 * instead of serialising the event object: this runs for every event of every page, and a
 * replication page holds thousands. Exact: ids, kinds, times and hashes hold nothing JSON escapes
 * (validation), and the two JSON texts are measured as JSON strings.
 */
export function eventWireBytes(event: RoomEvent): number {
  return (
    EVENT_JSON_FRAME_BYTES -
    6 +
    digits(event.seq) +
    digits(event.epoch) +
    utf8Bytes(event.room_id) +
    utf8Bytes(event.event_id) +
    event.kind.length +
    utf8Bytes(JSON.stringify(event.actor_json)) +
    utf8Bytes(JSON.stringify(event.payload_json)) +
    event.created_at.length +
    event.hash.length
  );
}

function digits(value: number): number {
  return String(value).length;
}

/**
 * Bytes of a packed tuple's JSON text that eventWireBytes does not count: the two brackets, the
 * seven commas and the quotes of event_id, kind, created_at and hash. The rest of the tuple is the
 * same values eventWireBytes sums (actor_json and payload_json as JSON strings).
 */
const PACKED_TUPLE_FRAME_BYTES = 2 + 7 + 4 * 2;

/**
 * The wire size of a packed event by the same measure as eventWireBytes, from the UTF-8 size of its
 * tuple's JSON text (its room id is the page's). Exact for the same reason eventWireBytes is (ids,
 * kinds, times and hashes hold nothing JSON escapes) when the tuple is written as JSON.stringify
 * writes it, as every gateway does.
 */
export function packedJsonWireBytes(roomId: string, jsonBytes: number): number {
  return EVENT_JSON_FRAME_BYTES - 6 + utf8Bytes(roomId) - PACKED_TUPLE_FRAME_BYTES + jsonBytes;
}

/**
 * The events of a page out of what the store read in seq order from `read.since_seq + 1`: at most
 * `read.limit` events and at most `read.max_bytes` of event JSON, but always at least one event when
 * one exists, so a reader always makes progress. Checks that the log is dense.
 */
function pageWindow<T>(state: RoomState, read: LogRead, items: readonly T[], seqOf: (item: T) => number, sizeOf: (item: T) => number): T[] {
  const page: T[] = [];
  let bytes = 0;
  for (const item of items) {
    if (page.length >= read.limit) break;
    const expected = read.since_seq + page.length + 1;
    const seq = seqOf(item);
    if (seq !== expected) {
      throw new HermesError("database_corrupt", `room ${state.room_id} log is not dense: expected seq ${expected}, read ${seq}`);
    }
    if (seq > state.last_seq) break;
    const size = sizeOf(item);
    if (page.length > 0 && bytes + size > read.max_bytes) break;
    page.push(item);
    bytes += size;
  }
  return page;
}

function checkPrev(state: RoomState, read: LogRead, prevEvent: PrevPointer | null): void {
  if (read.since_seq > 0 && (prevEvent === null || prevEvent.seq !== read.since_seq)) {
    throw new HermesError("internal", `the store passed no event at seq ${read.since_seq} for the page of room ${state.room_id}`);
  }
}

function pageFrame(state: RoomState, read: LogRead, prevEvent: PrevPointer | null, cursor: number): Omit<LogPage, "events"> {
  return {
    room_id: state.room_id,
    cursor,
    latest_seq: state.last_seq,
    has_more: cursor < state.last_seq,
    authority: { ...state.authority },
    lineage: state.lineage.map((entry) => ({ ...entry })),
    prev: prevEvent === null || read.since_seq === 0 ? null : { seq: prevEvent.seq, epoch: prevEvent.epoch, hash: prevEvent.hash },
  };
}

/**
 * Builds a page from events the store read in seq order from `read.since_seq + 1` (see pageWindow
 * for the bounds). `prev` is the stored event at since_seq.
 */
export function buildLogPage(state: RoomState, read: LogRead, prevEvent: PrevPointer | null, events: readonly RoomEvent[]): LogPage {
  checkPrev(state, read, prevEvent);
  for (const event of events) {
    if (event.room_id !== state.room_id) {
      throw new HermesError("database_corrupt", `room ${state.room_id} log holds an event of room ${event.room_id}`);
    }
  }
  const page = pageWindow(state, read, events, (e) => e.seq, eventWireBytes);
  const cursor = page.length > 0 ? page[page.length - 1]!.seq : read.since_seq;
  return { ...pageFrame(state, read, prevEvent, cursor), events: page };
}

/**
 * The same page with packed events (a replication page): same bounds, same fields. `runs` are the
 * store's segments in seq order from the one holding `read.since_seq + 1` (the first may start
 * before it); the page keeps the parts of them it holds, without decoding a single event.
 */
export function buildPackedLogPage(
  state: RoomState,
  read: LogRead,
  prevEvent: PrevPointer | null,
  runs: readonly TupleRun[],
): PackedLogPage {
  checkPrev(state, read, prevEvent);
  const sizeOffset = packedJsonWireBytes(state.room_id, 0);
  const last = Math.min(state.last_seq, read.since_seq + read.limit);
  const packed: TupleRun[] = [];
  let count = 0;
  let bytes = 0;
  let next = read.since_seq + 1;
  for (const run of runs) {
    if (next > last) break;
    const from = next - run.first_seq;
    if (from < 0 || (count > 0 && from !== 0)) {
      throw new HermesError(
        "database_corrupt",
        `room ${state.room_id} log is not dense: expected seq ${next}, read a segment from ${run.first_seq}`,
      );
    }
    let i = from;
    for (; i < run.ends.length && run.first_seq + i <= last; i++) {
      const size = sizeOffset + tupleBytes(run, i);
      if (count > 0 && bytes + size > read.max_bytes) break;
      count++;
      bytes += size;
    }
    if (i > from) packed.push(sliceRun(run, from, i));
    next = run.first_seq + i;
    if (i < run.ends.length) break;
  }
  if (count === 0 && read.since_seq < state.last_seq) {
    throw new HermesError("database_corrupt", `room ${state.room_id} log has no event at seq ${read.since_seq + 1}`);
  }
  return { ...pageFrame(state, read, prevEvent, read.since_seq + count), packed };
}
