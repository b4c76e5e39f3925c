import { describe, expect, it } from "vitest";
import { LruMap } from "./lru-map.js";

describe("LruMap", () => {
  it("forgets the least recently used key first; a read counts as a use", () => {
    const m = new LruMap<string, number>(2);
    m.set("a", 1);
    m.set("b", 2);
    expect(m.get("a")).toBe(1);
    m.set("c", 3);
    expect(m.size).toBe(2);
    expect(m.get("b")).toBeUndefined();
    expect(m.get("a")).toBe(1);
    expect(m.get("c")).toBe(3);
  });

  it("a write of a kept key replaces its value and counts as a use", () => {
    const m = new LruMap<string, number>(2);
    m.set("a", 1);
    m.set("b", 2);
    m.set("a", 10);
    m.set("c", 3);
    expect(m.get("a")).toBe(10);
    expect(m.get("b")).toBeUndefined();
    expect(m.size).toBe(2);
  });

  it("forgets a key, or every key, on request", () => {
    const m = new LruMap<string, number>(4);
    m.set("a", 1);
    m.set("b", 2);
    m.delete("a");
    m.delete("missing");
    expect(m.get("a")).toBeUndefined();
    expect(m.get("b")).toBe(2);
    m.clear();
    expect(m.size).toBe(0);
    expect(m.get("b")).toBeUndefined();
  });

  it("never holds more than its capacity, whatever passes through", () => {
    const m = new LruMap<number, number>(3);
    for (let i = 0; i < 1000; i++) m.set(i % 7 === 0 ? 0 : i, i);
    expect(m.size).toBe(3);
  });

  it.each([0, -1, 1.5, Number.NaN])("refuses a capacity of %s", (capacity) => {
    expect(() => new LruMap(capacity)).toThrow(RangeError);
  });
});
