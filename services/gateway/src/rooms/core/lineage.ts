import type { Authority, Lineage, LineageEntry } from "./types.js";

/**
 * Lineage arithmetic (Kafka's leader-epoch cache, KIP-101): a lineage says which gateway was
 * authority at which epoch from which seq. Two logs whose lineages share a prefix of entries hold
 * the same events up to the end of the last shared epoch; the hash chain confirms it.
 */

/** Why a lineage is malformed, or null when it is well formed for a log ending at `lastSeq`. */
export function lineageProblem(lineage: Lineage, lastSeq: number): string | null {
  if (lastSeq > 0 && lineage.length === 0) return `a log of ${lastSeq} events has an empty lineage`;
  let previous: LineageEntry | undefined;
  for (const entry of lineage) {
    if (!Number.isSafeInteger(entry.epoch) || entry.epoch < 1) return `epoch ${entry.epoch} is not a positive integer`;
    if (!Number.isSafeInteger(entry.start_seq) || entry.start_seq < 1) return `start_seq ${entry.start_seq} is not a positive integer`;
    if (typeof entry.gateway_id !== "string" || entry.gateway_id.length === 0) return `epoch ${entry.epoch} has no gateway_id`;
    if (previous === undefined && entry.start_seq !== 1) return `the first epoch starts at seq ${entry.start_seq}, not 1`;
    if (previous !== undefined && entry.epoch <= previous.epoch) return `epoch ${entry.epoch} follows epoch ${previous.epoch}`;
    if (previous !== undefined && entry.start_seq < previous.start_seq) {
      return `epoch ${entry.epoch} starts at seq ${entry.start_seq}, before epoch ${previous.epoch} (seq ${previous.start_seq})`;
    }
    if (entry.start_seq > lastSeq + 1) return `epoch ${entry.epoch} starts at seq ${entry.start_seq}, after the log end ${lastSeq}`;
    previous = entry;
  }
  return null;
}

/** The lineage entry in force at `seq` (the last one starting at or before it), or undefined. */
export function entryAt(lineage: Lineage, seq: number): LineageEntry | undefined {
  let found: LineageEntry | undefined;
  for (const entry of lineage) {
    if (entry.start_seq > seq) break;
    found = entry;
  }
  return found;
}

/** The entries that describe a log ending at `lastSeq` (a replica stores only those). */
export function clipLineage(lineage: Lineage, lastSeq: number): LineageEntry[] {
  return lineage.filter((entry) => entry.start_seq <= lastSeq).map((entry) => ({ ...entry }));
}

export function lastEntry(lineage: Lineage): LineageEntry | undefined {
  return lineage[lineage.length - 1];
}

export function maxEpoch(lineage: Lineage): number {
  return lastEntry(lineage)?.epoch ?? 0;
}

export function sameEntry(a: LineageEntry, b: LineageEntry): boolean {
  return a.epoch === b.epoch && a.gateway_id === b.gateway_id && a.start_seq === b.start_seq;
}

export function sameAuthority(a: Authority, b: Authority): boolean {
  return a.epoch === b.epoch && a.gateway_id === b.gateway_id;
}

export function formatAuthority(authority: Authority): string {
  return `${authority.gateway_id}@${authority.epoch}`;
}

export function formatLineage(lineage: Lineage): string {
  return `[${lineage.map((entry) => `${entry.gateway_id}@${entry.epoch} from ${entry.start_seq}`).join(", ")}]`;
}

/**
 * The divergence point of two logs from their lineages, as Kafka's OffsetsForLeaderEpoch: find the
 * last epoch both lineages share (same epoch, gateway and start, with every earlier entry shared too)
 * and return the smaller of its two end seqs. Seqs up to the result are the same on both logs
 * (to be confirmed with the hash at that seq); 0 means nothing is shared.
 *
 * `localEnd` and `remoteEnd` are the last seqs of the two logs; an epoch's end is the seq before the
 * next entry's start, or the log end for the last entry.
 */
export function divergencePoint(local: Lineage, localEnd: number, remote: Lineage, remoteEnd: number): number {
  let shared = 0;
  while (shared < local.length && shared < remote.length && sameEntry(local[shared]!, remote[shared]!)) shared++;
  if (shared === 0) return 0;
  const localNext = local[shared];
  const remoteNext = remote[shared];
  const localEpochEnd = localNext === undefined ? localEnd : localNext.start_seq - 1;
  const remoteEpochEnd = remoteNext === undefined ? remoteEnd : remoteNext.start_seq - 1;
  return Math.max(0, Math.min(localEpochEnd, remoteEpochEnd, localEnd, remoteEnd));
}
