import { HermesError } from "@hermes/common/pure";

/**
 * The operator runbook's safety checks, in one place for every front end: the `hermes groups
 * promote` command and the console's Runbook view print the same fencing checklist and refuse the
 * same promotes. The gateway's own `groups.promote` checks only what it can know (confirm, role,
 * fencing); whether the replica holds enough of the log is the operator's call, made here.
 */

/** What the checks read of a room's replica state (`groups.replica_state`). */
export interface PromoteCoverage {
  room_id: string;
  role: string;
  caught_up: boolean;
  /** Events stored here. */
  last_seq: number;
  /** The authority's latest seq as of the last page (0: unknown since the authority changed). */
  latest_seq: number;
  authority?: { gateway_id: string; epoch: number } | null | undefined;
}

/**
 * The fencing checklist shown before a promote on gateway `here`: a title line, then numbered steps.
 * `unclean` (quorum rooms): the claim may be made outside the in-sync replicas, which adds a step.
 */
export function promoteChecklist(here: string, s: PromoteCoverage, unclean = false): string[] {
  const previous = s.authority ? `${s.authority.gateway_id}@${s.authority.epoch}` : "the previous authority";
  const steps = [
    `Fencing checklist before promoting ${s.room_id} on ${here}:`,
    `  1. ${previous} cannot commit: its room writers are stopped and cannot restart, or it is cut off from every client. A timeout or groups stop is not proof.`,
    `  2. This replica holds seq ${s.last_seq} of the authority's ${s.latest_seq} (${s.caught_up ? "caught up as of the last page" : "NOT caught up"}).`,
    `  3. Afterwards, on ${s.authority?.gateway_id ?? "the old authority"} and before its writers return: hermes groups demote ${s.room_id} --observed-gateway ${here} --observed-epoch <the new epoch>`,
    `  4. Point clients at ${here}; compare hermes groups state ${s.room_id} on both gateways.`,
  ];
  if (unclean) {
    steps.push(
      `  5. --unclean: ${here} may lack sends the room acknowledged (it is not known to be in sync); they are lost to the new lineage. Check groups replica-state on every replica first and promote the most complete.`,
    );
  }
  return steps;
}

/**
 * The coverage check: a replica that is not caught up is refused unless the operator accepts
 * losing what never arrived (`allowIncomplete`). Undefined when the promote may go ahead.
 */
export function promoteCoverageRefusal(s: PromoteCoverage, allowIncomplete: boolean): HermesError | undefined {
  if (s.role !== "replica" || s.caught_up || allowIncomplete) return undefined;
  const unknown = s.latest_seq === 0 ? " unknown: no page since the authority changed" : "";
  return new HermesError(
    "refused",
    `${s.room_id} is not caught up here (stored ${s.last_seq}, authority's latest ${s.latest_seq}${unknown}); replicate first, or pass --allow-incomplete to accept losing what never arrived`,
    { data: { last_seq: s.last_seq, latest_seq: s.latest_seq } },
  );
}

/** The step after a promote, on the old authority (the exact values: an epoch is never guessed). */
export function demoteCommand(roomId: string, authority: { gateway_id: string; epoch: number }): string {
  return `hermes groups demote ${roomId} --observed-gateway ${authority.gateway_id} --observed-epoch ${authority.epoch}`;
}
