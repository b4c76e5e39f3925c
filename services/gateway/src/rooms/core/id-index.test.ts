import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  cutIdChunks,
  decodeIdChunk,
  encodeIdChunk,
  eventIdHash,
  ID_CHUNK_KEYS,
  ID_HASH_END,
  ID_MERGE_FANOUT,
  ID_RUN_KEYS,
  IdFilter,
  type IdRunInfo,
  idKeysInRange,
  idMergeStep,
  idRunLevel,
  joinIdKeys,
  mergeIdKeys,
  planIdMerge,
  RecentIds,
  seqsOfHash,
  shouldFlushIds,
  withoutIdKey,
} from "./id-index.js";

/** Keys from (hash, seq) pairs. */
const keys = (...pairs: [number, number][]) => Float64Array.from(pairs.flat());
/** Sorted keys of pairs, through the table the store keeps. */
function sorted(pairs: readonly [number, number][]): Float64Array {
  const recent = new RecentIds();
  for (const [hash, seq] of pairs) recent.add(hash, seq);
  return recent.sortedKeys();
}
const pairsOf = (k: Float64Array) => Array.from({ length: k.length / 2 }, (_, i) => [k[2 * i]!, k[2 * i + 1]!]);

describe("eventIdHash", () => {
  it("is the stored function: these values never change", () => {
    expect(["", "a", "m-1", "é🤖", "550e8400-e29b-41d4-a716-446655440000"].map((id) => eventIdHash(id))).toEqual([
      2133308822136577, 4596174674490778, 5572959303631565, 612960128618283, 32519389272191,
    ]);
  });

  it("gives integers in [0, 2^53), spread evenly, without collisions among 200,000 UUIDs and counting ids", () => {
    const seen = new Set<number>();
    const buckets = new Array<number>(64).fill(0);
    for (let i = 0; i < 100_000; i++) {
      for (const id of [randomUUID(), `e-${i}`]) {
        const hash = eventIdHash(id);
        expect(Number.isSafeInteger(hash) && hash >= 0 && hash < ID_HASH_END).toBe(true);
        seen.add(hash);
        buckets[Math.floor(hash / 2 ** 47)]!++;
      }
    }
    expect(seen.size).toBe(200_000);
    // 3,125 expected per bucket; more than ±10% would be far outside chance.
    for (const n of buckets) expect(Math.abs(n - 3125)).toBeLessThan(313);
  });
});

describe("IdFilter", () => {
  it("never forgets an added hash and lets few absent ones through", () => {
    const filter = IdFilter.forKeys(10_000);
    const added = Array.from({ length: 10_000 }, (_, i) => eventIdHash(`in-${i}`));
    for (const h of added) filter.add(h);
    for (const h of added) expect(filter.mayContain(h)).toBe(true);
    let passed = 0;
    for (let i = 0; i < 100_000; i++) if (filter.mayContain(eventIdHash(`out-${i}`))) passed++;
    expect(passed).toBeLessThan(300); // 0.3%; about 0.05% expected
  });

  it("reads back from its bytes with the same answers, and refuses bytes that are no filter", () => {
    const filter = IdFilter.forKeys(100);
    for (let i = 0; i < 100; i++) filter.add(eventIdHash(`k${i}`));
    const copy = IdFilter.fromBytes(new Uint8Array(filter.bytes()));
    for (let i = 0; i < 1000; i++) expect(copy.mayContain(eventIdHash(`k${i}`))).toBe(filter.mayContain(eventIdHash(`k${i}`)));
    expect(() => IdFilter.fromBytes(new Uint8Array(0))).toThrow(RangeError);
    expect(() => IdFilter.fromBytes(new Uint8Array(24))).toThrow(/power of two/);
  });

  it("has at least 16 bits per key, a power of two of them", () => {
    for (const n of [0, 1, 3, 4, 5, 1000, 4096]) {
      const bits = IdFilter.forKeys(n).bytes().length * 8;
      expect(bits & (bits - 1)).toBe(0);
      expect(bits).toBeGreaterThanOrEqual(16 * Math.max(1, n));
      expect(bits).toBeLessThan(32 * Math.max(4, n));
    }
  });
});

describe("the merge policy", () => {
  const run = (run_id: number, level: number, count = 100, more: Partial<IdRunInfo> = {}): IdRunInfo => ({
    run_id,
    level,
    count,
    merging_into: null,
    merged_below: null,
    ...more,
  });
  const levelZero = (n: number, from = 1) => Array.from({ length: n }, (_, i) => run(from + i, 0));

  it.each([
    ["no runs", [], null],
    ["fewer than the fanout", levelZero(ID_MERGE_FANOUT - 1), null],
    [
      "the fanout at level 0: the oldest of them",
      levelZero(ID_MERGE_FANOUT + 2),
      { sources: [1, 2, 3, 4, 5, 6, 7, 8], level: 1, keys: 800 },
    ],
    [
      "the lowest level first",
      [...Array.from({ length: ID_MERGE_FANOUT }, (_, i) => run(20 + i, 2)), ...levelZero(ID_MERGE_FANOUT, 40)],
      { sources: [40, 41, 42, 43, 44, 45, 46, 47], level: 1, keys: 800 },
    ],
    ["none while one is being built", [...levelZero(ID_MERGE_FANOUT), run(99, 1, 800, { merged_below: 12 })], null],
    ["none while sources are moving", levelZero(ID_MERGE_FANOUT).map((r) => ({ ...r, merging_into: 99 })), null],
  ])("%s", (_name, runs, plan) => {
    expect(planIdMerge(runs as IdRunInfo[])).toEqual(plan);
  });

  it("puts a whole run at the level its size reaches", () => {
    expect([1, ID_RUN_KEYS, ID_RUN_KEYS + 1, ID_RUN_KEYS * ID_MERGE_FANOUT, ID_RUN_KEYS * ID_MERGE_FANOUT + 1].map(idRunLevel)).toEqual([
      0, 0, 1, 1, 2,
    ]);
  });

  it("flushes once the recent ids make a run", () => {
    expect([ID_RUN_KEYS - 1, ID_RUN_KEYS, ID_RUN_KEYS + 500].map(shouldFlushIds)).toEqual([false, true, true]);
  });

  it.each([1, 4096, 4097, 100_000, 1_000_000])("covers the hash space with contiguous steps of about the step size (%i keys)", (n) => {
    const steps: { from: number; to: number }[] = [];
    for (let below = 0; below < ID_HASH_END; ) {
      const step = idMergeStep(below, n, 4096);
      expect(step.from).toBe(below);
      expect(step.to).toBeGreaterThan(below);
      steps.push(step);
      below = step.to;
    }
    expect(steps.at(-1)!.to).toBe(ID_HASH_END);
    expect(steps.length).toBeGreaterThanOrEqual(Math.ceil(n / 4096));
    expect(steps.length).toBeLessThanOrEqual(Math.ceil(n / 4096) + 1);
  });
});

describe("keys, chunks and their encoding", () => {
  it("holds the recent ids: every seq of a hash, found again, sorted by hash then seq, through growth", () => {
    expect(
      pairsOf(
        sorted([
          [9, 3],
          [2, 8],
          [9, 1],
          [5, 5],
        ]),
      ),
    ).toEqual([
      [2, 8],
      [5, 5],
      [9, 1],
      [9, 3],
    ]);
    const recent = new RecentIds();
    const pairs: [number, number][] = [];
    for (let seq = 1; seq <= 5000; seq++) {
      // Every 100th seq shares its hash with the one before (two ids, one hash); hashes span all 53 bits.
      const hash = seq % 100 === 0 ? pairs.at(-1)![0] : eventIdHash(`id-${seq}`);
      recent.add(hash, seq);
      pairs.push([hash, seq]);
    }
    expect(recent.size).toBe(5000);
    for (const [hash] of pairs) expect(recent.has(hash)).toBe(true);
    expect(recent.seqsOf(pairs[99]![0])).toEqual([99, 100]);
    expect(recent.has(eventIdHash("never"))).toBe(false);
    expect(pairsOf(recent.sortedKeys())).toEqual([...pairs].sort((x, y) => x[0] - y[0] || x[1] - y[1]));
    expect(() => recent.add(1, 0)).toThrow(RangeError);
    recent.clear();
    expect([recent.size, recent.has(pairs[0]![0]), recent.sortedKeys().length]).toEqual([0, false, 0]);
  });

  it("merges sorted arrays into the sort of them all", () => {
    const random = (n: number) =>
      sorted(Array.from({ length: n }, () => [Math.floor(Math.random() * 1000), Math.floor(Math.random() * 1e6)]));
    const parts = [random(50), random(0), random(7), random(300), random(1), random(64)];
    const all = parts.flatMap(pairsOf).sort((x, y) => x[0]! - y[0]! || x[1]! - y[1]!);
    expect(pairsOf(mergeIdKeys(parts))).toEqual(all);
    expect(mergeIdKeys([]).length).toBe(0);
    expect(pairsOf(joinIdKeys([keys([1, 1]), keys([2, 2], [3, 3])]))).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
  });

  it("finds seqs by hash, a hash range, and a key to take out", () => {
    const k = keys([1, 10], [4, 20], [4, 21], [7, 30]);
    expect(seqsOfHash(k, 4)).toEqual([20, 21]);
    expect(seqsOfHash(k, 5)).toEqual([]);
    expect(pairsOf(idKeysInRange(k, 2, 7))).toEqual([
      [4, 20],
      [4, 21],
    ]);
    expect(pairsOf(idKeysInRange(k, 0, ID_HASH_END))).toEqual(pairsOf(k));
    expect(pairsOf(withoutIdKey(k, 4, 21)!)).toEqual([
      [1, 10],
      [4, 20],
      [7, 30],
    ]);
    expect(withoutIdKey(k, 4, 22)).toBeNull();
  });

  it("cuts chunks of about ID_CHUNK_KEYS keys and never between two keys of one hash", () => {
    const pairs: [number, number][] = Array.from({ length: 3 * ID_CHUNK_KEYS }, (_, i) => [i, i + 1]);
    // A hash with many seqs across the first boundary.
    for (let i = 0; i < 10; i++) pairs[ID_CHUNK_KEYS - 5 + i] = [ID_CHUNK_KEYS - 5, 1000 + i];
    const k = sorted(pairs);
    const chunks = cutIdChunks(k);
    expect(chunks[0]).toEqual([0, ID_CHUNK_KEYS + 5]);
    expect(chunks.at(-1)![1]).toBe(k.length / 2);
    for (let i = 1; i < chunks.length; i++) {
      expect(chunks[i]![0]).toBe(chunks[i - 1]![1]);
      expect(k[2 * chunks[i]![0]]).not.toBe(k[2 * chunks[i]![0] - 2]);
    }
    expect(cutIdChunks(new Float64Array(0))).toEqual([]);
  });

  it("stores a chunk as 16 little-endian bytes per key and reads it back", () => {
    const k = keys([ID_HASH_END - 1, 1], [2 ** 40 + 3, 2 ** 33], [5, 6]);
    const bytes = encodeIdChunk(k, 1, 3);
    expect(bytes.length).toBe(32);
    expect(Buffer.from(bytes).readDoubleLE(0)).toBe(2 ** 40 + 3);
    expect(pairsOf(decodeIdChunk(bytes))).toEqual([
      [2 ** 40 + 3, 2 ** 33],
      [5, 6],
    ]);
    expect(() => decodeIdChunk(new Uint8Array(20))).toThrow(/not a whole number of keys/);
  });
});
