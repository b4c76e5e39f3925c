/**
 * A room created on gateway A (members ann and bob) followed by one client message per text, planned
 * with the core in batches of the largest group commit: the log the pure tests read and slice.
 */
import { planAppendBatch } from "../../../src/rooms/core/append.js";
import { MAX_BATCH_APPENDS } from "../../../src/rooms/core/limits.js";
import { planCreateRoom } from "../../../src/rooms/core/room-state.js";
import type { RoomEvent, RoomState } from "../../../src/rooms/core/types.js";

export function chatLog(roomId: string, texts: readonly string[], now: string): { state: RoomState; events: RoomEvent[] } {
  const created = planCreateRoom({
    room_id: roomId,
    name: "Room",
    members: [
      { member_id: "ann", profile: "ann" },
      { member_id: "bob", profile: "bob" },
    ],
    self_gateway_id: "A",
    now,
    retired: false,
    exists: false,
  });
  if (!created.ok) throw new Error(created.refusal.message);
  const items = texts.map((text, i) => ({
    request: {
      origin: "client" as const,
      event_id: `m${i + 2}`,
      kind: "message.user",
      actor: { kind: "user" as const, id: "u" },
      payload: { text },
    },
    stored: null,
  }));
  const events: RoomEvent[] = [created.event];
  let state = created.state;
  for (let i = 0; i < items.length; i += MAX_BATCH_APPENDS) {
    const plan = planAppendBatch(state, items.slice(i, i + MAX_BATCH_APPENDS), now);
    events.push(...plan.appended);
    state = plan.state;
  }
  return { state, events };
}
