import { HermesError } from "@hermes/common/pure";
import { copyBytes, SAFE_INTEGER_MAX_BYTES, type TextBuffer, textBuffer, writeSafeInteger, writeShortText } from "./text-buffer.js";
import type { PackedEvent, RoomEvent, TupleRun } from "./types.js";
import { isEventKind } from "./validation.js";

/**
 * The encoding of a room log as the store keeps it and a replication page carries it: every event
 * is its PackedEvent tuple `[seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash]`
 * as JSON text (what JSON.stringify writes), and contiguous events are their texts joined by commas
 * (a TupleRun, with the byte offset where each tuple ends). A packed page is `[` + run + `]`, so
 * the authority serves stored bytes as they are and a replica stores the bytes it received.
 *
 * A segment (one row of room_log_segments) is a run of up to SEGMENT_MAX_EVENTS events and
 * about SEGMENT_MAX_BYTES. Small commits (the live tail: one event per commit) write small
 * segments ("fragments"); once the fragments at the end of a log add up to a sealed segment's
 * size they are rewritten as one (so an event is written at most twice, and a log is read in
 * few rows).
 */

/** Most events in one segment. */
export const SEGMENT_MAX_EVENTS = 1024;
/** Segments are cut near this many bytes of tuples (one event may exceed it alone). */
export const SEGMENT_MAX_BYTES = 256 * 1024;
/** A segment with fewer events and bytes than these is a fragment: it is merged with its neighbours later. */
export const SEGMENT_SEAL_EVENTS = SEGMENT_MAX_EVENTS / 2;
export const SEGMENT_SEAL_BYTES = SEGMENT_MAX_BYTES / 2;

const COMMA = 0x2c;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const QUOTE = 0x22;
const SEPARATOR = Uint8Array.of(COMMA);
const OPEN_BRACKET = Uint8Array.of(OPEN);
const CLOSE_BRACKET = Uint8Array.of(CLOSE);
/** `"],[`: where one tuple of a packed page ends and the next begins. */
const TUPLE_BOUNDARY_TEXT = '"],[';
const TUPLE_BOUNDARY = Buffer.from(TUPLE_BOUNDARY_TEXT, "latin1");

export function runCount(run: TupleRun): number {
  return run.ends.length;
}

export function runLastSeq(run: TupleRun): number {
  return run.first_seq + run.ends.length - 1;
}

/** Byte offset where tuple `i` of the run starts. */
export function tupleStart(run: TupleRun, i: number): number {
  return i === 0 ? 0 : run.ends[i - 1]! + 1;
}

/** Size in bytes of tuple `i`'s JSON text. */
export function tupleBytes(run: TupleRun, i: number): number {
  return run.ends[i]! - tupleStart(run, i);
}

export function isFragment(count: number, bytes: number): boolean {
  return count < SEGMENT_SEAL_EVENTS && bytes < SEGMENT_SEAL_BYTES;
}

/**
 * The events as a run: each tuple written by JSON.stringify (the canonical encoding). The tuples
 * are stringified as one array and its ends found in the text (see locateTuples): one call and a
 * third less garbage than a string per tuple. Events whose text that search cannot cut (a hash
 * that does not end in a hex digit) are encoded tuple by tuple.
 */
export function encodeTuples(events: readonly RoomEvent[]): TupleRun {
  const count = events.length;
  const tuples = new Array<PackedEvent>(count);
  for (let i = 0; i < count; i++) {
    const e = events[i]!;
    tuples[i] = [e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash];
  }
  const text = JSON.stringify(tuples);
  const ends = tupleEndsInText(text, count);
  if (ends === null) return encodeEachTuple(events);
  const size = Buffer.byteLength(text, "utf8");
  if (size !== text.length) utf16EndsToUtf8(text, ends);
  const page = Buffer.allocUnsafe(size);
  page.write(text, 0, "utf8");
  return { first_seq: events[0]!.seq, body: page.subarray(1, size - 1), ends };
}

/** `"{\"text\":\"`: how a quoted message payload starts. */
const QUOTED_MESSAGE_HEAD = Buffer.from('"{\\"text\\":\\"', "latin1");
/** `\"}"`: how it ends. */
const QUOTED_MESSAGE_TAIL = Buffer.from('\\"}"', "latin1");

/**
 * Writes a run tuple by tuple while a group commit plans its events, the same bytes as
 * encodeTuples, straight into the run's buffer: whoever plans an event already holds what its
 * tuple needs (a message's text, known to need no escape; one kind, actor, epoch and clock reading
 * for many events), and knowing where each tuple ends there is no boundary to search for.
 *
 * For events as the core plans them: seq and epoch are safe integers, the event id passed checkId
 * and the hash is a hex digest (neither has anything to escape).
 */
export class RunWriter {
  private body: TextBuffer = EMPTY;
  private ends: Uint32Array;
  private at = 0;
  private count = 0;
  private firstSeq = 0;
  /**
   * `",` + kind, actor_json quoted, epoch + `,` as UTF-8: what follows the event id, for the last
   * kind, actor_json and epoch. Pieces that repeat are kept as bytes: copying them costs a third
   * of a call into Node's string writer.
   */
  private kind: string | undefined;
  private actorJson: string | undefined;
  private epoch: number | undefined;
  private middle: Uint8Array = new Uint8Array(0);
  /** `,` + created_at quoted + `,"` as UTF-8: what follows the payload, for the last created_at. */
  private createdAt: string | undefined;
  private created: Uint8Array = new Uint8Array(0);

  /** `expected`: how many tuples will be added (a hint for the first allocation). */
  constructor(private readonly expected = 1) {
    this.ends = new Uint32Array(Math.max(1, expected));
  }

  /**
   * Appends the tuple of `event`, the next seq of the run. `plainText`, when given, is the text of
   * a payload that is exactly `{"text":"<plainText>"}` (nothing in it needed escaping).
   */
  add(event: RoomEvent, plainText?: string): void {
    if (this.count === 0) this.firstSeq = event.seq;
    else if (event.seq !== this.firstSeq + this.count) {
      throw new HermesError("internal", `tuple of seq ${event.seq} does not continue the run at seq ${this.firstSeq + this.count - 1}`);
    }
    if (event.kind !== this.kind || event.actor_json !== this.actorJson || event.epoch !== this.epoch) {
      this.kind = event.kind;
      this.actorJson = event.actor_json;
      this.epoch = event.epoch;
      this.middle = Buffer.from(
        `",${JSON.stringify(event.kind)},${JSON.stringify(event.actor_json)},${JSON.stringify(event.epoch)},`,
        "utf8",
      );
    }
    if (event.created_at !== this.createdAt) {
      this.createdAt = event.created_at;
      this.created = Buffer.from(`,${JSON.stringify(event.created_at)},"`, "utf8");
    }
    const payload = plainText ?? JSON.stringify(event.payload_json);
    // Bytes already encoded: the seq, `,[,"` before the id and `"]` at the end, and the pieces kept as bytes.
    const encoded =
      SAFE_INTEGER_MAX_BYTES +
      6 +
      this.middle.length +
      this.created.length +
      (plainText === undefined ? 0 : QUOTED_MESSAGE_HEAD.length + QUOTED_MESSAGE_TAIL.length);
    const units = event.event_id.length + payload.length + event.hash.length;
    // UTF-8 takes at most 3 bytes per UTF-16 unit, and one when the text is ASCII (the usual).
    this.reserve(encoded + 3 * units, encoded + units);
    const body = this.body;
    let at = this.at;
    if (this.count > 0) body[at++] = COMMA;
    body[at++] = OPEN;
    at = writeSafeInteger(body, at, event.seq);
    body[at++] = COMMA;
    body[at++] = QUOTE;
    at = writeShortText(body, at, event.event_id);
    at = copyBytes(body, at, this.middle);
    if (plainText === undefined) at += body.utf8Write(payload, at);
    else {
      at = copyBytes(body, at, QUOTED_MESSAGE_HEAD);
      at += body.utf8Write(plainText, at);
      at = copyBytes(body, at, QUOTED_MESSAGE_TAIL);
    }
    at = copyBytes(body, at, this.created);
    at += body.utf8Write(event.hash, at);
    body[at++] = QUOTE;
    body[at++] = CLOSE;
    if (this.count === this.ends.length) {
      const ends = new Uint32Array(this.ends.length * 2);
      ends.set(this.ends);
      this.ends = ends;
    }
    this.ends[this.count++] = at;
    this.at = at;
  }

  /** The run of the tuples added (undefined when none was). */
  finish(): TupleRun | undefined {
    if (this.count === 0) return undefined;
    return { first_seq: this.firstSeq, body: this.body.subarray(0, this.at), ends: this.ends.subarray(0, this.count) };
  }

  /**
   * Room for a tuple of at most `most` bytes; when the buffer grows, it makes room for the
   * tuples still expected at `likely` bytes each.
   */
  private reserve(most: number, likely: number): void {
    const needed = this.at + most;
    if (needed <= this.body.length) return;
    const later = Math.max(0, this.expected - this.count - 1);
    const grown = textBuffer(Math.max(needed + later * likely, this.body.length * 2));
    this.body.copy(grown, 0, 0, this.at);
    this.body = grown;
  }
}

const EMPTY = textBuffer(0);

/** Turns ends in UTF-16 units of `text` (a packed page's run coordinates) into UTF-8 byte offsets, in place. */
function utf16EndsToUtf8(text: string, ends: Uint32Array): void {
  let unitsBefore = 0;
  let bytesBefore = 0;
  for (let i = 0; i < ends.length; i++) {
    // Run coordinates start after the page's opening bracket.
    bytesBefore += Buffer.byteLength(text.substring(1 + unitsBefore, 1 + ends[i]!), "utf8");
    unitsBefore = ends[i]!;
    ends[i] = bytesBefore;
  }
}

function encodeEachTuple(events: readonly RoomEvent[]): TupleRun {
  const texts = new Array<string>(events.length);
  let size = 0;
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    const text = JSON.stringify([e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash]);
    texts[i] = text;
    // An upper bound of the UTF-8 size (3 bytes per UTF-16 unit at most); trimmed below.
    size += text.length * 3 + 1;
  }
  const body = Buffer.allocUnsafe(size);
  const ends = new Uint32Array(events.length);
  let at = 0;
  for (let i = 0; i < texts.length; i++) {
    if (i > 0) body[at++] = COMMA;
    at += body.write(texts[i]!, at, "utf8");
    ends[i] = at;
  }
  return { first_seq: events[0]?.seq ?? 0, body: body.subarray(0, at), ends };
}

/** A packed page's bytes: `[` + the runs joined by commas + `]`. */
export function packedBytes(runs: readonly TupleRun[]): Buffer {
  const parts: Uint8Array[] = [OPEN_BRACKET];
  for (const run of runs) {
    if (run.ends.length === 0) continue;
    if (parts.length > 1) parts.push(SEPARATOR);
    parts.push(run.body);
  }
  parts.push(CLOSE_BRACKET);
  return Buffer.concat(parts);
}

/** Tuples `from`..`to − 1` of the run as a run of their own (the bytes are shared, not copied). */
export function sliceRun(run: TupleRun, from: number, to: number): TupleRun {
  if (from === 0 && to === run.ends.length) return run;
  const start = tupleStart(run, from);
  const ends = run.ends.slice(from, to);
  if (start > 0) for (let i = 0; i < ends.length; i++) ends[i] = ends[i]! - start;
  return { first_seq: run.first_seq + from, body: run.body.subarray(start, to > from ? run.ends[to - 1] : start), ends };
}

/** Contiguous runs as one (the second continues the first, and so on). */
export function concatRuns(runs: readonly TupleRun[]): TupleRun {
  const nonEmpty = runs.filter((r) => r.ends.length > 0);
  if (nonEmpty.length === 1) return nonEmpty[0]!;
  let count = 0;
  for (const r of nonEmpty) count += r.ends.length;
  const ends = new Uint32Array(count);
  const parts: Uint8Array[] = [];
  let at = 0;
  let k = 0;
  let expected = nonEmpty[0]?.first_seq ?? 0;
  for (const r of nonEmpty) {
    if (r.first_seq !== expected)
      throw new HermesError("internal", `runs are not contiguous: expected seq ${expected}, got ${r.first_seq}`);
    if (parts.length > 0) {
      parts.push(SEPARATOR);
      at += 1;
    }
    parts.push(r.body);
    for (let i = 0; i < r.ends.length; i++) ends[k++] = r.ends[i]! + at;
    at += r.body.length;
    expected += r.ends.length;
  }
  return { first_seq: nonEmpty[0]?.first_seq ?? 0, body: Buffer.concat(parts, at), ends };
}

/**
 * Cuts a run into segments: at most SEGMENT_MAX_EVENTS each, and pieces of about equal size when
 * the run is over SEGMENT_MAX_BYTES (so a cut never leaves a tiny segment behind).
 */
export function cutSegments(run: TupleRun): TupleRun[] {
  const count = run.ends.length;
  const bytes = run.body.length;
  const pieces = Math.max(Math.ceil(count / SEGMENT_MAX_EVENTS), Math.ceil(bytes / SEGMENT_MAX_BYTES), 1);
  if (pieces === 1) return [run];
  const target = bytes / pieces;
  const out: TupleRun[] = [];
  for (let from = 0; from < count; ) {
    const share = target * (out.length + 1);
    let to = from + 1;
    while (to < count && to - from < SEGMENT_MAX_EVENTS && run.ends[to - 1]! < share) to++;
    out.push(sliceRun(run, from, to));
    from = to;
  }
  return out;
}

function malformed(detail: string): HermesError {
  return new HermesError("invalid_params", `malformed packed page: ${detail}`);
}

/** Parsed tuples as events, checking every field's type (a remote page is untrusted input). */
export function tuplesToEvents(roomId: string, tuples: unknown): RoomEvent[] {
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
      kind: t[2],
      actor_json: t[3],
      epoch: t[4],
      payload_json: t[5],
      created_at: t[6],
      hash: t[7],
    };
  }
  return events;
}

/**
 * UTF-8 bytes as a string. ASCII (the usual log) is copied as Latin-1, which is the same string for
 * those bytes and skips the UTF-8 decoder: a replica decodes every page it receives.
 */
export function utf8Text(bytes: Uint8Array, start = 0, end = bytes.length): string {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start);
  const latin1 = view.toString("latin1");
  // Latin-1 text is its bytes' UTF-8 exactly when it has no character above U+007F.
  return Buffer.byteLength(latin1, "utf8") === latin1.length ? latin1 : view.toString("utf8");
}

/** Tuples `from`..`to − 1` of a run as events (one JSON.parse for all of them). */
export function decodeRun(roomId: string, run: TupleRun, from = 0, to = run.ends.length): RoomEvent[] {
  if (to <= from) return [];
  const end = run.ends[to - 1]!;
  // Offsets past the text would read the bytes next to it.
  if (end > run.body.length) throw new HermesError("database_corrupt", `a stored segment of room ${roomId} has offsets past its text`);
  const text = utf8Text(run.body, tupleStart(run, from), end);
  let tuples: unknown;
  try {
    tuples = JSON.parse(`[${text}]`);
  } catch {
    throw new HermesError("database_corrupt", `a stored segment of room ${roomId} holds text that is not JSON`);
  }
  const events = tuplesToEvents(roomId, tuples);
  for (let i = 0; i < events.length; i++) {
    if (events[i]!.seq !== run.first_seq + from + i) {
      throw new HermesError("database_corrupt", `a stored segment of room ${roomId} is not dense at seq ${run.first_seq + from + i}`);
    }
  }
  return events;
}

function isLowerHex(byte: number): boolean {
  return (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66);
}

/**
 * Where each tuple ends in a packed page's bytes (`[t0,t1,…]`), relative to the run inside the
 * brackets; null when the bytes are not laid out that way (whitespace between tuples, a hash that
 * does not end in a hex digit): the caller then encodes the decoded events itself.
 *
 * Exact for any text that JSON.parse accepted as an array of 8-tuples ending in a string: a `"`
 * right after a hex digit cannot be inside a string (there it would be escaped, `\"`) nor open one
 * (a string never directly follows a number or literal), so it closes a string; the `]` after it
 * closes an array whose last element is a string, which only a tuple is. So every `"],[` after a
 * hex digit is the end of a tuple, and counting them checks that none was missed.
 *
 * `text`, when given, is the page's bytes decoded as UTF-8; when it has exactly one UTF-16 unit
 * per byte (ASCII, the usual page) its offsets are the bytes' offsets, and the search runs on the
 * string, which is cheaper than on the bytes.
 */
export function locateTuples(packed: Uint8Array, count: number, text?: string): Uint32Array | null {
  if (text !== undefined && text.length === packed.length) return tupleEndsInText(text, count);
  const n = packed.length;
  if (count === 0 || n < 4 || packed[0] !== OPEN || packed[1] !== OPEN || packed[n - 1] !== CLOSE || packed[n - 2] !== CLOSE) return null;
  if (packed[n - 3] !== QUOTE || !isLowerHex(packed[n - 4]!)) return null;
  const bytes = Buffer.from(packed.buffer, packed.byteOffset, packed.byteLength);
  const ends = new Uint32Array(count);
  let found = 0;
  for (let at = 1; ; ) {
    const m = bytes.indexOf(TUPLE_BOUNDARY, at);
    if (m < 0) break;
    if (isLowerHex(bytes[m - 1]!)) {
      if (found === count - 1) return null;
      // In run coordinates (after the opening bracket): the tuple ends after `"]`.
      ends[found++] = m + 1;
    }
    at = m + 3;
  }
  if (found !== count - 1) return null;
  ends[count - 1] = n - 2;
  return ends;
}

/** locateTuples on a page's text: the ends in UTF-16 units (which are bytes when the text is ASCII). */
function tupleEndsInText(text: string, count: number): Uint32Array | null {
  const n = text.length;
  if (count === 0 || n < 4 || text.charCodeAt(0) !== OPEN || text.charCodeAt(1) !== OPEN) return null;
  if (text.charCodeAt(n - 1) !== CLOSE || text.charCodeAt(n - 2) !== CLOSE) return null;
  if (text.charCodeAt(n - 3) !== QUOTE || !isLowerHex(text.charCodeAt(n - 4))) return null;
  const ends = new Uint32Array(count);
  let found = 0;
  for (let at = 1; ; ) {
    const m = text.indexOf(TUPLE_BOUNDARY_TEXT, at);
    if (m < 0) break;
    if (isLowerHex(text.charCodeAt(m - 1))) {
      if (found === count - 1) return null;
      ends[found++] = m + 1;
    }
    at = m + 3;
  }
  if (found !== count - 1) return null;
  ends[count - 1] = n - 2;
  return ends;
}

/**
 * The run of a packed page's events as the page's bytes hold them, or (when they are laid out
 * otherwise) as encodeTuples writes them. `events` are what the bytes decoded to (from `text`, when given).
 */
export function runOfPackedPage(packed: Uint8Array, events: readonly RoomEvent[], text?: string): TupleRun {
  const ends = events.length > 0 ? locateTuples(packed, events.length, text) : null;
  if (ends === null) return encodeTuples(events);
  return { first_seq: events[0]!.seq, body: packed.subarray(1, packed.length - 1), ends };
}

const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** The ends of a run as stored: unsigned 32-bit little-endian integers. */
export function endsToBytes(ends: Uint32Array): Buffer {
  if (LITTLE_ENDIAN) return Buffer.from(ends.buffer, ends.byteOffset, ends.byteLength);
  const out = Buffer.alloc(ends.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < ends.length; i++) view.setUint32(i * 4, ends[i]!, true);
  return out;
}

export function endsFromBytes(bytes: Uint8Array): Uint32Array {
  if (bytes.length % 4 !== 0) throw new HermesError("database_corrupt", "a stored segment's offsets are not 32-bit integers");
  if (LITTLE_ENDIAN && bytes.byteOffset % 4 === 0) return new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const ends = new Uint32Array(bytes.length / 4);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < ends.length; i++) ends[i] = view.getUint32(i * 4, true);
  return ends;
}
