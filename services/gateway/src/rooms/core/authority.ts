import { MAX_EPOCH, MAX_NAME_CHARS } from "./limits.js";
import { formatAuthority, maxEpoch, sameAuthority } from "./lineage.js";
import { type Refusal, refusal } from "./refusal.js";
import { AUTHORITY_CONTROL_ACTOR, type EventIdLookup, nextServerEvent, serverEventId } from "./room-state.js";
import type { Authority, DemotionRecord, RoomEvent, RoomState } from "./types.js";
import { checkId } from "./validation.js";

/**
 * Authority transfer: promote on the replacement, demote on the old authority, and
 * self-fencing whenever an authority learns of a newer (or competing) epoch for its room.
 */

export const DEFAULT_PROMOTE_REASON = "authority-unreachable";

/**
 * Self-fencing. Call it whenever this gateway learns `(room_id, epoch, gateway)` from anywhere: a
 * page, a subscribe handshake, a relay roster, a peer RPC. For a room this gateway leads, an epoch
 * above its own — or its own epoch claimed by another gateway (two promotions that did not see each
 * other) — fences the room: sends are refused with `authority_conflict` until it is demoted.
 * Returns null when nothing changes (not the authority, or the observation is not newer than what
 * is already recorded). A higher epoch for this gateway's own id also fences: it means this state
 * was restored from an older copy (restart amnesia).
 */
export function observeEpoch(state: RoomState, observed: Authority): { state: RoomState; fence: Authority } | null {
  if (state.role !== "authority") return null;
  if (!Number.isSafeInteger(observed.epoch) || observed.epoch < 1) return null;
  const own = state.authority;
  const newer = observed.epoch > own.epoch;
  const competing = observed.epoch === own.epoch && observed.gateway_id !== own.gateway_id;
  if (!newer && !competing) return null;
  if (state.fenced_by !== null && state.fenced_by.epoch >= observed.epoch) return null;
  const fence = { gateway_id: observed.gateway_id, epoch: observed.epoch };
  return {
    fence,
    state: {
      ...state,
      fenced_by: fence,
      max_epoch_seen: Math.max(state.max_epoch_seen, observed.epoch),
      safety_status: "fenced",
      safety_reason: `fenced: ${formatAuthority(fence)} claims room ${state.room_id} (this gateway holds epoch ${own.epoch})`,
    },
  };
}

export interface PromoteInput {
  confirm: unknown;
  reason?: unknown;
  /** Highest epoch found in ANY durable state of this gateway (all rooms' rows, lineage, epoch counters). */
  max_durable_epoch: number;
  /** The room's stored event ids: the claim takes a fresh id when its usual one is already held. */
  stored: EventIdLookup;
  /**
   * A coordinated claim: the epoch the coordinator's record now holds for this gateway (won by
   * compare-and-swap). It must be above every epoch known here; the gateway may lead the room
   * already (at an older epoch, under a lease that expired).
   */
  claim_epoch?: number;
}

/** `groups.promote` result. */
export interface PromoteResult {
  room_id: string;
  authority_gateway_id: string;
  authority_epoch: number;
  previous_gateway_id: string;
  previous_epoch: number;
  claim_seq: number;
  latest_seq: number;
}

export type PromotePlan =
  | {
      ok: true;
      /** The `authority.claimed` event to insert at claim_seq, in the same transaction as `state`. */
      claim: RoomEvent;
      state: RoomState;
      result: PromoteResult;
      /** The new epoch; the store must make it durable (with the claim) before any send uses it. */
      epoch: number;
    }
  | { ok: false; refusal: Refusal };

/**
 * Promote this gateway to authority. Confirmation is the operator's assertion that the previous
 * authority can no longer commit; the RPC does not check coverage (the CLI does). The claim goes at
 * last_seq + 1 in a new epoch above every epoch this gateway has durably seen, and the lineage gets
 * (epoch, self, claim_seq). A fenced authority may promote again (it takes a newer epoch).
 */
export function planPromote(state: RoomState, input: PromoteInput, now: string): PromotePlan {
  if (input.confirm !== true) {
    return {
      ok: false,
      refusal: refusal(
        "confirm_required",
        "promotion requires confirm=true acknowledging the previous authority can no longer commit; fence it first (stop it or cut it off), then retry with confirm",
      ),
    };
  }
  const reason = input.reason ?? DEFAULT_PROMOTE_REASON;
  if (typeof reason !== "string" || reason.length === 0 || reason.length > MAX_NAME_CHARS) {
    return { ok: false, refusal: refusal("invalid_params", `reason must be text of 1–${MAX_NAME_CHARS} characters`, { field: "reason" }) };
  }
  if (!Number.isSafeInteger(input.max_durable_epoch) || input.max_durable_epoch < 0) {
    return { ok: false, refusal: refusal("invalid_params", `max_durable_epoch must be an integer ≥ 0`, { field: "max_durable_epoch" }) };
  }
  if (state.disbanded) {
    return { ok: false, refusal: refusal("room_disbanded", `room ${state.room_id} is disbanded; there is nothing to promote`) };
  }
  if (state.role === "authority" && state.fenced_by === null && input.claim_epoch === undefined) {
    return {
      ok: false,
      refusal: refusal(
        "refused",
        `this gateway already leads room ${state.room_id} at epoch ${state.authority.epoch}; nothing to promote`,
        {
          authority: { ...state.authority },
        },
      ),
    };
  }
  // At least 2: the creator of a room holds epoch 1, so even a replica that never saw a page
  // (authority epoch 0) must not claim the creator's epoch.
  const known = Math.max(
    1,
    input.max_durable_epoch,
    state.max_epoch_seen,
    state.authority.epoch,
    state.fenced_by?.epoch ?? 0,
    maxEpoch(state.lineage),
  );
  if (input.claim_epoch !== undefined && !(Number.isSafeInteger(input.claim_epoch) && input.claim_epoch > known)) {
    return {
      ok: false,
      refusal: refusal("epoch_regression", `the claimed epoch ${input.claim_epoch} is not above epoch ${known} known here`, {
        claim_epoch: input.claim_epoch,
        known_epoch: known,
      }),
    };
  }
  const epoch = input.claim_epoch ?? known + 1;
  if (epoch > MAX_EPOCH) {
    return {
      ok: false,
      refusal: refusal("limit_exceeded", `room ${state.room_id} has used up its epochs (the next would be ${epoch}, above ${MAX_EPOCH})`),
    };
  }
  const previous = state.fenced_by ?? state.authority;
  const claimSeq = state.last_seq + 1;
  const claim = nextServerEvent(
    state,
    {
      event_id: serverEventId(`system:authority-claimed:${epoch}`, input.stored),
      kind: "authority.claimed",
      actor: AUTHORITY_CONTROL_ACTOR,
      epoch,
      payload: {
        previous_gateway_id: previous.gateway_id,
        authority_gateway_id: state.self_gateway_id,
        authority_epoch: epoch,
        reason,
        promoted_from_replica: state.role === "replica",
      },
    },
    now,
  );
  const authority = { gateway_id: state.self_gateway_id, epoch };
  return {
    ok: true,
    claim,
    epoch,
    state: {
      ...state,
      role: "authority",
      authority,
      lineage: [...state.lineage.map((entry) => ({ ...entry })), { epoch, gateway_id: state.self_gateway_id, start_seq: claimSeq }],
      last_seq: claimSeq,
      last_hash: claim.hash,
      latest_seq: claimSeq,
      max_epoch_seen: epoch,
      fenced_by: null,
      safety_status: "passive",
      safety_reason: null,
    },
    result: {
      room_id: state.room_id,
      authority_gateway_id: state.self_gateway_id,
      authority_epoch: epoch,
      previous_gateway_id: previous.gateway_id,
      previous_epoch: previous.epoch,
      claim_seq: claimSeq,
      latest_seq: claimSeq,
    },
  };
}

export interface DemoteInput {
  observed_gateway_id: unknown;
  observed_epoch: unknown;
}

/** `groups.demote` result. */
export interface DemoteResult {
  room_id: string;
  authority_gateway_id: string;
  authority_epoch: number;
  idempotent: boolean;
}

export type DemotePlan =
  | { ok: true; idempotent: false; demotion: DemotionRecord; state: RoomState; result: DemoteResult }
  | { ok: true; idempotent: true; result: DemoteResult }
  | { ok: false; refusal: Refusal };

/**
 * Demote the old authority to a replica of the observed one. The observed epoch must be above this
 * gateway's own and not below any epoch it has seen. Its log stays as it is and it adopts the
 * observed authority; the demotion is recorded beside the log (`demotion`, an audit entry), never
 * appended to it: an event at last_seq + 1 would sit where the new authority's claim sits and fork
 * the log of every clean handover. The observed lineage arrives with the first page; anything this
 * gateway wrote past the divergence point (writes the new authority never saw) is preserved as a
 * divergent branch then. Repeating the same demote is idempotent.
 */
export function planDemote(state: RoomState, input: DemoteInput, now: string): DemotePlan {
  const gateway = checkId(input.observed_gateway_id, "observed_gateway_id");
  if (!gateway.ok) return { ok: false, refusal: gateway.refusal };
  const epoch = input.observed_epoch;
  if (typeof epoch !== "number" || !Number.isSafeInteger(epoch) || epoch < 1 || epoch > MAX_EPOCH) {
    return {
      ok: false,
      refusal: refusal("invalid_params", `observed_epoch is required and must be an integer from 1 to ${MAX_EPOCH}`, {
        field: "observed_epoch",
      }),
    };
  }
  const observed = { gateway_id: gateway.value, epoch };
  if (observed.gateway_id === state.self_gateway_id) {
    return { ok: false, refusal: refusal("invalid_params", "observed_gateway_id is this gateway; name the gateway that took over") };
  }
  const result = (idempotent: boolean): DemoteResult => ({
    room_id: state.room_id,
    authority_gateway_id: observed.gateway_id,
    authority_epoch: observed.epoch,
    idempotent,
  });
  if (state.role === "replica") {
    if (sameAuthority(state.authority, observed)) return { ok: true, idempotent: true, result: result(true) };
    return {
      ok: false,
      refusal: refusal(
        "not_authority",
        `this gateway is not the authority of room ${state.room_id}; it follows ${formatAuthority(state.authority)}`,
        { authority: { ...state.authority } },
      ),
    };
  }
  if (state.disbanded) {
    return { ok: false, refusal: refusal("room_disbanded", `room ${state.room_id} is disbanded; its log is closed`) };
  }
  if (observed.epoch <= state.authority.epoch || observed.epoch < state.max_epoch_seen) {
    const known = Math.max(state.authority.epoch, state.max_epoch_seen);
    return {
      ok: false,
      refusal: refusal(
        "epoch_regression",
        `observed epoch ${observed.epoch} is not newer than epoch ${known} known here; check which gateway holds the newest claim`,
        { authority: { ...(state.fenced_by ?? state.authority) }, observed_epoch: observed.epoch, known_epoch: known },
      ),
    };
  }
  if (state.fenced_by !== null && state.fenced_by.epoch === observed.epoch && state.fenced_by.gateway_id !== observed.gateway_id) {
    return {
      ok: false,
      refusal: refusal(
        "lineage_mismatch",
        `both ${observed.gateway_id} and ${state.fenced_by.gateway_id} claim epoch ${observed.epoch}; promote one of them again (it takes a newer epoch), then demote to it`,
        { authority: { ...state.fenced_by } },
      ),
    };
  }
  return {
    ok: true,
    idempotent: false,
    demotion: {
      room_id: state.room_id,
      demoted_at: now,
      previous_gateway_id: state.authority.gateway_id,
      previous_epoch: state.authority.epoch,
      authority_gateway_id: observed.gateway_id,
      authority_epoch: observed.epoch,
      last_seq: state.last_seq,
    },
    result: result(false),
    state: {
      ...state,
      role: "replica",
      authority: observed,
      // Nothing is known yet about how far the new authority's log goes; its first page tells.
      latest_seq: 0,
      max_epoch_seen: Math.max(state.max_epoch_seen, observed.epoch),
      fenced_by: null,
      safety_status: "passive",
      safety_reason: null,
    },
  };
}
