import { describe, expect, it } from "vitest";
import { checkpointPace, framesWrittenSince, nextCheckpointDelay, pagesOf } from "./checkpoint-pace.js";

describe("nextCheckpointDelay", () => {
  const pace = { targetFrames: 1000, minMs: 10, maxMs: 1000 };
  it.each([
    // frames written, over ms → next delay
    [0, 50, 1000], // nothing written: the longest wait
    [-5, 50, 1000], // a count that makes no sense: the same
    [Number.NaN, 50, 1000],
    [100, 0, 1000], // no time passed: no rate to go by
    [1000, 50, 50], // at the target: the same pace again
    [500, 50, 100], // half the target: twice as long
    [4000, 100, 25], // a catch-up: faster
    [100_000, 100, 10], // faster than the floor allows
    [10, 100, 1000], // a trickle: no faster than the ceiling
    [1440, 1000, 694], // a delivery load's rate: rounded to whole milliseconds
  ])("%d frames in %d ms → %d ms", (frames, elapsed, expected) => {
    expect(nextCheckpointDelay(frames, elapsed, pace)).toBe(expected);
  });

  it("a source copy of it computes the same (the worker runs it that way)", () => {
    const copy = new Function(`return (${nextCheckpointDelay.toString()})`)() as typeof nextCheckpointDelay;
    for (const [frames, elapsed] of [
      [0, 50],
      [1000, 50],
      [4000, 100],
      [10, 100],
    ] as const) {
      expect(copy(frames, elapsed, checkpointPace(4096))).toBe(nextCheckpointDelay(frames, elapsed, checkpointPace(4096)));
    }
  });
});

describe("framesWrittenSince", () => {
  it.each([
    [0, 0, 0],
    [100, 350, 250], // the same WAL grew
    [3000, 40, 40], // it started over: every frame in it is new
    [500, 500, 0],
  ])("%d then %d frames → %d written", (before, after, expected) => {
    expect(framesWrittenSince(before, after)).toBe(expected);
  });
});

describe("checkpointPace", () => {
  it.each([
    // page size → frames per checkpoint: the same ~4 MB whatever the page
    [4096, 1000], // SQLite's default file: its own 1,000 pages
    [16384, 250],
    [65536, 63],
    [1024, 4000],
  ])("%d-byte pages → %d frames", (pageSize, frames) => {
    expect(checkpointPace(pageSize)).toEqual({ targetFrames: frames, minMs: 10, maxMs: 500 });
  });

  it("never asks for fewer than one page", () => {
    expect(pagesOf(100, 4096)).toBe(1);
    expect(pagesOf(0, 4096)).toBe(1);
  });
});
