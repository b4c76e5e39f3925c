/**
 * The event id index of a room log (event_id → seq, for idempotency forever), as a log-structured
 * index whose writes append:
 *
 * - the ids of the newest events live in memory only ("recent"): the log's segments hold them, so a
 *   restart rebuilds that part from the events after `ids_through` (at most a run and a commit);
 * - every ID_RUN_KEYS ids, the recent ids are written as one sorted run of (hash, seq) keys, in the
 *   commit that takes the log past that mark, and `ids_through` moves to the log's end; a run is
 *   stored in chunks of ID_CHUNK_KEYS keys, one row each;
 * - ID_MERGE_FANOUT runs of one level are merged into one run of the next level, in steps of a hash
 *   range, each one short transaction that copies the range's keys from the sources into the target;
 *   the last step drops the sources. A big merge never stalls the gateway, and a kill -9 between
 *   steps leaves every key in a run (the merge resumes where its target ends);
 * - each run has a Bloom filter in memory (stored with the run), so an id that was never used (the
 *   usual case of an append) is known to be new without reading the disk.
 *
 * A key is a 53-bit hash of the id, not the id: the index only narrows the search to a few seqs and
 * the store reads the event at each to compare the id itself, so two ids with one hash are told apart.
 * Random ids (UUIDv4) cost what counting ones cost, where a b-tree keyed by the id itself takes each
 * page of them into most of its leaves.
 *
 * This file holds the decisions and encodings (hash, filter, chunks, when to flush and what to
 * merge, the step ranges); the store holds the rows.
 */

/** Recent ids kept in memory before they are written as a run. */
export const ID_RUN_KEYS = 2048;
/** Runs of one level merged into one of the next. */
export const ID_MERGE_FANOUT = 8;
/** Keys a merge step moves, about (a step is one short transaction). */
export const ID_MERGE_STEP_KEYS = 32_768;
/** Keys per stored chunk of a run (a chunk is one row: 16 bytes per key). */
export const ID_CHUNK_KEYS = 512;
/** Hashes are in [0, ID_HASH_END). */
export const ID_HASH_END = 2 ** 53;
/**
 * The 53-bit hash of an event id, over its UTF-16 code units. It is stored: never change it (a
 * changed function needs a migration that rewrites every run).
 */
export function eventIdHash(id: string): number {
  let a = 0x3b9aca07 ^ id.length;
  let b = 0x6a09e667 ^ Math.imul(id.length, 0x9e3779b1);
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  a = mix32(a ^ Math.imul(b, 0x27d4eb2d));
  b = mix32(b ^ a);
  return (b & 0x1fffff) * 0x100000000 + (a >>> 0);
}

/** A 32-bit finaliser: every input bit reaches every output bit. */
function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/**
 * A filter has a power of two of bits, at least 16 per key, and 7 probes: at most about 0.07% of
 * absent ids pass one filter, so a log with a few dozen runs reads a chunk for about 1% of new ids
 * at most.
 */
const FILTER_MIN_BITS_PER_KEY = 16;
const FILTER_PROBES = 7;

/**
 * A Bloom filter over id hashes. Extra bits only cost a wasted look-up, never a wrong answer, so
 * a filter may be added to before the keys it covers are committed. The hash is already mixed: its
 * low 32 bits pick the first probe, its high 21 bits (made odd) the stride, so the probes of one
 * hash never repeat within the filter.
 */
export class IdFilter {
  private readonly mask: number;

  private constructor(private readonly bits: Uint8Array) {
    this.mask = bits.length * 8 - 1;
  }

  /** An empty filter sized for `keys` keys. */
  static forKeys(keys: number): IdFilter {
    let bytes = 8;
    while (bytes * 8 < Math.max(1, keys) * FILTER_MIN_BITS_PER_KEY) bytes *= 2;
    return new IdFilter(new Uint8Array(bytes));
  }

  /** A stored filter (its bytes as `bytes()` gave them). */
  static fromBytes(bytes: Uint8Array): IdFilter {
    if (bytes.length < 8 || (bytes.length & (bytes.length - 1)) !== 0) {
      throw new RangeError(`an id filter is a power of two of at least 8 bytes, not ${bytes.length}`);
    }
    return new IdFilter(new Uint8Array(bytes));
  }

  add(hash: number): void {
    const step = (Math.floor(hash / 0x100000000) * 2 + 1) & this.mask;
    let at = hash & this.mask;
    for (let i = 0; i < FILTER_PROBES; i++) {
      this.bits[at >>> 3]! |= 1 << (at & 7);
      at = (at + step) & this.mask;
    }
  }

  /** False: `hash` was never added. True: it may have been. */
  mayContain(hash: number): boolean {
    const step = (Math.floor(hash / 0x100000000) * 2 + 1) & this.mask;
    let at = hash & this.mask;
    for (let i = 0; i < FILTER_PROBES; i++) {
      if ((this.bits[at >>> 3]! & (1 << (at & 7))) === 0) return false;
      at = (at + step) & this.mask;
    }
    return true;
  }

  bytes(): Uint8Array {
    return this.bits;
  }
}

/** A stored run as the merge policy sees it. */
export interface IdRunInfo {
  run_id: number;
  level: number;
  /** Keys written into it (deleted ones still counted: an estimate, for sizes). */
  count: number;
  /** A merge's source: the run it is moving into; else null. */
  merging_into: number | null;
  /** A merge's target while it is built: keys with a hash below this have moved in; else null. */
  merged_below: number | null;
}

/** The merge to start: `sources` (run ids) into a new run of `level`. */
export interface IdMergePlan {
  sources: number[];
  level: number;
  /** The keys the target will hold, about (its filter's size). */
  keys: number;
}

/**
 * The next merge of a log's runs, or null: none while one is in progress (one at a time per log),
 * else the oldest ID_MERGE_FANOUT runs of the lowest level that has that many.
 */
export function planIdMerge(runs: readonly IdRunInfo[]): IdMergePlan | null {
  if (runs.some((r) => r.merging_into !== null || r.merged_below !== null)) return null;
  const byLevel = new Map<number, IdRunInfo[]>();
  for (const run of [...runs].sort((x, y) => x.run_id - y.run_id)) {
    const list = byLevel.get(run.level) ?? [];
    list.push(run);
    byLevel.set(run.level, list);
  }
  for (const level of [...byLevel.keys()].sort((x, y) => x - y)) {
    const list = byLevel.get(level)!;
    if (list.length < ID_MERGE_FANOUT) continue;
    const sources = list.slice(0, ID_MERGE_FANOUT);
    return { sources: sources.map((r) => r.run_id), level: level + 1, keys: sources.reduce((n, r) => n + r.count, 0) };
  }
  return null;
}

/** The level a run of `keys` keys belongs to when it is written whole (an upgrade's one run per log). */
export function idRunLevel(keys: number): number {
  let level = 0;
  for (let size = ID_RUN_KEYS; size < keys; size *= ID_MERGE_FANOUT) level++;
  return level;
}

/**
 * The hash range [from, to) of a merge's next step, about `stepKeys` of `keys` keys spread evenly
 * over the hash space; `to` is ID_HASH_END at the last step.
 */
export function idMergeStep(mergedBelow: number, keys: number, stepKeys: number): { from: number; to: number } {
  const width = Math.max(1, Math.floor(ID_HASH_END / Math.max(1, Math.ceil(keys / stepKeys))));
  return { from: mergedBelow, to: Math.min(ID_HASH_END, mergedBelow + width) };
}

/** Whether a commit that leaves `recent` ids in memory writes them as a run. */
export function shouldFlushIds(recent: number): boolean {
  return recent >= ID_RUN_KEYS;
}

/**
 * Keys of the index are (hash, seq) pairs in a flat Float64Array [hash0, seq0, hash1, seq1, …]
 * (both are integers below 2^53, exact in a double), in index order: by hash, then seq.
 */
export type IdKeys = Float64Array;

/**
 * The recent ids of a log: (hash, seq) pairs in an open-addressing table of two typed arrays (no
 * object per id, nothing for the collector). Pairs with one hash are all kept (two ids may share
 * it); seqs are at least 1, so 0 marks a free slot. Grows by doubling at half full.
 */
export class RecentIds {
  private hashes = new Float64Array(1024);
  private seqs = new Float64Array(1024);
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(hash: number, seq: number): void {
    if (!(seq >= 1)) throw new RangeError(`a seq is at least 1, not ${seq}`);
    if (2 * (this.count + 1) > this.seqs.length) this.grow();
    this.put(hash, seq);
    this.count++;
  }

  /** Whether a pair with this hash is held. */
  has(hash: number): boolean {
    const mask = this.seqs.length - 1;
    for (let at = hash & mask; this.seqs[at] !== 0; at = (at + 1) & mask) if (this.hashes[at] === hash) return true;
    return false;
  }

  /** The seqs held under this hash, ascending. */
  seqsOf(hash: number): number[] {
    const found: number[] = [];
    const mask = this.seqs.length - 1;
    for (let at = hash & mask; this.seqs[at] !== 0; at = (at + 1) & mask) if (this.hashes[at] === hash) found.push(this.seqs[at]!);
    return found.sort((x, y) => x - y);
  }

  /** Every pair, in index order (by hash, then seq): the hashes sorted by the typed array's own numeric sort. */
  sortedKeys(): IdKeys {
    const order = new Float64Array(this.count);
    let n = 0;
    for (let at = 0; at < this.seqs.length; at++) if (this.seqs[at] !== 0) order[n++] = this.hashes[at]!;
    order.sort();
    const out = new Float64Array(2 * this.count);
    let k = 0;
    for (let i = 0; i < order.length; i++) {
      const hash = order[i]!;
      if (i > 0 && order[i - 1] === hash) continue; // the first of equal hashes wrote them all
      for (const seq of this.seqsOf(hash)) {
        out[k++] = hash;
        out[k++] = seq;
      }
    }
    return out;
  }

  clear(): void {
    this.hashes = new Float64Array(1024);
    this.seqs = new Float64Array(1024);
    this.count = 0;
  }

  private put(hash: number, seq: number): void {
    const mask = this.seqs.length - 1;
    let at = hash & mask;
    while (this.seqs[at] !== 0) at = (at + 1) & mask;
    this.hashes[at] = hash;
    this.seqs[at] = seq;
  }

  private grow(): void {
    const { hashes, seqs } = this;
    this.hashes = new Float64Array(2 * hashes.length);
    this.seqs = new Float64Array(2 * seqs.length);
    for (let at = 0; at < seqs.length; at++) if (seqs[at] !== 0) this.put(hashes[at]!, seqs[at]!);
  }
}

/** Sorted key arrays merged into one sorted array (pairwise, so each key is copied log2(parts) times). */
export function mergeIdKeys(parts: readonly IdKeys[]): IdKeys {
  if (parts.length === 0) return new Float64Array(0);
  let level = [...parts];
  while (level.length > 1) {
    const next: IdKeys[] = [];
    for (let i = 0; i < level.length; i += 2) next.push(i + 1 < level.length ? mergeTwo(level[i]!, level[i + 1]!) : level[i]!);
    level = next;
  }
  return level[0]!;
}

function mergeTwo(a: IdKeys, b: IdKeys): IdKeys {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Float64Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) {
    if (a[i]! < b[j]! || (a[i] === b[j] && a[i + 1]! <= b[j + 1]!)) {
      out[k++] = a[i++]!;
      out[k++] = a[i++]!;
    } else {
      out[k++] = b[j++]!;
      out[k++] = b[j++]!;
    }
  }
  out.set(a.subarray(i), k);
  out.set(b.subarray(j), k + (a.length - i));
  return out;
}

/** Key arrays that follow one another in index order, as one. */
export function joinIdKeys(parts: readonly IdKeys[]): IdKeys {
  if (parts.length === 1) return parts[0]!;
  const out = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** Index (in pairs) of the first key whose hash is >= `hash`. */
function lowerBound(keys: IdKeys, hash: number): number {
  let lo = 0;
  let hi = keys.length / 2;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[2 * mid]! < hash) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The keys whose hash is in [from, to). */
export function idKeysInRange(keys: IdKeys, from: number, to: number): IdKeys {
  return keys.subarray(2 * lowerBound(keys, from), 2 * lowerBound(keys, to));
}

/** The seqs stored under `hash`. */
export function seqsOfHash(keys: IdKeys, hash: number): number[] {
  const seqs: number[] = [];
  for (let i = 2 * lowerBound(keys, hash); i < keys.length && keys[i] === hash; i += 2) seqs.push(keys[i + 1]!);
  return seqs;
}

/** `keys` without the pair (hash, seq), or null when it does not hold it. */
export function withoutIdKey(keys: IdKeys, hash: number, seq: number): IdKeys | null {
  for (let i = 2 * lowerBound(keys, hash); i < keys.length && keys[i] === hash; i += 2) {
    if (keys[i + 1] !== seq) continue;
    const out = new Float64Array(keys.length - 2);
    out.set(keys.subarray(0, i));
    out.set(keys.subarray(i + 2), i);
    return out;
  }
  return null;
}

/**
 * A run's keys cut into chunks of about ID_CHUNK_KEYS: the [from, to) pair ranges. A chunk never
 * starts on the hash the one before it ends with, so all seqs of one hash are in one chunk (a
 * look-up reads the one chunk whose first hash is the greatest at or below its own).
 */
export function cutIdChunks(keys: IdKeys): [from: number, to: number][] {
  const n = keys.length / 2;
  const chunks: [number, number][] = [];
  let from = 0;
  while (from < n) {
    let to = Math.min(n, from + ID_CHUNK_KEYS);
    while (to < n && keys[2 * to] === keys[2 * to - 2]) to++;
    chunks.push([from, to]);
    from = to;
  }
  return chunks;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Pairs [from, to) of `keys` as stored: 64-bit little-endian doubles, hash then seq. */
export function encodeIdChunk(keys: IdKeys, from: number, to: number): Uint8Array {
  const part = keys.slice(2 * from, 2 * to);
  const bytes = new Uint8Array(part.buffer);
  if (!LITTLE_ENDIAN) for (let i = 0; i < bytes.length; i += 8) bytes.subarray(i, i + 8).reverse();
  return bytes;
}

/** A stored chunk's keys (a copy: the bytes may be a view into memory SQLite reuses). */
export function decodeIdChunk(bytes: Uint8Array): IdKeys {
  if (bytes.length % 16 !== 0) throw new RangeError(`an id chunk of ${bytes.length} bytes is not a whole number of keys`);
  const copy = new Uint8Array(bytes);
  if (!LITTLE_ENDIAN) for (let i = 0; i < copy.length; i += 8) copy.subarray(i, i + 8).reverse();
  return new Float64Array(copy.buffer);
}
