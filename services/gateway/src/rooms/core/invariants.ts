import { verifyChain } from "./hash-chain.js";
import { entryAt, lastEntry, lineageProblem, maxEpoch } from "./lineage.js";
import { roleFor } from "./room-state.js";
import type { RoomEvent, RoomState } from "./types.js";

/**
 * Every rule that must hold between a room's state and its stored log, as a list of violations
 * (empty when all hold). Tests run it after every step; a store may run it in a self-check.
 * `events` is the whole local log in seq order.
 */
export function roomInvariantViolations(state: RoomState, events: readonly RoomEvent[]): string[] {
  const problems: string[] = [];
  const fail = (message: string) => problems.push(`${state.self_gateway_id}/${state.room_id}: ${message}`);

  if (state.role !== roleFor(state.self_gateway_id, state.authority))
    fail(`role ${state.role} but authority is ${state.authority.gateway_id}`);
  if (events.length !== state.last_seq) fail(`last_seq ${state.last_seq} but ${events.length} events stored`);
  const chain = verifyChain(events, 0, "");
  if (!chain.ok) fail(`log chain broken at seq ${chain.seq}: ${chain.detail}`);
  else if (chain.last_hash !== state.last_hash) fail("last_hash is not the hash of the last event");

  const lineage = lineageProblem(state.lineage, state.last_seq);
  if (lineage !== null) fail(`lineage: ${lineage}`);
  for (const entry of state.lineage) if (entry.start_seq > state.last_seq) fail(`lineage entry ${entry.epoch} starts after the log end`);
  const ids = new Set<string>();
  for (const event of events) {
    if (ids.has(event.event_id)) fail(`event_id ${event.event_id} appears twice`);
    ids.add(event.event_id);
    const entry = entryAt(state.lineage, event.seq);
    if (entry?.epoch !== event.epoch) fail(`event at seq ${event.seq} has epoch ${event.epoch}, lineage says ${entry?.epoch}`);
  }

  const disbandAt = events.findIndex((event) => event.kind === "room.disbanded");
  if (state.disbanded !== disbandAt >= 0)
    fail(`disbanded is ${state.disbanded} but the log ${disbandAt >= 0 ? "has" : "has no"} room.disbanded`);
  if (disbandAt >= 0 && disbandAt !== events.length - 1) fail("events follow room.disbanded");

  if (state.max_epoch_seen < Math.max(state.authority.epoch, maxEpoch(state.lineage), state.fenced_by?.epoch ?? 0)) {
    fail(`max_epoch_seen ${state.max_epoch_seen} is below an epoch held in state`);
  }
  if ((state.fenced_by !== null) !== (state.safety_status === "fenced"))
    fail(`fenced_by and safety_status ${state.safety_status} disagree`);
  if ((state.safety_status === "passive") !== (state.safety_reason === null)) fail("safety_reason must be set exactly when not passive");

  if (state.role === "authority") {
    const last = lastEntry(state.lineage);
    if (state.latest_seq !== state.last_seq) fail(`authority latest_seq ${state.latest_seq} ≠ last_seq ${state.last_seq}`);
    if (last?.epoch !== state.authority.epoch || last.gateway_id !== state.self_gateway_id) {
      fail("an authority's lineage must end with its own epoch");
    }
    if (state.safety_status === "quarantined" || state.safety_status === "diverged") fail(`an authority cannot be ${state.safety_status}`);
  } else if (state.fenced_by !== null) {
    fail("only an authority can be fenced");
  }
  return problems;
}
