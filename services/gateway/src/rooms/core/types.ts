/**
 * Wire and state types of replicated rooms. Field names are snake_case because they are the
 * wire format (JSON-RPC, ts-proto with snake_case fields) and the SQLite column names.
 */

/** Event kinds. Only `message.user` may be appended by a client; the server sets every other kind. */
export const EVENT_KINDS = [
  "room.created",
  "room.renamed",
  "room.members_changed",
  "room.disbanded",
  "message.user",
  "message.member",
  "turn.started",
  "turn.settled",
  "turn.failed",
  "authority.claimed",
  // Written by demotes of earlier versions (a marker on the old authority's branch); still read and
  // replicated, no longer written: a demotion is an audit record (DemotionRecord) now.
  "authority.lost",
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

export const CLIENT_APPENDABLE_KINDS: readonly EventKind[] = ["message.user"];

export type ActorKind = "user" | "member" | "gateway" | "system";

/** Who wrote an event. Set by the server from authentication, never taken from a client payload. */
export interface Actor {
  kind: ActorKind;
  id: string;
  display_name?: string;
  profile?: string;
  connection_id?: string;
}

/** One event of a room log. `actor_json` and `payload_json` are canonical JSON. */
export interface RoomEvent {
  room_id: string;
  /** Dense, from 1. */
  seq: number;
  /** Unique per room: the client idempotency key for `message.user`, a server id otherwise. */
  event_id: string;
  kind: EventKind;
  actor_json: string;
  /** The authority epoch that wrote the event. Never decreases along the log. */
  epoch: number;
  payload_json: string;
  /** ISO-8601, from the injected clock of the gateway that appended it. Not covered by the hash. */
  created_at: string;
  /** sha256 hex of (hash of seq−1, or "" for seq 1) ‖ canonical([seq, event_id, kind, actor, epoch, payload]). */
  hash: string;
}

/** Row of `room_lineage`: gateway_id was authority at `epoch` from `start_seq` on (Kafka's leader-epoch cache). */
export interface LineageEntry {
  epoch: number;
  gateway_id: string;
  start_seq: number;
}

/** Epochs strictly increase and start seqs never decrease along a lineage. */
export type Lineage = readonly LineageEntry[];

export interface Authority {
  gateway_id: string;
  epoch: number;
}

/** (seq, epoch, hash) of the event just before a page: Raft's prevLogIndex/prevLogTerm, plus the hash. */
export interface PrevPointer {
  seq: number;
  epoch: number;
  hash: string;
}

/** One `groups.log` page. `prev` is null when the page starts at seq 1 (since_seq 0). */
export interface LogPage {
  room_id: string;
  events: RoomEvent[];
  /** Last seq returned, or since_seq when the page is empty. */
  cursor: number;
  latest_seq: number;
  has_more: boolean;
  authority: Authority;
  lineage: LineageEntry[];
  prev: PrevPointer | null;
  /**
   * The page's events as the transport received them (a packed page: the bytes they were decoded
   * from), so a replica stores those bytes instead of encoding the events again.
   */
  tuples?: TupleRun | undefined;
}

/**
 * An event as a packed (replication) page carries it, without the room id the page already names:
 * `[seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash]`. A store can read rows
 * in this shape and a transport can serialise them as they are.
 */
export type PackedEvent = [
  seq: number,
  event_id: string,
  kind: string,
  actor_json: string,
  epoch: number,
  payload_json: string,
  created_at: string,
  hash: string,
];

/**
 * Contiguous events of a log in the packed encoding (rooms/core/log-segment.ts): each event's
 * PackedEvent tuple as JSON text, the texts joined by commas. Tuple `i` holds seq `first_seq + i`
 * and ends at byte `ends[i]` of `body` (the next one starts after the comma). A segment of the
 * store is one run; a packed page is `[` + its runs joined by commas + `]`.
 */
export interface TupleRun {
  first_seq: number;
  body: Uint8Array;
  ends: Uint32Array;
}

/**
 * A `groups.log` page whose events are packed (same fields and rules as LogPage): runs of the
 * stored tuple texts, exactly the page's events, which a transport joins as they are.
 */
export interface PackedLogPage extends Omit<LogPage, "events" | "tuples"> {
  packed: TupleRun[];
}

/**
 * Safety of a room on this gateway (`groups.replica_state`):
 * - `passive`: nothing is in effect; an authority accepts sends, a replica applies pages.
 * - `fenced`: this gateway was authority and learned of a newer (or competing) epoch; sends are refused until demoted.
 * - `diverged`: a local branch was moved to `room_divergent_events`; replication goes on (informational until released).
 * - `quarantined`: a page broke a safety rule; nothing more is applied until an operator releases the room.
 */
export type SafetyStatus = "passive" | "fenced" | "diverged" | "quarantined";

export type RoomRole = "authority" | "replica";

/**
 * Everything the pure core needs to know about one room on one gateway. The store maps it to the
 * `rooms` row (plus `room_lineage`); `next_seq` is `last_seq + 1`.
 */
export interface RoomState {
  room_id: string;
  /** This gateway. `role` is "authority" exactly when `authority.gateway_id === self_gateway_id`. */
  self_gateway_id: string;
  role: RoomRole;
  /**
   * The authority this gateway follows (itself when role is authority). Epoch 0 means "not known yet"
   * (a replica that has not applied its first page).
   */
  authority: Authority;
  /** Lineage of the events stored here: every entry starts at or before `last_seq` (empty when the log is empty). */
  lineage: LineageEntry[];
  /** Highest contiguous seq stored here (authority: next_seq − 1; replica: replica_last_seq). */
  last_seq: number;
  /** Hash of the event at last_seq, "" when the log is empty. */
  last_hash: string;
  /**
   * Authority: equals last_seq. Replica: the authority's latest_seq from the last page of the current
   * authority (0 until one arrived). `caught_up` = last_seq ≥ latest_seq on the last page.
   */
  latest_seq: number;
  /** Highest epoch present in any durable state of this room here (events, lineage, authority, fence). */
  max_epoch_seen: number;
  /** Authority only: the newer authority whose epoch fenced this gateway (`rooms.fenced_by_epoch`). */
  fenced_by: Authority | null;
  /** A `room.disbanded` event is stored: the log is closed for good. */
  disbanded: boolean;
  safety_status: SafetyStatus;
  /** Why the status is not passive (a reason code followed by detail), else null. */
  safety_reason: string | null;
}

/**
 * Divergence record: `count` events from `from_seq` on, written on the branch of
 * (branch_gateway_id, branch_epoch), were moved to `room_divergent_events` because the lineage of
 * (winning_gateway_id, winning_epoch) does not contain them.
 */
export interface DivergenceRecord {
  room_id: string;
  detected_at: string;
  /** First seq of the preserved branch; the divergence point is from_seq − 1. */
  from_seq: number;
  /** Authority (of the local lineage) at the tip of the preserved branch. */
  branch_epoch: number;
  branch_gateway_id: string;
  winning_epoch: number;
  winning_gateway_id: string;
  count: number;
  /**
   * True when the branch holds only `authority.lost` markers (demotes of earlier versions appended
   * one to the log), i.e. a clean handover: nothing a client or member wrote is off the winning
   * lineage. Such records are kept, but they are no alarm (the room stays as safe as it was, the
   * divergence metric does not count them) and need no operator action.
   */
  markers_only: boolean;
}

/**
 * A demotion as the old authority records it: an audit entry kept beside the room, not an event
 * of its log (an event there would fork it from the new authority's, whose claim follows at the
 * same seq). `last_seq` is where this gateway's log ended: the new authority's log continues
 * after it when nothing was lost in between.
 */
export interface DemotionRecord {
  room_id: string;
  demoted_at: string;
  /** This gateway's own authority until the demotion. */
  previous_gateway_id: string;
  previous_epoch: number;
  /** The authority it follows from then on. */
  authority_gateway_id: string;
  authority_epoch: number;
  last_seq: number;
}

/** What a replica needs to know about one stored event to compare it with a page. */
export interface LocalEntry {
  event_id: string;
  epoch: number;
  hash: string;
  kind: EventKind;
}

/** Read access to the local log, synchronous (better-sqlite3 is): seq → stored entry, or undefined. */
export type LocalLogLookup = (seq: number) => LocalEntry | undefined;
