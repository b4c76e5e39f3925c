import { describe, expect, it } from "vitest";
import { isoTime } from "./clock.js";

describe("isoTime", () => {
  it("is Date's ISO text for every millisecond, repeated or not", () => {
    for (const ms of [0, 0, 1, 1_780_000_000_000, 1_780_000_000_000, 1_780_000_000_001, -1, 8.64e15]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, 8.64e15 + 1])("refuses %s as Date does", (ms) => {
    isoTime(0);
    expect(() => isoTime(ms)).toThrow(RangeError);
    expect(isoTime(0)).toBe("1970-01-01T00:00:00.000Z");
  });
});
