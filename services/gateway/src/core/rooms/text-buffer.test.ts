import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SAFE_INTEGER_MAX_BYTES, textBuffer, writeSafeInteger } from "./text-buffer.js";

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
