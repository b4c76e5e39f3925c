import { describe, expect, it } from "vitest";
import { clipLineage, divergencePoint, entryAt, lineageProblem } from "./lineage.js";
import type { LineageEntry } from "./types.js";

/** "A1:1 B2:4" → [{A, epoch 1, from 1}, {B, epoch 2, from 4}] */
function L(text: string): LineageEntry[] {
  if (text.trim() === "") return [];
  return text
    .trim()
    .split(/\s+/)
    .map((part) => {
      const match = /^([A-Z])(\d+):(\d+)$/.exec(part)!;
      return { gateway_id: match[1]!, epoch: Number(match[2]), start_seq: Number(match[3]) };
    });
}

describe("divergencePoint (OffsetsForLeaderEpoch)", () => {
  it.each([
    // local lineage, local end, remote lineage, remote end, point
    ["A1:1", 10, "A1:1", 10, 10, "same lineage, same length"],
    ["A1:1", 10, "A1:1", 15, 10, "remote ahead on the same epoch"],
    ["A1:1", 10, "A1:1 B2:11", 12, 10, "new epoch starts right after the local end"],
    ["A1:1", 10, "A1:1 B2:9", 12, 8, "new epoch started below the local end (stale promote)"],
    ["A1:1 B2:9", 10, "A1:1 C3:9", 12, 8, "competing epochs from the same start"],
    ["A1:1 B2:9", 10, "A1:1 C3:7", 12, 6, "the winner branched earlier"],
    ["A1:1 B2:4", 6, "A1:1 B2:4 C3:6", 8, 5, "several epochs, branch inside epoch 2"],
    ["A1:1 B2:4", 6, "A1:1 B2:4 C3:7", 8, 6, "several epochs, no branch"],
    ["A1:1", 2, "E2:1", 1, 0, "nothing in common"],
    ["A1:1", 3, "B1:1", 3, 0, "same epoch, different gateway"],
    ["", 0, "A1:1", 5, 0, "empty local log"],
    ["A1:1 B2:5", 8, "A1:1 B2:6", 9, 4, "same epoch and gateway but a different start is not shared"],
  ])("%s/%i vs %s/%i → %i (%s)", (local, localEnd, remote, remoteEnd, expected) => {
    expect(divergencePoint(L(local), localEnd, L(remote), remoteEnd)).toBe(expected);
    // The point is symmetric: both sides agree up to it.
    expect(divergencePoint(L(remote), remoteEnd, L(local), localEnd)).toBe(expected);
  });
});

describe("lineageProblem", () => {
  it.each([
    ["A1:1", 5, null],
    ["A1:1 B2:4 C3:4", 5, null],
    ["", 0, null],
    ["", 3, "a log of 3 events has an empty lineage"],
    ["A1:2", 5, "the first epoch starts at seq 2, not 1"],
    ["A2:1 B2:4", 5, "epoch 2 follows epoch 2"],
    ["A2:1 B1:4", 5, "epoch 1 follows epoch 2"],
    ["A1:1 B2:4 C3:3", 5, "epoch 3 starts at seq 3, before epoch 2 (seq 4)"],
    ["A1:1 B2:9", 5, "epoch 2 starts at seq 9, after the log end 5"],
  ])("%s for a log of %i → %s", (lineage, lastSeq, problem) => {
    expect(lineageProblem(L(lineage), lastSeq)).toBe(problem);
  });
});

describe("entryAt and clipLineage", () => {
  it("finds the entry in force at a seq and clips to a log end", () => {
    const lineage = L("A1:1 B2:4 C3:4 D4:9");
    expect(entryAt(lineage, 0)).toBeUndefined();
    expect(entryAt(lineage, 3)?.gateway_id).toBe("A");
    expect(entryAt(lineage, 4)?.gateway_id).toBe("C");
    expect(entryAt(lineage, 100)?.gateway_id).toBe("D");
    expect(clipLineage(lineage, 8).map((e) => e.gateway_id)).toEqual(["A", "B", "C"]);
    expect(clipLineage(lineage, 0)).toEqual([]);
  });
});
