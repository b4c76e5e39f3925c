import { type Refusal, refuse } from "./decision.js";

/**
 * Quorum acknowledgement. A send is acknowledged once it is durable on the authority and on EVERY
 * member of the ISR that acks depend on, and only while the recorded ISR has at least `min_insync`
 * members (the authority counts). So each acknowledged send is on at least `min_insync` gateways
 * (the authority and `min_insync − 1` replicas), and on every ISR member: whichever ISR member wins
 * a failover already holds all of them. A lagging member does not hold acks back for long: past
 * `max_lag` it leaves the ISR (written to the record first), and acks go on without it.
 *
 * Acks depend on the recorded ISR together with a change being written (Kafka's "maximal ISR"):
 * a member being removed still counts until the record says it is gone, and a member being added
 * counts from the moment the change is planned, so no acknowledged send can miss a gateway that the
 * record lists, at any instant.
 */

export interface QuorumInput {
  authority: string;
  /** Highest seq durable (fsynced) on the authority itself. */
  authorityDurableSeq: number;
  recorded: readonly string[];
  /** An ISR change sent to the record and not yet confirmed, if any. */
  pending: readonly string[] | null;
  minInsync: number;
  /** Highest durable seq each replica reported in the current epoch. */
  durable: ReadonlyMap<string, number>;
  /** The acknowledged seq so far: the result never goes below it. */
  previous: number;
}

export interface QuorumResult {
  committed: number;
  /** The recorded ISR meets `min_insync`. */
  enough: boolean;
  /** Members whose durable seq is below the authority's. */
  waitingOn: string[];
}

export function ackingMembers(recorded: readonly string[], pending: readonly string[] | null): string[] {
  return [...new Set([...recorded, ...(pending ?? [])])];
}

export function quorumCommit(input: QuorumInput): QuorumResult {
  const members = ackingMembers(input.recorded, input.pending).filter((g) => g !== input.authority);
  const waitingOn = members.filter((g) => (input.durable.get(g) ?? 0) < input.authorityDurableSeq).sort();
  const enough = new Set(input.recorded).size >= input.minInsync && input.recorded.includes(input.authority);
  if (!enough) return { committed: input.previous, enough, waitingOn };
  const lowest = members.reduce((low, g) => Math.min(low, input.durable.get(g) ?? 0), input.authorityDurableSeq);
  return { committed: Math.max(input.previous, lowest), enough, waitingOn };
}

export interface SendAdmission {
  /** The authority's lease is valid by its own monotonic clock. */
  leaseValid: boolean;
  recordedIsrSize: number;
  minInsync: number;
}

/** Whether a leased authority may take a send at all: refused (retryable) when it cannot be acknowledged. */
export function admitSend(input: SendAdmission): { kind: "admit" } | Refusal<"lease_lost" | "not_enough_replicas"> {
  if (!input.leaseValid) {
    return refuse(
      "lease_lost",
      "lease_lost",
      "this gateway's coordinator lease is not valid, so it acknowledges nothing; retry (another gateway may take over the room)",
    );
  }
  if (input.recordedIsrSize < input.minInsync) {
    return refuse(
      "not_enough_replicas",
      "not_enough_replicas",
      `${input.recordedIsrSize} gateway(s) of this room in sync, and it needs ${input.minInsync} (min_insync); retry once replicas catch up`,
      { isr_size: input.recordedIsrSize, min_insync: input.minInsync },
    );
  }
  return { kind: "admit" };
}
