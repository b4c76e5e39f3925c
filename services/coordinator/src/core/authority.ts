import type { AuthorityRecord } from "./authority-record.js";
import { type Refusal, refuse } from "./decision.js";

/**
 * Changes of the authority record. Each function decides; the etcd adapter writes the new record
 * with one compare-and-swap on the `mod_revision` that was read, so two decisions made on the same
 * record can never both be written (failover races, manual promote against automatic failover).
 */

export type ClaimMode =
  /** A replica found the authority's lease expired. Only ISR members claim. */
  | "automatic"
  /** An operator's promote. Only ISR members, and only once the authority's lease is gone. */
  | "promote"
  /** An operator's promote of a gateway outside the ISR: acknowledged sends it lacks are lost. */
  | "promote_unclean";

export interface ClaimInput {
  self: string;
  /** This gateway's valid lease (claims need one). */
  selfLease: string;
  mode: ClaimMode;
  /** The record as read, or null when the key is missing. */
  record: AuthorityRecord | null;
  /** Whether the lease the record names is still alive in etcd (false for a released record). */
  recordLeaseAlive: boolean;
  /** Highest epoch for the room in any durable state of this gateway. */
  localMaxEpoch: number;
  /** The room's replicas and min_insync as this gateway stored them: what an unclean promote writes when the record is gone. */
  policy?: { replicas: readonly string[]; min_insync: number } | undefined;
}

export type ClaimRefusal = Refusal<"no_record" | "already_authority" | "lease_valid" | "not_in_isr">;

export type ClaimDecision =
  | { kind: "claim"; record: AuthorityRecord; previous: { gateway_id: string; epoch: number } | null; unclean: boolean }
  | ClaimRefusal;

/**
 * The claim rule. The new epoch is one above every epoch known (the record's and this gateway's
 * own), and the new ISR keeps the old members but the dead authority: each of them holds every
 * acknowledged send. A lease that is still alive is never overridden, whatever the mode: its holder
 * may still be acknowledging sends.
 */
export function decideClaim(input: ClaimInput): ClaimDecision {
  const { self, record } = input;
  if (record === null) {
    if (input.mode !== "promote_unclean") {
      return refuse(
        "no_record",
        "not_found",
        "the room has no authority record; its creator writes the first one" +
          (input.mode === "promote" ? " (promote --unclean writes a new one from this gateway's log)" : ""),
      );
    }
    // The record is gone (etcd lost its data): the claimant's own copy of the policy says who holds
    // the room, else it holds it alone (min_insync 1).
    const epoch = input.localMaxEpoch + 1;
    return { kind: "claim", record: initialRecord(self, input.selfLease, epoch, input.policy), previous: null, unclean: true };
  }
  const holder = { gateway_id: record.gateway_id, epoch: record.epoch };
  if (record.gateway_id === self && record.lease === input.selfLease && input.recordLeaseAlive) {
    return refuse("already_authority", "refused", `this gateway already holds the room at epoch ${record.epoch}`, { authority: holder });
  }
  if (record.lease !== null && input.recordLeaseAlive) {
    return refuse(
      "lease_valid",
      "authority_conflict",
      `${record.gateway_id} holds the room at epoch ${record.epoch} under a live lease; wait for it to expire, or demote that gateway first`,
      { authority: holder },
    );
  }
  const inIsr = record.isr.includes(self);
  if (!inIsr && input.mode !== "promote_unclean") {
    return refuse(
      "not_in_isr",
      "refused",
      `this gateway is not in the room's in-sync replicas (${record.isr.join(", ")}), so it may lack acknowledged sends` +
        (input.mode === "promote" ? "; promote --unclean accepts that loss" : ""),
      { authority: holder, isr: record.isr },
    );
  }
  const epoch = Math.max(record.epoch, input.localMaxEpoch) + 1;
  // The dead authority leaves the ISR, unless it is the claimant itself (restarted with a new lease).
  const isr = [self, ...record.isr.filter((g) => g !== self && g !== record.gateway_id)];
  const replicas = record.replicas.includes(self) ? record.replicas : [...record.replicas, self].sort();
  return {
    kind: "claim",
    record: { gateway_id: self, epoch, isr, replicas, min_insync: record.min_insync, lease: input.selfLease },
    previous: holder,
    unclean: !inIsr,
  };
}

/** The first record of a room, written by its creator (the write expects no key). `replicas` includes the creator. */
export function initialRecord(
  self: string,
  selfLease: string,
  epoch: number,
  policy: { replicas: readonly string[]; min_insync: number } = { replicas: [self], min_insync: 1 },
): AuthorityRecord {
  const replicas = [...new Set([self, ...policy.replicas])].sort();
  return { gateway_id: self, epoch, isr: [self], replicas, min_insync: policy.min_insync, lease: selfLease };
}

/** Whether this gateway, holding `selfLease`, is the authority the record names under that lease. */
export function holdsRecord(record: AuthorityRecord, self: string, selfLease: string): boolean {
  return record.gateway_id === self && record.lease === selfLease;
}

export type HolderChange = { kind: "write"; record: AuthorityRecord } | Refusal<"not_holder">;

function notHolder(record: AuthorityRecord, self: string): Refusal<"not_holder"> {
  return refuse(
    "not_holder",
    "not_authority",
    `the record names ${record.gateway_id}@${record.epoch}, not this gateway (${self}) under its lease`,
    {
      authority: { gateway_id: record.gateway_id, epoch: record.epoch },
    },
  );
}

/** The authority records a new ISR (same epoch). The authority stays first. */
export function changeIsr(record: AuthorityRecord, self: string, selfLease: string, isr: readonly string[]): HolderChange {
  if (!holdsRecord(record, self, selfLease)) return notHolder(record, self);
  return { kind: "write", record: { ...record, isr: [self, ...isr.filter((g) => g !== self && record.replicas.includes(g))] } };
}

/**
 * A planned hand-over (manual demote): the authority stops acknowledging first, then clears the
 * lease from the record, so an ISR member may claim at once instead of waiting for the TTL.
 */
export function releaseRecord(record: AuthorityRecord, self: string, selfLease: string): HolderChange {
  if (!holdsRecord(record, self, selfLease)) return notHolder(record, self);
  return { kind: "write", record: { ...record, lease: null } };
}
