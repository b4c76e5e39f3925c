import type { AuthorityRecord } from "./authority-record.js";

/**
 * What a gateway does about one coordinated room, given the room's authority record and its own
 * copy: lead it, claim it (the holder's lease is gone), follow the holder (demoting itself first
 * when it still leads at an older epoch), or wait. The gateway runs this on every change it hears
 * of (the record, a registration leaving, its own lease) and carries out the answer; the claim
 * itself is decided again, against the record read at that moment, by `decideClaim` and one
 * compare-and-swap.
 */

export interface LocalCopy {
  role: "authority" | "replica";
  /** The epoch of the authority this copy names (its own when it leads). */
  epoch: number;
}

export interface RoomCourseInput {
  self: string;
  /** This gateway's lease id while it is valid by its own clock, else null. */
  selfLease: string | null;
  /** The record, already assessed against what this gateway knows (never a refused one). */
  record: AuthorityRecord;
  /** Whether the lease the record names is alive in etcd (false for a released record). */
  recordLeaseAlive: boolean;
  /** This gateway's copy of the room, or null when it holds none yet. */
  local: LocalCopy | null;
  /** This gateway released the room itself (a planned demote) and waits for another to claim it. */
  released: boolean;
  /** An operator stopped this replica's following (`groups stop`). */
  paused: boolean;
}

export type RoomCourse =
  /** Not one of the room's replicas. */
  | { kind: "ignore" }
  /** The record names this gateway under its valid lease. `promote`: the local copy is behind the record's epoch (a claim whose local half did not happen). */
  | { kind: "lead"; promote: boolean }
  /** The holder's lease is gone and this gateway is in the ISR: claim the room at a new epoch. */
  | { kind: "claim" }
  /** Follow the holder; `demote` first when this gateway still leads the room at an older epoch. */
  | { kind: "follow"; authority: { gateway_id: string; epoch: number }; demote: boolean }
  | { kind: "wait"; why: string };

export function decideRoomCourse(input: RoomCourseInput): RoomCourse {
  const { self, record, local } = input;
  if (!record.replicas.includes(self)) return { kind: "ignore" };
  const holder = { gateway_id: record.gateway_id, epoch: record.epoch };
  const ours = record.gateway_id === self;
  const demote = local?.role === "authority" && local.epoch < record.epoch;
  if (ours && input.selfLease !== null && record.lease === input.selfLease) {
    return { kind: "lead", promote: local === null || local.role !== "authority" || local.epoch < record.epoch };
  }
  if (!ours && (input.recordLeaseAlive || input.released)) {
    if (input.paused) return { kind: "wait", why: "following is paused by an operator (groups stop); groups replicate resumes it" };
    return { kind: "follow", authority: holder, demote };
  }
  if (ours && input.released && record.lease === null) {
    return { kind: "wait", why: "released by this gateway: an in-sync replica claims it" };
  }
  if (input.recordLeaseAlive) {
    // The record names this gateway under another lease that is still alive: an earlier process of
    // this gateway (killed, its lease not expired yet). It holds nothing any more; wait for the lease.
    return { kind: "wait", why: `the record names this gateway under lease ${record.lease}, which etcd has not expired yet` };
  }
  if (input.selfLease === null) return { kind: "wait", why: "this gateway holds no valid lease; it claims nothing" };
  if (record.isr.includes(self)) return { kind: "claim" };
  if (ours) return { kind: "wait", why: "this gateway is not in the room's in-sync replicas" };
  if (input.paused) return { kind: "wait", why: "following is paused by an operator (groups stop); groups replicate resumes it" };
  // The holder is gone and this replica may not take over: keep following it (an in-sync replica will claim).
  return { kind: "follow", authority: holder, demote };
}
