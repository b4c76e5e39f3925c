import { observeEpoch } from "./authority.js";
import { hashChains } from "./hash-chain.js";
import { clipLineage, divergencePoint, entryAt, formatAuthority, lastEntry, lineageProblem, sameAuthority } from "./lineage.js";
import { type Refusal, refusal } from "./refusal.js";
import type { Authority, DivergenceRecord, LocalLogLookup, LogPage, RoomEvent, RoomState } from "./types.js";

/**
 * Pull replication and divergence: what a replica does with one `groups.log` page. The store applies
 * the decision in ONE transaction:
 * - `apply`: insert `events`, save `state`.
 * - `noop`: nothing to insert (identical overlap or an empty page); save `state` (latest_seq/authority may move).
 * - `refetch`: nothing changes; fetch a page from `since_seq` (it carries the hash needed to confirm a divergence).
 * - `diverged`: move local events `moved.from_seq..moved.to_seq` to `room_divergent_events` with
 *   `divergence` (nothing is deleted), then insert `events`, save `state`.
 * - `quarantined`: nothing is inserted; save `state` (safety_status quarantined, reason). Later pages are refused until released.
 * - `refused`: nothing is inserted; save `state` if `fence` is set (this gateway leads the room and was just fenced).
 */
export type ReplicationDecision =
  | { kind: "apply"; events: RoomEvent[]; overlap: number; state: RoomState; caught_up: boolean }
  | { kind: "noop"; overlap: number; state: RoomState; caught_up: boolean }
  | { kind: "refetch"; since_seq: number; detail: string }
  | {
      kind: "diverged";
      divergence: DivergenceRecord;
      moved: { from_seq: number; to_seq: number };
      events: RoomEvent[];
      overlap: number;
      state: RoomState;
      caught_up: boolean;
    }
  | { kind: "quarantined"; refusal: Refusal; state: RoomState }
  | { kind: "refused"; refusal: Refusal; state: RoomState; fence: Authority | null };

/** Reasons that quarantine a replica: it keeps what it has and applies nothing more until released. */
export type QuarantineReason =
  | "replica_gap"
  | "hash_mismatch"
  | "epoch_regression"
  | "latest_seq_regression"
  | "lineage_mismatch"
  | "room_disbanded";

export function quarantine(
  state: RoomState,
  reason: QuarantineReason,
  message: string,
  data: Record<string, unknown> = {},
): ReplicationDecision {
  return {
    kind: "quarantined",
    refusal: refusal(reason, `room ${state.room_id} quarantined: ${message}`, { ...data, authority: { ...state.authority } }),
    state: { ...state, safety_status: "quarantined", safety_reason: `${reason}: ${message}` },
  };
}

/**
 * Decides what a replica does with `page`. `local` reads stored events by seq (only seqs ≤
 * state.last_seq are asked for); `now` stamps a divergence record.
 */
export function planReplication(state: RoomState, page: LogPage, local: LocalLogLookup, now: string): ReplicationDecision {
  if (page.room_id !== state.room_id) {
    return {
      kind: "refused",
      refusal: refusal("invalid_params", `page is for room ${page.room_id}, not ${state.room_id}`),
      state,
      fence: null,
    };
  }

  // A gateway never applies pages for a room it leads (even fenced: it leaves that role by demote).
  if (state.role === "authority") {
    const fenced = observeEpoch(state, page.authority);
    return {
      kind: "refused",
      refusal: refusal(
        "authority_conflict",
        `this gateway is the authority of room ${state.room_id} (epoch ${state.authority.epoch}); demote it before replicating from ${formatAuthority(page.authority)}`,
        { authority: { ...page.authority } },
      ),
      state: fenced?.state ?? state,
      fence: fenced?.fence ?? null,
    };
  }

  if (state.safety_status === "quarantined") {
    return {
      kind: "refused",
      refusal: refusal(
        "replica_quarantined",
        `room ${state.room_id} is quarantined (${state.safety_reason}); release it before replicating`,
        {
          safety_reason: state.safety_reason,
        },
      ),
      state,
      fence: null,
    };
  }

  const malformed = pageProblem(state, page);
  if (malformed !== null) return quarantine(state, malformed.reason, malformed.message);

  // Epochs never go back: a page from an authority older than one already seen is stale.
  if (page.authority.epoch < state.max_epoch_seen) {
    return quarantine(
      state,
      "epoch_regression",
      `page from ${formatAuthority(page.authority)} but epoch ${state.max_epoch_seen} was already seen`,
      { page_epoch: page.authority.epoch, seen_epoch: state.max_epoch_seen },
    );
  }
  const known = state.authority;
  if (known.epoch > 0 && page.authority.epoch === known.epoch && page.authority.gateway_id !== known.gateway_id) {
    return quarantine(
      state,
      "lineage_mismatch",
      `${page.authority.gateway_id} and ${known.gateway_id} both claim epoch ${known.epoch}; promote one of them again to settle it`,
    );
  }
  if (sameAuthority(page.authority, known) && page.latest_seq < state.latest_seq) {
    return quarantine(
      state,
      "latest_seq_regression",
      `${formatAuthority(known)} reported latest_seq ${state.latest_seq} before and ${page.latest_seq} now (restored from an older copy?)`,
      { latest_seq: page.latest_seq, previous_latest_seq: state.latest_seq },
    );
  }

  const point = divergencePoint(state.lineage, state.last_seq, page.lineage, page.latest_seq);
  if (point < state.last_seq) return planDivergence(state, page, local, point, now);
  return planApply(state, page, local);
}

/** Structural checks of a page against its own lineage, or null when it is well formed. */
function pageProblem(state: RoomState, page: LogPage): { reason: QuarantineReason; message: string } | null {
  const authority = page.authority;
  if (!Number.isSafeInteger(authority.epoch) || authority.epoch < 1 || typeof authority.gateway_id !== "string") {
    return { reason: "lineage_mismatch", message: "the page names no valid authority" };
  }
  if (authority.gateway_id === state.self_gateway_id) {
    return {
      reason: "lineage_mismatch",
      message: `the page names this gateway (${authority.gateway_id}) as authority, but it is a replica here`,
    };
  }
  if (!Number.isSafeInteger(page.latest_seq) || page.latest_seq < 0) {
    return { reason: "lineage_mismatch", message: `the page has an invalid latest_seq ${page.latest_seq}` };
  }
  const problem = lineageProblem(page.lineage, page.latest_seq);
  if (problem !== null) return { reason: "lineage_mismatch", message: `the page lineage is malformed: ${problem}` };
  const last = lastEntry(page.lineage);
  if (last === undefined || last.epoch !== authority.epoch || last.gateway_id !== authority.gateway_id) {
    return {
      reason: "lineage_mismatch",
      message: `the page claims authority ${formatAuthority(authority)} but its lineage ends with ${last ? formatAuthority(last) : "nothing"} (authority change without lineage evidence)`,
    };
  }
  const first = page.events[0];
  if (first !== undefined) {
    const expectedPrev = first.seq - 1;
    if (expectedPrev === 0 ? page.prev !== null : page.prev?.seq !== expectedPrev) {
      return {
        reason: "replica_gap",
        message: `the page starts at seq ${first.seq} but its prev pointer is at ${page.prev?.seq ?? "none"}`,
      };
    }
  }
  if (page.prev !== null) {
    const prevEntry = entryAt(page.lineage, page.prev.seq);
    if (page.prev.seq < 1 || page.prev.seq > page.latest_seq || prevEntry?.epoch !== page.prev.epoch) {
      return {
        reason: "lineage_mismatch",
        message: `the prev pointer (seq ${page.prev.seq}, epoch ${page.prev.epoch}) does not fit the page lineage`,
      };
    }
  }
  let expected = first?.seq ?? 0;
  for (const event of page.events) {
    if (event.room_id !== state.room_id)
      return { reason: "lineage_mismatch", message: `event ${event.event_id} belongs to room ${event.room_id}` };
    if (event.seq !== expected) return { reason: "replica_gap", message: `the page jumps from seq ${expected - 1} to ${event.seq}` };
    if (event.seq > page.latest_seq)
      return { reason: "lineage_mismatch", message: `event seq ${event.seq} is beyond the page latest_seq ${page.latest_seq}` };
    const entry = entryAt(page.lineage, event.seq);
    if (entry?.epoch !== event.epoch) {
      return {
        reason: "lineage_mismatch",
        message: `event ${event.event_id} at seq ${event.seq} has epoch ${event.epoch}; the lineage says ${entry?.epoch}`,
      };
    }
    expected++;
  }
  return null;
}

/**
 * The authority's hash at `seq` as the page shows it (prev pointer or an event), else undefined.
 * Only a page that starts at or before seq + 1 shows it, so the events after it can be applied too.
 */
function authorityHashAt(page: LogPage, seq: number): string | undefined {
  if (seq === 0) return page.prev === null ? "" : undefined;
  if (page.prev?.seq === seq) return page.prev.hash;
  return page.events.find((event) => event.seq === seq)?.hash;
}

function localHashAt(state: RoomState, local: LocalLogLookup, seq: number): string | undefined {
  if (seq === 0) return "";
  if (seq === state.last_seq) return state.last_hash;
  return local(seq)?.hash;
}

/**
 * The page's lineage branched below our last_seq: events point+1..last_seq here are not on the
 * winning lineage. Confirm with the hash at the divergence point, then preserve the local branch
 * and continue with the page as if the log ended at the point.
 */
function planDivergence(state: RoomState, page: LogPage, local: LocalLogLookup, point: number, now: string): ReplicationDecision {
  const theirs = authorityHashAt(page, point);
  if (theirs === undefined) {
    return {
      kind: "refetch",
      since_seq: point,
      detail: `the lineage of ${formatAuthority(page.authority)} branches after seq ${point}; fetch from there to confirm with the hash chain`,
    };
  }
  const ours = localHashAt(state, local, point);
  if (ours !== theirs) {
    return quarantine(
      state,
      "hash_mismatch",
      `the lineages agree up to seq ${point} but the hashes there differ; the logs split earlier than the lineage shows`,
      { seq: point },
    );
  }
  let markersOnly = true;
  for (let seq = point + 1; seq <= state.last_seq; seq++) {
    if (local(seq)?.kind !== "authority.lost") {
      markersOnly = false;
      break;
    }
  }
  const branch = entryAt(state.lineage, state.last_seq)!;
  const divergence: DivergenceRecord = {
    room_id: state.room_id,
    detected_at: now,
    from_seq: point + 1,
    branch_epoch: branch.epoch,
    branch_gateway_id: branch.gateway_id,
    winning_epoch: page.authority.epoch,
    winning_gateway_id: page.authority.gateway_id,
    count: state.last_seq - point,
    markers_only: markersOnly,
  };
  const truncated: RoomState = {
    ...state,
    lineage: clipLineage(state.lineage, point),
    last_seq: point,
    last_hash: ours,
  };
  const applied = planApply(truncated, page, (seq) => (seq <= point ? local(seq) : undefined));
  if (applied.kind === "quarantined") {
    // Nothing moves when the page itself is bad: quarantine the room as it stands.
    return { ...applied, state: { ...state, safety_status: "quarantined", safety_reason: applied.state.safety_reason } };
  }
  if (applied.kind !== "apply" && applied.kind !== "noop") return applied;
  // Only authority.lost markers (what demote wrote into the log before it kept an audit record
  // instead) off the winning lineage: a clean handover. The branch is preserved all the same, but
  // it raises no alarm.
  const safety: Pick<RoomState, "safety_status" | "safety_reason"> = markersOnly
    ? { safety_status: applied.state.safety_status, safety_reason: applied.state.safety_reason }
    : {
        safety_status: "diverged",
        safety_reason: `diverged: ${divergence.count} event${divergence.count === 1 ? "" : "s"} from seq ${point + 1} of ${branch.gateway_id}@${branch.epoch} preserved; ${formatAuthority(page.authority)} won`,
      };
  return {
    kind: "diverged",
    divergence,
    moved: { from_seq: point + 1, to_seq: state.last_seq },
    events: applied.kind === "apply" ? applied.events : [],
    overlap: applied.overlap,
    state: { ...applied.state, ...safety },
    caught_up: applied.caught_up,
  };
}

/** The page continues (or overlaps) our log on the same lineage: check Log Matching and the chain, then append. */
function planApply(state: RoomState, page: LogPage, local: LocalLogLookup): ReplicationDecision {
  const last = state.last_seq;
  if (page.prev !== null) {
    if (page.prev.seq > last) {
      return quarantine(state, "replica_gap", `the page starts after seq ${page.prev.seq} but this replica holds only up to ${last}`, {
        last_seq: last,
      });
    }
    if (localHashAt(state, local, page.prev.seq) !== page.prev.hash) {
      return quarantine(state, "hash_mismatch", `the event before the page (seq ${page.prev.seq}) has a different hash here`, {
        seq: page.prev.seq,
      });
    }
  }
  // The page's seqs ascend one by one (pageProblem): the events this replica holds come first.
  const events = page.events;
  let overlap = 0;
  for (; overlap < events.length && events[overlap]!.seq <= last; overlap++) {
    const event = events[overlap]!;
    if (localHashAt(state, local, event.seq) !== event.hash) {
      return quarantine(state, "hash_mismatch", `event ${event.event_id} at seq ${event.seq} differs from the stored one`, {
        seq: event.seq,
      });
    }
  }
  const fresh = overlap === 0 ? events : events.slice(overlap);
  let hash = state.last_hash;
  let disbanded = state.disbanded;
  for (const event of fresh) {
    if (disbanded) {
      return quarantine(state, "room_disbanded", `event ${event.event_id} at seq ${event.seq} follows room.disbanded`, { seq: event.seq });
    }
    if (!hashChains(hash, event)) {
      return quarantine(state, "hash_mismatch", `event ${event.event_id} at seq ${event.seq} does not chain from seq ${event.seq - 1}`, {
        seq: event.seq,
      });
    }
    hash = event.hash;
    if (event.kind === "room.disbanded") disbanded = true;
  }
  const newLast = last + fresh.length;
  const next: RoomState = {
    ...state,
    role: "replica",
    authority: { ...page.authority },
    lineage: clipLineage(page.lineage, newLast),
    last_seq: newLast,
    last_hash: hash,
    latest_seq: page.latest_seq,
    max_epoch_seen: Math.max(state.max_epoch_seen, page.authority.epoch),
    disbanded,
  };
  const caughtUp = newLast >= page.latest_seq;
  if (fresh.length === 0) return { kind: "noop", overlap, state: next, caught_up: caughtUp };
  return { kind: "apply", events: fresh, overlap, state: next, caught_up: caughtUp };
}
