import { ChainHasher } from "./hash-chain.js";
import { MAX_BATCH_APPENDS } from "./limits.js";
import { formatAuthority } from "./lineage.js";
import { RunWriter } from "./log-segment.js";
import { type Refusal, refusal } from "./refusal.js";
import { type Actor, CLIENT_APPENDABLE_KINDS, type RoomEvent, type RoomState, type TupleRun } from "./types.js";
import {
  checkActor,
  checkClientEventId,
  checkId,
  checkPayload,
  checkRepostEventId,
  isEventKind,
  type SendParams,
  unescapedMessageText,
} from "./validation.js";

/**
 * One append on the authority. Who chose the event id and kind:
 * - `client` (groups.send): only `message.user`, and never an id with a reserved prefix (`system:`, `turn:`, `repost:`);
 * - `repost` (groups.repost): only `message.user`, under a `repost:` id derived from the preserved event;
 * - `server`: the server's own kinds and ids.
 */
export interface AppendRequest {
  origin: "client" | "repost" | "server";
  event_id: string;
  kind: string;
  actor: Actor;
  payload: Record<string, unknown>;
  /** Optimistic concurrency: refuse with cursor_conflict unless the log ends exactly here. */
  expected_latest_seq?: number;
}

export type AppendOutcome =
  | { kind: "appended"; event: RoomEvent }
  | { kind: "idempotent"; event: RoomEvent }
  | { kind: "refused"; refusal: Refusal };

export interface AppendItem {
  request: AppendRequest;
  /** The event the store holds with the same (room_id, event_id), or null. */
  stored: RoomEvent | null;
}

/**
 * Result of a batch: `appended` are the new events in seq order (dense from state.last_seq + 1,
 * hashes chained) to insert in ONE transaction together with `state`; `outcomes[i]` answers items[i].
 * Nothing is acknowledged before that transaction commits.
 */
export interface AppendBatchPlan {
  state: RoomState;
  appended: RoomEvent[];
  outcomes: AppendOutcome[];
  /** `appended` in the stored encoding (encodeTuples' bytes), written as they were planned; none when nothing was appended. */
  run?: TupleRun | undefined;
}

/** The hash chain's input buffer, reused by every append (planning is synchronous). */
const hasher = new ChainHasher();

/** Kinds that only their own operation writes (create, promote, demote), never a generic append. */
const RESERVED_KINDS = new Set(["room.created", "authority.claimed", "authority.lost"]);

/** The AppendRequest of a validated `groups.send`; the actor comes from authentication, not from the params. */
export function clientSendRequest(params: SendParams, actor: Actor): AppendRequest {
  const payload: Record<string, unknown> = { text: params.payload.text };
  if (params.payload.thread_id !== undefined) payload.thread_id = params.payload.thread_id;
  const request: AppendRequest = { origin: "client", event_id: params.event_id, kind: "message.user", actor, payload };
  if (params.expected_latest_seq !== undefined) request.expected_latest_seq = params.expected_latest_seq;
  return request;
}

/** `groups.send` result shape: `{event, accepted, idempotent}`. */
export function sendResult(outcome: Exclude<AppendOutcome, { kind: "refused" }>): {
  event: RoomEvent;
  accepted: true;
  idempotent: boolean;
} {
  return { event: outcome.event, accepted: true, idempotent: outcome.kind === "idempotent" };
}

/** One append: a batch of one. */
export function planAppend(state: RoomState, request: AppendRequest, stored: RoomEvent | null, now: string) {
  const plan = planAppendBatch(state, [{ request, stored }], now);
  return { state: plan.state, appended: plan.appended, outcome: plan.outcomes[0]! };
}

/**
 * Group commit: plans several appends against one room state. Each item gets its own outcome;
 * accepted items get dense seqs and chained hashes in item order. An item with the event_id of an
 * earlier item of the same batch is answered against that item (idempotent or conflict).
 */
export function planAppendBatch(state: RoomState, items: readonly AppendItem[], now: string): AppendBatchPlan {
  if (items.length > MAX_BATCH_APPENDS) {
    const tooMany = refusal("limit_exceeded", `a batch holds at most ${MAX_BATCH_APPENDS} appends; got ${items.length}`, {
      limit: MAX_BATCH_APPENDS,
    });
    return { state, appended: [], outcomes: items.map(() => ({ kind: "refused", refusal: tooMany })) };
  }
  // One working copy advanced in place (not a new state per append: a batch holds up to 1000).
  const current: RoomState = { ...state };
  const appended: RoomEvent[] = [];
  const inBatch = new Map<string, RoomEvent>();
  const outcomes = new Array<AppendOutcome>(items.length);
  const tuples = new RunWriter(items.length);
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const decided = decide(current, item, inBatch.get(item.request.event_id) ?? item.stored, now);
    if (decided.kind === "appended") {
      const { event } = decided;
      // Its hash input and its stored tuple are written from the same pieces, a plain text as it is.
      const plainText = unescapedMessageText(event.kind, item.request.payload, event.payload_json);
      event.hash = hasher.hash(current.last_hash, event, plainText);
      tuples.add(event, plainText);
      appended.push(event);
      inBatch.set(event.event_id, event);
      current.last_seq = event.seq;
      current.last_hash = event.hash;
      current.latest_seq = event.seq;
      current.disbanded = current.disbanded || event.kind === "room.disbanded";
    }
    outcomes[i] = decided;
  }
  return { state: appended.length > 0 ? current : state, appended, outcomes, run: tuples.finish() };
}

/** The event id rule of each origin. */
const EVENT_ID_CHECKS = {
  client: (id: unknown) => checkClientEventId(id),
  repost: (id: unknown) => checkRepostEventId(id),
  server: (id: unknown) => checkId(id, "event_id"),
} as const;

function refused(r: Refusal): AppendOutcome {
  return { kind: "refused", refusal: r };
}

/** One item's outcome; an appended event comes back with its hash still empty (planAppendBatch seals it). */
function decide(state: RoomState, item: AppendItem, stored: RoomEvent | null, now: string): AppendOutcome {
  const { request } = item;
  const eventId = EVENT_ID_CHECKS[request.origin](request.event_id);
  if (!eventId.ok) return refused(eventId.refusal);
  if (!isEventKind(request.kind)) {
    return refused(refusal("invalid_params", `unknown event kind ${JSON.stringify(request.kind)}`, { field: "kind" }));
  }
  const kind = request.kind;
  if (request.origin !== "server" && !CLIENT_APPENDABLE_KINDS.includes(kind)) {
    return refused(
      refusal("invalid_params", `clients may only append ${CLIENT_APPENDABLE_KINDS.join(", ")}; ${kind} is written by the server`, {
        field: "kind",
      }),
    );
  }
  if (RESERVED_KINDS.has(kind)) {
    return refused(refusal("invalid_params", `${kind} is written only by its own operation (create, promote, demote)`, { field: "kind" }));
  }
  const actorJson = checkActor(kind, request.actor);
  if (!actorJson.ok) return refused(actorJson.refusal);
  if (request.actor.kind === "gateway" && request.actor.id !== state.self_gateway_id) {
    return refused(
      refusal("invalid_params", `a gateway actor must be the authority ${state.self_gateway_id}, not ${request.actor.id}`, {
        field: "actor",
      }),
    );
  }
  const payloadJson = checkPayload(kind, request.payload);
  if (!payloadJson.ok) return refused(payloadJson.refusal);
  const expected = request.expected_latest_seq;
  if (expected !== undefined && (!Number.isSafeInteger(expected) || expected < 0)) {
    return refused(
      refusal("invalid_params", `expected_latest_seq must be an integer ≥ 0, got ${expected}`, { field: "expected_latest_seq" }),
    );
  }

  // Idempotency first: a retry of an acknowledged send gets its ack again, even after a fence.
  if (stored !== null) {
    if (stored.kind === kind && stored.actor_json === actorJson.value && stored.payload_json === payloadJson.value) {
      return { kind: "idempotent", event: stored };
    }
    return refused(
      refusal(
        "idempotency_conflict",
        `event_id ${request.event_id} was already used for a different ${stored.kind} at seq ${stored.seq}; use a new event_id for a new message`,
        { event_id: request.event_id, seq: stored.seq },
      ),
    );
  }

  if (state.disbanded) {
    return refused(refusal("room_disbanded", `room ${state.room_id} is disbanded; its log is closed`, { room_id: state.room_id }));
  }
  if (state.role !== "authority") {
    return refused(
      refusal(
        "not_authority",
        `this gateway is not the authority of room ${state.room_id}; send to ${formatAuthority(state.authority)} instead`,
        { authority: { ...state.authority } },
      ),
    );
  }
  if (state.fenced_by !== null) {
    return refused(
      refusal(
        "authority_conflict",
        `room ${state.room_id} is fenced: ${formatAuthority(state.fenced_by)} holds a newer claim; send there, or demote this gateway`,
        { authority: { ...state.fenced_by } },
      ),
    );
  }
  if (expected !== undefined && expected !== state.last_seq) {
    return refused(
      refusal("cursor_conflict", `expected_latest_seq ${expected} but the room is at ${state.last_seq}; read the new events and retry`, {
        expected_latest_seq: expected,
        latest_seq: state.last_seq,
      }),
    );
  }
  // Built once; planAppendBatch seals it in place (this runs for every append of a group commit).
  const event: RoomEvent = {
    room_id: state.room_id,
    seq: state.last_seq + 1,
    event_id: request.event_id,
    kind,
    actor_json: actorJson.value,
    epoch: state.authority.epoch,
    payload_json: payloadJson.value,
    created_at: now,
    hash: "",
  };
  return { kind: "appended", event };
}
