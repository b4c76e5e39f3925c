import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { copyBytes, SAFE_INTEGER_MAX_BYTES, textBuffer, writeSafeInteger, writeShortText } from "./text-buffer.js";

describe("writeSafeInteger", () => {
  it("writes any safe integer as JSON.stringify prints it", () => {
    const buffer = textBuffer(64);
    const written = (n: number) => buffer.toString("latin1", 3, writeSafeInteger(buffer, 3, n));
    fc.assert(
      fc.property(fc.oneof(fc.maxSafeInteger(), fc.integer(), fc.nat(1000)), (n) => {
        expect(written(n)).toBe(JSON.stringify(n));
      }),
    );
    for (const n of [0, -0, 9, 10, 99, 100, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]) expect(written(n)).toBe(JSON.stringify(n));
    expect(written(Number.MIN_SAFE_INTEGER).length).toBe(SAFE_INTEGER_MAX_BYTES);
    for (const n of [1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53])
      expect(() => writeSafeInteger(buffer, 0, n)).toThrow(/safe integer/);
  });
});

describe("writeShortText", () => {
  it("writes any text as its UTF-8 bytes, short ASCII ones in a loop and the rest by Node's writer", () => {
    const buffer = textBuffer(4 * 1024);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 40 }),
          fc.string({ unit: "grapheme", maxLength: 40 }),
          fc.string({ unit: "binary", maxLength: 40 }),
        ),
        fc.nat(16),
        (text, at) => {
          const end = writeShortText(buffer, at, text);
          expect(buffer.subarray(at, end).equals(Buffer.from(text, "utf8"))).toBe(true);
        },
      ),
    );
    // A non-ASCII unit after ASCII ones: the writer rewrites the text from its start.
    for (const text of ["e-1", "", "x".repeat(32), "x".repeat(33), "évènement", "id-😀", "abc\u00ff", "ab\ud800"]) {
      const end = writeShortText(buffer, 5, text);
      expect(buffer.subarray(5, end).equals(Buffer.from(text, "utf8"))).toBe(true);
    }
  });
});

describe("copyBytes", () => {
  it("copies the bytes at the offset and returns where they end", () => {
    const buffer = textBuffer(16).fill(0);
    expect(copyBytes(buffer, 3, Uint8Array.of(1, 2, 3))).toBe(6);
    expect(Array.from(buffer.subarray(2, 7))).toEqual([0, 1, 2, 3, 0]);
  });
});
