/**
 * An in-memory gateway that stores rooms and drives them ONLY through the pure core API, the way the
 * SQLite store will: each method plans with a core function, then applies the decision atomically
 * (here: by replacing the room record). Used by the scenario scripts and the property test; it is
 * also the executable reference of what the store must do with each decision.
 */
import { type AppendItem, type AppendOutcome, type AppendRequest, planAppendBatch } from "../../../src/rooms/core/append.js";
import { observeEpoch, planDemote, planPromote } from "../../../src/rooms/core/authority.js";
import { buildLogPage, type LogReadParams, planLogRead } from "../../../src/rooms/core/log-page.js";
import type { Refusal } from "../../../src/rooms/core/refusal.js";
import { planReplication, type ReplicationDecision } from "../../../src/rooms/core/replication.js";
import { newReplicaState, planCreateRoom, releaseSafety } from "../../../src/rooms/core/room-state.js";
import type {
  Authority,
  DemotionRecord,
  DivergenceRecord,
  EventKind,
  LocalEntry,
  LogPage,
  RoomEvent,
  RoomState,
} from "../../../src/rooms/core/types.js";

export interface PreservedBranch {
  record: DivergenceRecord;
  events: RoomEvent[];
}

export interface SimRoom {
  state: RoomState;
  /** events[i] has seq i + 1. */
  events: RoomEvent[];
  divergences: PreservedBranch[];
  /** Audit records of this gateway's demotions for the room, oldest first. */
  demotions: DemotionRecord[];
}

function cloneRoom(room: SimRoom): SimRoom {
  return structuredClone(room);
}

export class SimGateway {
  readonly id: string;
  readonly rooms = new Map<string, SimRoom>();
  /** Rooms disbanded here: their ids stay retired. */
  readonly retired = new Set<string>();
  /** A durable epoch counter outside any room row (as the store's `max epoch` read covers all tables). */
  private epochHighWater = 0;

  constructor(id: string) {
    this.id = id;
  }

  room(roomId: string): SimRoom {
    const room = this.rooms.get(roomId);
    if (room === undefined) throw new Error(`${this.id} holds no room ${roomId}`);
    return room;
  }

  /** Max epoch in any durable state of this gateway: every room's state and the high-water mark. */
  maxDurableEpoch(): number {
    let max = this.epochHighWater;
    for (const room of this.rooms.values()) max = Math.max(max, room.state.max_epoch_seen);
    return max;
  }

  private save(roomId: string, room: SimRoom): void {
    this.rooms.set(roomId, room);
    this.epochHighWater = Math.max(this.epochHighWater, room.state.max_epoch_seen);
  }

  create(roomId: string, name: string, members: unknown, now: string): { ok: true; event: RoomEvent } | { ok: false; refusal: Refusal } {
    const plan = planCreateRoom({
      room_id: roomId,
      name,
      members,
      self_gateway_id: this.id,
      now,
      retired: this.retired.has(roomId),
      exists: this.rooms.has(roomId),
    });
    if (!plan.ok) return plan;
    this.save(roomId, { state: plan.state, events: [plan.event], divergences: [], demotions: [] });
    return { ok: true, event: plan.event };
  }

  /** Group commit: one transaction for the whole batch. */
  append(roomId: string, requests: AppendRequest[], now: string): AppendOutcome[] {
    const room = this.room(roomId);
    const byId = new Map(room.events.map((event) => [event.event_id, event]));
    const items: AppendItem[] = requests.map((request) => ({ request, stored: byId.get(request.event_id) ?? null }));
    const plan = planAppendBatch(room.state, items, now);
    if (plan.appended.length > 0) {
      this.save(roomId, { ...room, state: plan.state, events: [...room.events, ...plan.appended] });
      if (plan.state.disbanded) this.retired.add(roomId);
    }
    return plan.outcomes;
  }

  /** `groups.log`. A requester that knows an authority passes it, so this gateway can fence itself. */
  log(
    roomId: string,
    params: LogReadParams,
    requesterKnows?: Authority,
  ): { page: LogPage; fence: Authority | null } | { refusal: Refusal; fence: Authority | null } {
    let fence: Authority | null = null;
    if (requesterKnows !== undefined) fence = this.observe(roomId, requesterKnows);
    const room = this.room(roomId);
    const read = planLogRead(room.state, params);
    if (!read.ok) return { refusal: read.refusal, fence };
    const since = read.value.since_seq;
    const prev = since > 0 ? room.events[since - 1]! : null;
    const page = buildLogPage(room.state, read.value, prev, room.events.slice(since, since + read.value.limit));
    return { page, fence };
  }

  /** Applies one page in one transaction, creating the replica record on first use. */
  replicate(roomId: string, page: LogPage, sourceGatewayId: string, now: string): ReplicationDecision {
    const room = this.rooms.get(roomId) ?? {
      state: newReplicaState(roomId, this.id, sourceGatewayId),
      events: [],
      divergences: [],
      demotions: [],
    };
    const lookup = (seq: number): LocalEntry | undefined => {
      const event = seq >= 1 && seq <= room.state.last_seq ? room.events[seq - 1] : undefined;
      return event && { event_id: event.event_id, epoch: event.epoch, hash: event.hash, kind: event.kind };
    };
    const decision = planReplication(room.state, page, lookup, now);
    switch (decision.kind) {
      case "apply":
        this.save(roomId, { ...room, state: decision.state, events: [...room.events, ...decision.events] });
        break;
      case "noop":
      case "quarantined":
        this.save(roomId, { ...room, state: decision.state });
        break;
      case "refused":
        if (decision.fence !== null) this.save(roomId, { ...room, state: decision.state });
        break;
      case "diverged": {
        const kept = room.events.slice(0, decision.moved.from_seq - 1);
        const moved = room.events.slice(decision.moved.from_seq - 1, decision.moved.to_seq);
        if (moved.length !== decision.divergence.count) throw new Error("divergence count does not match the moved range");
        this.save(roomId, {
          ...room,
          state: decision.state,
          events: [...kept, ...decision.events],
          divergences: [...room.divergences, { record: decision.divergence, events: moved }],
        });
        break;
      }
      case "refetch":
        break;
    }
    return decision;
  }

  /** `claimEpoch`: a coordinated claim of exactly that epoch (won in the coordinator first). */
  promote(roomId: string, confirm: unknown, reason: string | undefined, now: string, claimEpoch?: number) {
    const room = this.room(roomId);
    const plan = planPromote(
      room.state,
      {
        confirm,
        reason,
        max_durable_epoch: this.maxDurableEpoch(),
        stored: this.storedKinds(room),
        ...(claimEpoch === undefined ? {} : { claim_epoch: claimEpoch }),
      },
      now,
    );
    if (plan.ok) {
      // The new epoch is durable before use: the high-water mark, the claim and the state commit together.
      this.epochHighWater = Math.max(this.epochHighWater, plan.epoch);
      this.save(roomId, { ...room, state: plan.state, events: [...room.events, plan.claim] });
    }
    return plan;
  }

  demote(roomId: string, observedGatewayId: unknown, observedEpoch: unknown, now: string) {
    const room = this.room(roomId);
    const plan = planDemote(room.state, { observed_gateway_id: observedGatewayId, observed_epoch: observedEpoch }, now);
    if (plan.ok && !plan.idempotent) this.save(roomId, { ...room, state: plan.state, demotions: [...room.demotions, plan.demotion] });
    return plan;
  }

  /** event_id → kind of the room's stored events (the store's lookup). */
  storedKinds(room: SimRoom): (eventId: string) => EventKind | undefined {
    const kinds = new Map(room.events.map((event) => [event.event_id, event.kind]));
    return (eventId) => kinds.get(eventId);
  }

  /** Self-fencing on any observation of (room, epoch, gateway). Returns the fence recorded, if any. */
  observe(roomId: string, observed: Authority): Authority | null {
    const room = this.rooms.get(roomId);
    if (room === undefined) return null;
    const fenced = observeEpoch(room.state, observed);
    if (fenced === null) return null;
    this.save(roomId, { ...room, state: fenced.state });
    return fenced.fence;
  }

  release(roomId: string): { ok: true } | { ok: false; refusal: Refusal } {
    const room = this.room(roomId);
    const released = releaseSafety(room.state);
    if (!released.ok) return released;
    this.save(roomId, { ...room, state: released.state });
    return { ok: true };
  }

  snapshot(): Map<string, SimRoom> {
    return new Map([...this.rooms].map(([id, room]) => [id, cloneRoom(room)]));
  }

  /** Restores an older copy of every room (a backup restore): the epoch high-water mark goes back too. */
  restore(snapshot: Map<string, SimRoom>): void {
    this.rooms.clear();
    this.epochHighWater = 0;
    for (const [id, room] of snapshot) this.save(id, cloneRoom(room));
  }
}
