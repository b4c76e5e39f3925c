import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chatLog } from "../../../test/support/rooms/chat-log.js";
import {
  concatRuns,
  cutSegments,
  decodeRun,
  encodeTuples,
  endsFromBytes,
  endsToBytes,
  locateTuples,
  packedBytes,
  RunWriter,
  runOfPackedPage,
  SEGMENT_MAX_BYTES,
  SEGMENT_MAX_EVENTS,
  sliceRun,
  tupleStart,
  utf8Text,
} from "./log-segment.js";
import type { RoomEvent, TupleRun } from "./types.js";

const NOW = "2026-01-01T00:00:00.000Z";

function log(texts: readonly string[]): RoomEvent[] {
  return chatLog("r", texts, NOW).events;
}

const tupleTexts = (run: TupleRun) =>
  Array.from(run.ends, (_, i) => Buffer.from(run.body).toString("utf8", tupleStart(run, i), run.ends[i]));
const stringified = (events: readonly RoomEvent[]) =>
  events.map((e) => JSON.stringify([e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash]));

// Texts that JSON escapes, that look like tuple boundaries, and that are not ASCII.
const AWKWARD = ['"],[', 'a\\"],["b', "\\", "日本語 😀", "\u2028\u2029", "c0 \u0000\u001f", 'x"]]', '0123456789abcdef"],[', ""];

describe("log segments", () => {
  it("encodes each event's tuple as JSON.stringify writes it, and decodes any slice back", () => {
    const events = log(AWKWARD);
    const run = encodeTuples(events);
    expect(tupleTexts(run)).toEqual(stringified(events));
    expect(Buffer.from(run.body).toString("utf8")).toBe(stringified(events).join(","));
    expect(decodeRun("r", run)).toEqual(events);
    expect(decodeRun("r", run, 3, 6)).toEqual(events.slice(3, 6));
    const slice = sliceRun(run, 2, 7);
    expect(slice.first_seq).toBe(3);
    expect(decodeRun("r", slice)).toEqual(events.slice(2, 7));
    expect(concatRuns([sliceRun(run, 0, 4), sliceRun(run, 4, run.ends.length)])).toEqual({
      ...run,
      body: Buffer.from(run.body),
    });
    expect(() => concatRuns([sliceRun(run, 0, 2), sliceRun(run, 3, 5)])).toThrow(/not contiguous/);
  });

  it("writes a run tuple by tuple with the bytes and ends of encodeTuples", () => {
    const plain = (e: RoomEvent) => {
      const text = (JSON.parse(e.payload_json) as { text?: unknown }).text;
      return typeof text === "string" && e.payload_json === `{"text":"${text}"}` ? text : undefined;
    };
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.constantFrom(...AWKWARD), fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" })), {
          minLength: 1,
          maxLength: 30,
        }),
        fc.array(fc.record({ at: fc.nat(), actor: fc.string(), epoch: fc.nat(), created: fc.string() }), { maxLength: 4 }),
        fc.boolean(),
        (texts, changes, givePlain) => {
          const events = log(texts);
          // Actors, epochs and clock readings that change inside the run (the writer remembers the last ones).
          for (const c of changes) {
            const i = c.at % events.length;
            events[i] = { ...events[i]!, actor_json: JSON.stringify({ id: c.actor, kind: "user" }), epoch: c.epoch, created_at: c.created };
          }
          // Room for one tuple at first: the writer grows its buffer as it goes.
          const writer = new RunWriter(1);
          for (const e of events) writer.add(e, givePlain ? plain(e) : undefined);
          const run = writer.finish()!;
          const expected = encodeTuples(events);
          expect(run.first_seq).toBe(expected.first_seq);
          expect(Array.from(run.ends)).toEqual(Array.from(expected.ends));
          expect(Buffer.from(run.body).equals(Buffer.from(expected.body))).toBe(true);
        },
      ),
    );
    expect(new RunWriter(4).finish()).toBeUndefined();
    const events = log(["a", "b"]);
    const writer = new RunWriter(2);
    writer.add(events[0]!);
    expect(() => writer.add(events[2]!)).toThrow(/does not continue/);
  });

  it("encodes events of any texts and any hashes as JSON.stringify writes each tuple", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.constantFrom(...AWKWARD), fc.string({ unit: "grapheme" })), { minLength: 1, maxLength: 20 }),
        fc.constantFrom("", "ZZ", 'a"],[', "日本", null),
        (texts, oddHash) => {
          const events = log(texts);
          // A hash that does not end in a hex digit (not what the core writes): encoded tuple by tuple.
          if (oddHash !== null) events[events.length - 1] = { ...events[events.length - 1]!, hash: oddHash };
          const run = encodeTuples(events);
          expect(tupleTexts(run)).toEqual(stringified(events));
          expect(Buffer.from(run.body).toString("utf8")).toBe(stringified(events).join(","));
        },
      ),
    );
    expect(encodeTuples([])).toMatchObject({ first_seq: 0, ends: new Uint32Array(0) });
  });

  it("finds every tuple of a packed page in its bytes, whatever the texts hold", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.constantFrom(...AWKWARD), fc.string({ unit: "grapheme" })), { minLength: 0, maxLength: 30 }),
        (texts) => {
          const events = log(texts);
          const packed = packedBytes([encodeTuples(events)]);
          const ends = locateTuples(packed, events.length);
          expect(ends).not.toBeNull();
          // Searching the decoded text finds the same ends (on the string when it is one unit per byte).
          const text = packed.toString("utf8");
          expect(locateTuples(packed, events.length, text)).toEqual(ends);
          const run = runOfPackedPage(packed, events, text);
          expect(run.body.buffer).toBe(packed.buffer); // the page's own bytes, not a copy
          expect(tupleTexts(run)).toEqual(stringified(events));
        },
      ),
    );
  });

  it("falls back to encoding the events when the page's bytes are laid out otherwise", () => {
    const events = log(["a", "b"]);
    const spaced = Buffer.from(
      JSON.stringify(
        stringified(events).map((t) => JSON.parse(t)),
        null,
        1,
      ),
    );
    expect(locateTuples(spaced, events.length)).toBeNull();
    expect(locateTuples(spaced, events.length, spaced.toString("utf8"))).toBeNull();
    expect(tupleTexts(runOfPackedPage(spaced, events))).toEqual(stringified(events));
    // A count that does not match what the bytes hold is no match either.
    const packed = packedBytes([encodeTuples(events)]);
    expect(locateTuples(packed, events.length + 1)).toBeNull();
    expect(locateTuples(packed, events.length - 1)).toBeNull();
  });

  it("searches the decoded text only where its offsets are the bytes' offsets", () => {
    const events = log(['"],[', "plain"]);
    const packed = packedBytes([encodeTuples(events)]);
    const ends = locateTuples(packed, events.length)!;
    // Invalid UTF-8 decodes to one U+FFFD per bad byte: still one unit per byte, same offsets.
    const bad = Buffer.from(packed.toString("latin1").replace("plain", "pl\xffin"), "latin1");
    expect(bad.toString("utf8").length).toBe(bad.length);
    expect(locateTuples(bad, events.length, bad.toString("utf8"))).toEqual(ends);
    // Non-ASCII text is shorter than its bytes: the search runs on the bytes.
    const wideEvents = log(['"],[', "日本"]);
    const wide = packedBytes([encodeTuples(wideEvents)]);
    expect(wide.toString("utf8").length).toBeLessThan(wide.length);
    const wideEnds = locateTuples(wide, wideEvents.length);
    expect(wideEnds).not.toBeNull();
    expect(locateTuples(wide, wideEvents.length, wide.toString("utf8"))).toEqual(wideEnds);
    // A text that is not the page's (another length) is not used.
    expect(locateTuples(packed, events.length, "x")).toEqual(ends);
  });

  it("reads bytes as UTF-8 whether or not they are ASCII, whole or in part", () => {
    const samples = ["plain ascii", "日本語 😀 \u2028", "", "a\u0000\u007f"].map((t) => Buffer.from(t, "utf8"));
    samples.push(Buffer.from([0x61, 0xff, 0x62, 0xe2, 0x82])); // invalid UTF-8: replacement characters, as toString writes them
    for (const bytes of samples) {
      expect(utf8Text(bytes)).toBe(bytes.toString("utf8"));
      if (bytes.length >= 2) expect(utf8Text(bytes, 1, bytes.length - 1)).toBe(bytes.toString("utf8", 1, bytes.length - 1));
    }
    // A view into a larger buffer reads only its own bytes.
    const big = Buffer.from("xx日本yy", "utf8");
    expect(utf8Text(big.subarray(2, 8))).toBe("日本");
  });

  it("cuts a long run into segments within the bounds, and joins them back to the same bytes", () => {
    const events = log(Array.from({ length: 5000 }, (_, i) => `message ${i} ${"x".repeat(i % 300)}`));
    const run = encodeTuples(events);
    const segments = cutSegments(run);
    expect(segments.length).toBeGreaterThan(1);
    for (const s of segments) {
      expect(s.ends.length).toBeLessThanOrEqual(SEGMENT_MAX_EVENTS);
      expect(s.body.length).toBeLessThanOrEqual(SEGMENT_MAX_BYTES + 1024);
    }
    // Pieces of about equal size: none is a sliver.
    const sizes = segments.map((s) => s.body.length);
    expect(Math.min(...sizes)).toBeGreaterThan(Math.max(...sizes) / 2);
    expect(Buffer.compare(Buffer.from(concatRuns(segments).body), Buffer.from(run.body))).toBe(0);
    expect(segments.flatMap((s) => decodeRun("r", s))).toEqual(events);
    expect(cutSegments(sliceRun(run, 0, 10))).toHaveLength(1);
  });

  it("stores ends as 32-bit little-endian integers", () => {
    const ends = Uint32Array.of(1, 256, 65_536, 2 ** 32 - 1);
    const bytes = endsToBytes(ends);
    expect([...bytes.subarray(0, 8)]).toEqual([1, 0, 0, 0, 0, 1, 0, 0]);
    expect(endsFromBytes(bytes)).toEqual(ends);
    // An unaligned copy (a Buffer from a pool) reads the same.
    const unaligned = Buffer.concat([Buffer.from([9]), bytes]).subarray(1);
    expect(endsFromBytes(unaligned)).toEqual(ends);
    expect(() => endsFromBytes(Buffer.from([1, 2, 3]))).toThrow(/32-bit/);
  });

  it("refuses stored text that is not a dense run of tuples", () => {
    const run = encodeTuples(log(["a", "b"]));
    expect(() => decodeRun("r", { ...run, first_seq: 5 })).toThrow(/not dense/);
    expect(() => decodeRun("r", { ...run, body: Buffer.from("n".repeat(run.body.length)) })).toThrow(/not JSON/);
    expect(() => decodeRun("r", { ...run, body: Buffer.from("not json") })).toThrow(/offsets past its text/);
  });
});
