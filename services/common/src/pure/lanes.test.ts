import { describe, expect, it } from "vitest";
import { LaneScheduler } from "./lanes.js";

const open = () => true;

describe("LaneScheduler", () => {
  it("runs one item per lane at a time, in seq order, and the next only after finish", () => {
    const s = new LaneScheduler(8);
    s.enqueue({ lane: "c\0bob", id: "b2", seq: 2 });
    s.enqueue({ lane: "c\0bob", id: "b1", seq: 1 });
    s.enqueue({ lane: "c\0bob", id: "b3", seq: 3 });
    expect(s.take(open).map((x) => x.id)).toEqual(["b1"]);
    expect(s.take(open)).toEqual([]);
    s.finish("b1");
    expect(s.take(open).map((x) => x.id)).toEqual(["b2"]);
    s.finish("b2");
    expect(s.take(open).map((x) => x.id)).toEqual(["b3"]);
    s.finish("b3");
    expect(s.depth()).toEqual({ queued: 0, running: 0 });
  });

  it("runs different lanes in parallel up to the cap, oldest head first", () => {
    const s = new LaneScheduler(2);
    s.enqueue({ lane: "x", id: "x1", seq: 5 });
    s.enqueue({ lane: "y", id: "y1", seq: 1 });
    s.enqueue({ lane: "z", id: "z1", seq: 3 });
    expect(s.take(open).map((x) => x.id)).toEqual(["y1", "z1"]);
    expect(s.depth()).toEqual({ queued: 1, running: 2 });
    expect(s.take(open)).toEqual([]);
    s.finish("z1");
    expect(s.take(open).map((x) => x.id)).toEqual(["x1"]);
  });

  it("skips lanes whose target is not open", () => {
    const s = new LaneScheduler(4);
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "b", id: "b1", seq: 2 });
    expect(s.take((lane) => lane === "b").map((x) => x.id)).toEqual(["b1"]);
    expect(s.take(open).map((x) => x.id)).toEqual(["a1"]);
  });

  it("finish with keep puts the item back at the head of its lane", () => {
    const s = new LaneScheduler(4);
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "a", id: "a2", seq: 2 });
    expect(s.take(open).map((x) => x.id)).toEqual(["a1"]);
    s.finish("a1", true);
    expect(s.isRunning("a1")).toBe(false);
    expect(s.take(open).map((x) => x.id)).toEqual(["a1"]);
  });

  it("ignores duplicates, removes queued items but not running ones, and reports membership", () => {
    const s = new LaneScheduler(1);
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "a", id: "a2", seq: 2 });
    expect(s.depth()).toEqual({ queued: 2, running: 0 });
    s.take(open);
    s.remove("a1");
    expect(s.isRunning("a1")).toBe(true);
    s.remove("a2");
    expect(s.has("a2")).toBe(false);
    expect(s.runningIn((l) => l === "a")).toEqual(["a1"]);
    expect(s.idsIn((l) => l === "a")).toEqual(["a1"]);
    s.finish("a2");
    s.finish("a1");
    expect(s.has("a1")).toBe(false);
    expect(s.depth()).toEqual({ queued: 0, running: 0 });
  });

  it("refuses a cap below one", () => {
    expect(() => new LaneScheduler(0)).toThrow(RangeError);
  });
});
