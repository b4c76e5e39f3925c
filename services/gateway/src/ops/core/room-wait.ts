/**
 * `hermes wait room ROOM --for CONDITION`, as `kubectl wait`: the conditions a room's replica state
 * (`groups.replica_state` on the gateway asked) can meet.
 */

export const WAIT_CONDITIONS = ["caught-up", "authority", "passive"] as const;
export type WaitCondition = (typeof WAIT_CONDITIONS)[number];

/** What the conditions read of a room's replica state. */
export interface WaitableRoomState {
  role: string;
  caught_up: boolean;
  safety_status: string;
  last_seq: number;
  latest_seq: number;
  authority?: { gateway_id: string; epoch: number } | null | undefined;
}

export function isWaitCondition(value: string): value is WaitCondition {
  return (WAIT_CONDITIONS as readonly string[]).includes(value);
}

/**
 * Whether `state` meets `condition`, and the state in words either way:
 * - caught-up: the copy holds the authority's latest seq (an authority always does);
 * - authority: this gateway leads the room and is not fenced;
 * - passive: no safety alarm (not fenced, diverged or quarantined).
 */
export function waitConditionMet(condition: WaitCondition, state: WaitableRoomState): { met: boolean; now: string } {
  const lead = state.authority ? `${state.authority.gateway_id}@${state.authority.epoch}` : "unknown";
  switch (condition) {
    case "caught-up":
      return {
        met: state.caught_up,
        now: `${state.role}, stored ${state.last_seq} of ${state.latest_seq}${state.caught_up ? " (caught up)" : ""}`,
      };
    case "authority":
      return {
        met: state.role === "authority" && state.safety_status !== "fenced",
        now: `${state.role}${state.safety_status === "fenced" ? " (fenced)" : ""}, authority ${lead}`,
      };
    case "passive":
      return { met: state.safety_status === "passive", now: `safety ${state.safety_status}` };
  }
}
