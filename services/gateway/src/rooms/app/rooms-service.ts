import { createHash, randomBytes } from "node:crypto";
import { type Clock, HermesError, isoTime, type Logger } from "@hermes/common";
import type { DiscussionSummary } from "../core/discussion.js";
import {
  type Actor,
  type AppendOutcome,
  type AppendRequest,
  type Authority,
  buildLogPage,
  buildPackedLogPage,
  checkClientEventId,
  checkId,
  checkReplicationParams,
  checkSendParams,
  clientSendRequest,
  DEFAULT_PROMOTE_REASON,
  type DemoteResult,
  type DemotionRecord,
  formatAuthority,
  type LogPage,
  MAX_LOG_LIMIT,
  MAX_REPLICATION_LOG_LIMIT,
  type Member,
  type PackedLogPage,
  type PrevPointer,
  type PromoteResult,
  planCreateRoom,
  planLogRead,
  planPromote,
  ROOM_CONTROL_ACTOR,
  type RoomEvent,
  type RoomState,
  refusal,
  refusalError,
  releaseSafety,
  replicaStateView,
  sendResult,
  serverEventId,
} from "../core/index.js";
import type { FollowSourceRef, PreservedBranch, RoomsStore, StoredRoom } from "../store/rooms-store.js";
import { type AnyPage, type PageSink, type RoomChanges, TailSubscription } from "./live-tail.js";
import { LOCAL_REPLICATION, type ReplicationView, type RoomCoordination } from "./quorum/coordinated-rooms.js";
import type { FollowStatus, ReplicateProgress, ReplicateResult, Replicator } from "./replicator.js";
import type { RoomLog } from "./room-log.js";
import type { RepostMessage, SourceSpec } from "./room-source.js";
import type { RoomsMetrics } from "./rooms-metrics.js";

/** The actor of client sends: the key holder (authentication says no more than that). */
export const CLIENT_ACTOR: Actor = Object.freeze({ kind: "user", id: "user" });
export const PROTOCOL_VERSION = 1;

export const ROOM_FEATURES = [
  "authority_epoch",
  "monotonic_log",
  "idempotent_send",
  "typed_events",
  "actor_identity",
  "log_replication",
  "authority_takeover",
  "hash_chain",
  "self_fencing",
  "split_brain_preserved",
  "live_tail",
  "group_commit",
  "packed_log_pages",
] as const;

export interface RoomsSettings {
  /** Events per packed page a replica asks for (1..5000). */
  replicationPageLimit: number;
  /** Longest pause between a follower's reconnect attempts. */
  followMaxBackoffMs: number;
  /** Appends of one room per group commit (1..1000; the room log's). */
  maxAppendsPerCommit: number;
}

export const DEFAULT_ROOMS_SETTINGS: RoomsSettings = {
  replicationPageLimit: MAX_REPLICATION_LOG_LIMIT,
  followMaxBackoffMs: 30_000,
  maxAppendsPerCommit: 1000,
};

export interface RoomsServiceDeps {
  log: RoomLog;
  /** Pulls rooms from their authorities (built on the same room log). */
  replicator: Replicator;
  gatewayId: string;
  clock: Clock;
  logger: Logger;
  settings?: Partial<Omit<RoomsSettings, "maxAppendsPerCommit">>;
  /** The discussion driver of the rooms led here; without one, rooms are logs only. */
  driver?: RoomDriverView | undefined;
  /** The coordinated mesh (etcd): quorum rooms. Without one, every room is local. */
  coordination?: RoomCoordination | undefined;
}

/**
 * The discussion driver (rooms/app/discussion-driver.ts) as the rooms service sees it: asked
 * for status and to stop a room's discussion (it hears of commits and authority changes from the
 * room log).
 */
export interface RoomDriverView {
  readonly running: boolean;
  /** groups.stop: cancels the room's discussion; the number of turns cancelled. */
  stopRoom(roomId: string): number;
  status(roomId: string): RoomDriverStatus;
}

/** What groups.state shows of the driver: its status for the room, needs-you, the current discussion. */
export interface RoomDriverStatus {
  driver_status: string;
  needs_you: boolean;
  discussion?: (DiscussionSummary & { unavailable: { member_id: string; why: string }[] }) | undefined;
}

/** A room as `groups.state` and `groups.list` show it. */
export interface RoomView {
  room_id: string;
  name: string;
  members: Member[];
  authority_gateway_id: string;
  authority_epoch: number;
  latest_seq: number;
  revision: number;
  created_at: string;
  updated_at: string;
  disbanded_at: string | null;
  role: "authority" | "replica";
  safety_status: string;
  safety_reason: string | null;
  fenced_by: Authority | null;
  /** This gateway's latest demotion for the room (an audit record, not a log event), or null. */
  demoted: DemotionRecord | null;
}

export interface ReplicaStateResult {
  room_id: string;
  authority: Authority;
  last_seq: number;
  latest_seq: number;
  caught_up: boolean;
  safety_status: string;
  safety_reason: string | null;
  role: "authority" | "replica";
  following: FollowStatus | null;
  demoted: DemotionRecord | null;
}

export interface SubscribeParams {
  room_id: unknown;
  since_seq?: number | undefined;
  /** Replication-sized pages (up to 5000 events). */
  packed?: boolean | undefined;
  known_authority?: Authority | undefined;
}

export interface LogParams {
  room_id: string;
  since_seq?: number | undefined;
  limit?: number | undefined;
  max_bytes?: number | undefined;
  /** A replication page: up to 5000 events. */
  packed?: boolean | undefined;
  known_authority?: Authority | undefined;
  /** Bytes the whole answer may take (a read in a JSON-RPC batch): a larger max_bytes is lowered to fit. */
  answer_bytes?: number | undefined;
}

/** The repost of a preserved event: its id names the room, the branch's authority and the original event. */
function repostMessage(roomId: string, branch: PreservedBranch, event: RoomEvent): RepostMessage {
  const original = JSON.parse(event.payload_json) as { text?: unknown; thread_id?: unknown };
  const origin = `${branch.record.branch_gateway_id}@${branch.record.branch_epoch} seq ${event.seq}`;
  const digest = createHash("sha256").update(`${roomId}\n${event.event_id}\n${event.hash}`).digest("hex").slice(0, 40);
  return {
    event_id: `repost:${digest}`,
    text: typeof original.text === "string" ? original.text : "",
    ...(typeof original.thread_id === "string" ? { thread_id: original.thread_id } : {}),
    origin,
  };
}

export interface RepostItem {
  divergence_id: number;
  original_seq: number;
  event: RoomEvent;
  idempotent: boolean;
}

function notFound(roomId: string): HermesError {
  return new HermesError("not_found", `no room ${roomId} on this gateway; list rooms with: hermes groups list`, {
    data: { room_id: roomId },
  });
}

function checkedRoomId(value: unknown): string {
  const checked = checkId(value, "room_id");
  if (!checked.ok) throw refusalError(checked.refusal);
  return checked.value;
}

/**
 * The rooms of one gateway: the pure core decides, the store applies each decision in one
 * transaction, and this service wires them to group commit, replication, live tail, metrics. The
 * transports (gRPC, JSON-RPC, the relay tunnel) are generated from one method table over these
 * methods (rooms/api/methods.ts).
 */
export class RoomsService {
  readonly store: RoomsStore;
  readonly metrics: RoomsMetrics;
  readonly changes: RoomChanges;
  readonly replicator: Replicator;
  private readonly roomLog: RoomLog;
  private readonly coordination: RoomCoordination | undefined;
  private readonly subscriptions = new Set<TailSubscription>();
  /**
   * The last packed page a live tail read. After a commit every replica tailing the room (two, in a
   * quorum room of three) reads the page after the same seq: they get this one object, read once
   * (and the gRPC sink encodes it once). It stands while the room's stored state is the same object
   * (every commit, fence or authority change stores a new one) and no stored event was rewritten.
   */
  private lastTailPage: { roomId: string; since: number; limit: number; state: RoomState; rewrites: number; page: PackedLogPage } | null =
    null;
  private readonly settings: Omit<RoomsSettings, "maxAppendsPerCommit">;
  private readonly driver: RoomDriverView | undefined;

  constructor(private readonly deps: RoomsServiceDeps) {
    this.settings = { ...DEFAULT_ROOMS_SETTINGS, ...deps.settings };
    this.roomLog = deps.log;
    this.store = deps.log.store;
    this.metrics = deps.log.metrics;
    this.changes = deps.log.changes;
    this.driver = deps.driver;
    this.replicator = deps.replicator;
    this.coordination = deps.coordination;
  }

  /** The coordination of a quorum room held here, or undefined for a local room (or a gateway without a coordinator). */
  private coordinated(roomId: string): RoomCoordination | undefined {
    return this.store.room(roomId)?.replication == null ? undefined : this.coordination;
  }

  get gatewayId(): string {
    return this.deps.gatewayId;
  }

  private now(): string {
    return isoTime(this.deps.clock.now());
  }

  /** Resumes following the rooms that followed a registered peer before a restart. */
  start(): void {
    for (const { roomId, source } of this.store.followedRooms()) {
      if ("peer" in source) this.replicator.resume(roomId, { peer: source.peer });
    }
  }

  /**
   * First step of a shutdown: ends live tails (their streams would hold a graceful gRPC shutdown
   * open) and stops followers. Sends still work until `stop`.
   */
  beginStop(): Promise<void> {
    for (const s of [...this.subscriptions]) s.close(new HermesError("unavailable", "the gateway is shutting down; resubscribe"));
    return this.replicator.stop();
  }

  async stop(): Promise<void> {
    await this.beginStop();
    this.roomLog.flush();
  }

  count(): number {
    return this.store.count();
  }

  private room(roomId: string): StoredRoom {
    const room = this.store.room(roomId);
    if (!room) throw notFound(roomId);
    return room;
  }

  view(stored: StoredRoom): RoomView {
    const { state, meta } = stored;
    return {
      room_id: state.room_id,
      name: meta.name,
      members: meta.members,
      authority_gateway_id: state.authority.gateway_id,
      authority_epoch: state.authority.epoch,
      latest_seq: state.last_seq,
      revision: meta.revision,
      created_at: meta.created_at,
      updated_at: meta.updated_at,
      disbanded_at: meta.disbanded_at,
      role: state.role,
      safety_status: state.safety_status,
      safety_reason: state.safety_reason,
      fenced_by: state.fenced_by ? { ...state.fenced_by } : null,
      demoted: this.store.lastDemotion(state.room_id),
    };
  }

  // ------------------------------------------------------------------------------------------

  /** What `groups.capabilities` says of this gateway; the transports add `methods` from their method table. */
  capabilities() {
    return {
      protocol_version: PROTOCOL_VERSION,
      gateway_id: this.deps.gatewayId,
      driver: this.driver?.running ?? false,
      max_log_limit: MAX_LOG_LIMIT,
      features: [...ROOM_FEATURES, ...(this.coordination ? ["quorum_replication"] : [])],
      max_replication_log_limit: MAX_REPLICATION_LOG_LIMIT,
    };
  }

  /** `groups.create`; a quorum room is created in the coordinator first (asynchronous). */
  create(params: { room_id?: unknown; name?: unknown; members?: unknown; replication?: unknown }): RoomView | Promise<RoomView> {
    const policy = checkReplicationParams(params.replication, this.deps.gatewayId, this.coordination !== undefined);
    if (!policy.ok) throw refusalError(policy.refusal);
    const roomId = params.room_id === undefined || params.room_id === null ? `room_${randomBytes(8).toString("hex")}` : params.room_id;
    const id = typeof roomId === "string" ? roomId : "";
    const plan = planCreateRoom({
      room_id: roomId,
      name: params.name,
      members: params.members,
      self_gateway_id: this.deps.gatewayId,
      now: this.now(),
      retired: id !== "" && this.store.isRetired(id),
      exists: id !== "" && this.store.room(id) !== undefined,
    });
    if (!plan.ok) throw refusalError(plan.refusal);
    if (policy.value !== null && this.coordination) return this.coordination.create(plan, policy.value).then((stored) => this.view(stored));
    return this.view(this.store.createRoom(plan));
  }

  /** `groups.send`: validated here, acknowledged after its group commit. */
  async send(params: unknown, actor: Actor = CLIENT_ACTOR): Promise<{ event: RoomEvent; accepted: true; idempotent: boolean }> {
    const checked = checkSendParams(params);
    if (!checked.ok) throw refusalError(checked.refusal);
    const outcome = await this.roomLog.append(checked.value.room_id, clientSendRequest(checked.value, actor));
    return sendResult(outcome);
  }

  /** Server-kind appends (the discussion driver's turn and member events), through group commit like sends. */
  appendServer(roomId: string, request: AppendRequest): Promise<Exclude<AppendOutcome, { kind: "refused" }>> {
    return this.roomLog.append(roomId, request);
  }

  /** Self-fencing on an observation of (room, authority) from a peer. */
  observe(roomId: string, observed: Authority): void {
    this.roomLog.observe(roomId, observed);
  }

  /**
   * `groups.log`: a page bounded by count and bytes (`packed`: up to 5000 events, still as objects).
   * While a commit is notified (a live tail's page), its events are taken as they are, not read back.
   */
  log(params: LogParams, knownPrev: PrevPointer | null = null): LogPage {
    const { roomId, state, read, prev } = this.planRead(params, knownPrev);
    const events =
      this.changes.appendedAfter(roomId, state, read.since_seq) ?? this.store.events(roomId, read.since_seq, read.limit, read.max_bytes);
    return buildLogPage(state, read, prev, events);
  }

  /**
   * A replication page: the same page with events read and sent as packed tuples (no row objects).
   * While a commit is notified, its stored bytes are taken as they are, not read back.
   */
  logPacked(params: LogParams, knownPrev: PrevPointer | null = null): PackedLogPage {
    const { roomId, state, read, prev } = this.planRead({ ...params, packed: true }, knownPrev);
    const appended = this.changes.appendedRunAfter(roomId, state, read.since_seq);
    return buildPackedLogPage(
      state,
      read,
      prev,
      appended ? [appended] : this.store.packedEvents(roomId, read.since_seq, read.limit, read.max_bytes),
    );
  }

  /** `knownPrev`: the stored event at since_seq, when the caller holds it (a live tail), so it is not read again. */
  private planRead(params: LogParams, knownPrev: PrevPointer | null) {
    const roomId = checkedRoomId(params.room_id);
    if (params.known_authority) this.observe(roomId, params.known_authority);
    const { state } = this.room(roomId);
    const read = planLogRead(
      state,
      { since_seq: params.since_seq, limit: params.limit, max_bytes: params.max_bytes },
      { maxLimit: params.packed ? MAX_REPLICATION_LOG_LIMIT : MAX_LOG_LIMIT, answerBytes: params.answer_bytes },
    );
    if (!read.ok) throw refusalError(read.refusal);
    const since = read.value.since_seq;
    const prev = since === 0 ? null : knownPrev?.seq === since ? knownPrev : this.store.eventAt(roomId, since);
    return { roomId, state, read: read.value, prev };
  }

  /**
   * `groups.subscribe`: the live tail into a sink, until the sink's owner closes it. `packed` asks
   * for replication-sized pages (up to 5000 events); `tuples` for pages of packed tuples
   * (PackedLogPage, what the gRPC stream serialises as is) instead of LogPage.
   */
  subscribe(params: SubscribeParams & { tuples?: false | undefined }, sink: PageSink<LogPage>): TailSubscription;
  subscribe(params: SubscribeParams & { tuples?: boolean | undefined }, sink: PageSink<AnyPage>): TailSubscription;
  subscribe(params: SubscribeParams & { tuples?: boolean | undefined }, sink: PageSink<AnyPage>): TailSubscription {
    const roomId = checkedRoomId(params.room_id);
    const since = params.since_seq ?? 0;
    // Refuse bad cursors and unknown rooms before the stream starts.
    this.log({ room_id: roomId, since_seq: since, limit: 1, known_authority: params.known_authority });
    const limit = params.packed || params.tuples ? this.settings.replicationPageLimit : MAX_LOG_LIMIT;
    const subscription = new TailSubscription(
      this.changes,
      roomId,
      since,
      (from, prev) =>
        params.tuples
          ? this.tailPage(roomId, from, limit, prev)
          : this.log({ room_id: roomId, since_seq: from, limit, packed: params.packed }, prev),
      {
        send: (page) => sink.send(page),
        drained: () => sink.drained(),
        end: (error) => {
          this.subscriptions.delete(subscription);
          sink.end(error);
        },
      },
    );
    this.subscriptions.add(subscription);
    return subscription;
  }

  /** A live tail's packed page after `since`: the one another tail just read, when it still stands. */
  private tailPage(roomId: string, since: number, limit: number, prev: PrevPointer | null): PackedLogPage {
    const last = this.lastTailPage;
    const rewrites = this.changes.rewriteCount(roomId);
    if (
      last !== null &&
      last.roomId === roomId &&
      last.since === since &&
      last.limit === limit &&
      last.rewrites === rewrites &&
      last.state === this.store.state(roomId)
    )
      return last.page;
    const page = this.logPacked({ room_id: roomId, since_seq: since, limit }, prev);
    const state = this.store.state(roomId);
    this.lastTailPage = state ? { roomId, since, limit, state, rewrites, page } : null;
    return page;
  }

  async replicate(
    params: { room_id: unknown; from: SourceSpec; follow?: boolean },
    onProgress?: (p: ReplicateProgress) => void,
    signal?: AbortSignal,
  ): Promise<ReplicateResult> {
    const roomId = checkedRoomId(params.room_id);
    const existing = this.store.state(roomId);
    const coordination = this.coordinated(roomId);
    if (coordination && existing?.role === "replica") {
      // A quorum room follows the authority its record names; this resumes a paused follower.
      return coordination.resume(roomId, { ...(onProgress ? { onProgress } : {}), ...(signal ? { signal } : {}) });
    }
    if (existing?.role === "authority" && existing.fenced_by === null) {
      throw refusalError(
        refusal(
          "authority_conflict",
          `this gateway leads room ${roomId} (epoch ${existing.authority.epoch}); a room is replicated onto other gateways, not onto its authority`,
          { authority: { ...existing.authority } },
        ),
      );
    }
    return this.replicator.replicate(roomId, params.from, {
      follow: params.follow === true,
      ...(onProgress ? { onProgress } : {}),
      ...(signal ? { signal } : {}),
    });
  }

  replicaState(roomId: unknown): ReplicaStateResult {
    const id = checkedRoomId(roomId);
    const { state } = this.room(id);
    return {
      ...replicaStateView(state),
      role: state.role,
      following: this.replicator.followStatus(id) ?? null,
      demoted: this.store.lastDemotion(id),
    };
  }

  /**
   * `groups.promote`: refused without confirm=true; stops following; makes the replica log
   * durable (a FULL commit); then claims max(durable epochs) + 1 with authority.claimed, persisted
   * with the epoch counter in one transaction before anything uses it. A quorum room on a
   * coordinated gateway is claimed in etcd first, by the same compare-and-swap as a failover
   * (asynchronous; `unclean` lets a gateway outside the in-sync replicas claim it).
   */
  promote(params: { room_id: unknown; confirm?: unknown; reason?: unknown; unclean?: unknown }): PromoteResult | Promise<PromoteResult> {
    const roomId = checkedRoomId(params.room_id);
    const before = this.room(roomId).state;
    const reason = params.reason ?? DEFAULT_PROMOTE_REASON;
    const dryRun = planPromote(
      before,
      { confirm: params.confirm, reason, stored: this.store.storedKinds(roomId), max_durable_epoch: 0 },
      this.now(),
    );
    if (!dryRun.ok) throw refusalError(dryRun.refusal);
    const coordination = this.coordinated(roomId);
    if (params.unclean !== undefined && params.unclean !== false && !coordination) {
      throw new HermesError(
        "invalid_params",
        "unclean applies to quorum rooms on a coordinated gateway; a local room is promoted as it is",
        {
          data: { field: "unclean" },
        },
      );
    }
    if (coordination) return coordination.promote(roomId, { reason: String(reason), unclean: params.unclean === true });
    this.replicator.stopFollowing(roomId, true);
    const result = this.roomLog.promote(roomId, { reason });
    this.replicator.noticeNewAuthority(roomId, { gateway_id: result.authority_gateway_id, epoch: result.authority_epoch });
    return result;
  }

  /**
   * `groups.demote` on the old authority. A quorum room on a coordinated gateway is released in etcd
   * instead (the observed authority is whoever claims it; the params, when given, are not needed).
   */
  demote(params: { room_id: unknown; observed_gateway_id?: unknown; observed_epoch?: unknown }): DemoteResult | Promise<DemoteResult> {
    const roomId = checkedRoomId(params.room_id);
    this.room(roomId);
    const coordination = this.coordinated(roomId);
    if (coordination) return coordination.demote(roomId);
    return this.roomLog.demote(roomId, { observed_gateway_id: params.observed_gateway_id, observed_epoch: params.observed_epoch });
  }

  state(roomId: unknown): { room: RoomView; replication: ReplicationView } & RoomDriverStatus {
    const stored = this.room(checkedRoomId(roomId));
    const room = this.view(stored);
    const replication =
      stored.replication && this.coordination ? this.coordination.view(room.room_id, stored.replication) : LOCAL_REPLICATION;
    return { room, ...(this.driver?.status(room.room_id) ?? { driver_status: "none", needs_you: false }), replication };
  }

  /** Stops what runs for the room here: its discussion (the running turn is cancelled and logged); a replica stops following. */
  stopRoom(roomId: unknown): { room_id: string; cancelled: number; following_stopped: boolean } {
    const id = checkedRoomId(roomId);
    this.room(id);
    this.coordinated(id)?.pause(id);
    const stopped = this.replicator.stopFollowing(id, true);
    return { room_id: id, cancelled: this.driver?.stopRoom(id) ?? 0, following_stopped: stopped };
  }

  async rename(params: { room_id: unknown; name?: unknown; event_id?: unknown }): Promise<RoomView> {
    const roomId = checkedRoomId(params.room_id);
    this.room(roomId);
    let eventId = `system:room-renamed:${randomBytes(8).toString("hex")}`;
    if (params.event_id !== undefined) {
      // The client's idempotency key of the rename: never one of the ids the server writes itself.
      const checked = checkClientEventId(params.event_id);
      if (!checked.ok) throw refusalError(checked.refusal);
      eventId = checked.value;
    }
    await this.roomLog.append(roomId, {
      origin: "server",
      event_id: eventId,
      kind: "room.renamed",
      actor: ROOM_CONTROL_ACTOR,
      payload: { name: params.name },
    });
    return this.view(this.room(roomId));
  }

  /**
   * `groups.disband`: room.disbanded closes the log; the id is retired for good (same transaction).
   * Its id is `system:room-disbanded` (a repeat is idempotent), or the next free one when a log
   * written by an older gateway holds that id for a client's message.
   */
  async disband(roomId: unknown): Promise<{ room_id: string; event: RoomEvent; idempotent: boolean }> {
    const id = checkedRoomId(roomId);
    this.room(id);
    const outcome = await this.roomLog.append(id, {
      origin: "server",
      event_id: serverEventId("system:room-disbanded", this.store.storedKinds(id), "room.disbanded"),
      kind: "room.disbanded",
      actor: ROOM_CONTROL_ACTOR,
      payload: {},
    });
    return { room_id: id, event: outcome.event, idempotent: outcome.kind === "idempotent" };
  }

  list(params: { limit?: number | undefined; offset?: number | undefined; include_disbanded?: boolean | undefined }) {
    const limit = params.limit ?? 500;
    const offset = params.offset ?? 0;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 500) {
      throw new HermesError("invalid_params", `limit must be 1..500, got ${limit}`, { data: { field: "limit" } });
    }
    if (!Number.isSafeInteger(offset) || offset < 0) {
      throw new HermesError("invalid_params", `offset must be an integer ≥ 0, got ${offset}`, { data: { field: "offset" } });
    }
    const ids = this.store.roomIds({ limit, offset, includeDisbanded: params.include_disbanded === true });
    const rooms = ids.flatMap((id) => {
      const stored = this.store.room(id);
      return stored ? [this.view(stored)] : [];
    });
    return { rooms, next_offset: rooms.length === limit ? offset + limit : null };
  }

  divergence(roomId: unknown): {
    room_id: string;
    branches: (PreservedBranch["record"] & { divergence_id: number; events: RoomEvent[] })[];
  } {
    const id = checkedRoomId(roomId);
    this.room(id);
    return {
      room_id: id,
      branches: this.store.divergences(id, true).map((b) => ({ ...b.record, divergence_id: b.divergence_id, events: b.events })),
    };
  }

  /**
   * Re-appends chosen preserved messages to the winning lineage as new `message.user` events
   * by the operator, with the same text (and thread). Branches are preserved on the gateway that
   * lost (a replica), so that is where this runs: it reads the chosen events and, unless it leads the
   * room itself, hands them to the authority it replicates from. Each message's event id is derived
   * from the preserved event, so reposting twice, from anywhere, appends once.
   */
  async repost(params: {
    room_id: unknown;
    seqs?: unknown;
    divergence_id?: unknown;
    messages?: unknown;
  }): Promise<{ room_id: string; items: RepostItem[] }> {
    const roomId = checkedRoomId(params.room_id);
    const { state } = this.room(roomId);
    const explicit = Array.isArray(params.messages) ? (params.messages as RepostMessage[]) : [];
    if (explicit.length > 0) {
      if (Array.isArray(params.seqs) && params.seqs.length > 0) {
        throw new HermesError("invalid_params", "give either seqs (of a branch preserved here) or messages, not both", {
          data: { field: "seqs" },
        });
      }
      const items = await this.appendReposts(roomId, explicit);
      return { room_id: roomId, items: items.map((i) => ({ divergence_id: 0, original_seq: 0, ...i })) };
    }
    const chosen = this.chosenBranchEvents(roomId, params.seqs, params.divergence_id);
    const messages = chosen.map(({ branch, event }) => repostMessage(roomId, branch, event));
    let appended: { event: RoomEvent; idempotent: boolean }[];
    if (state.role === "authority") appended = await this.appendReposts(roomId, messages);
    else {
      const link = this.replicator.sourceSpec(roomId);
      if (!link) {
        throw refusalError(
          refusal(
            "not_authority",
            `this gateway does not lead room ${roomId} and does not know where ${formatAuthority(state.authority)} is; replicate from it first (hermes groups replicate ${roomId} --from …), then repost`,
            { authority: { ...state.authority } },
          ),
        );
      }
      appended = await this.replicator.repostVia(link, roomId, messages);
    }
    return {
      room_id: roomId,
      items: chosen.map((c, i) => ({ divergence_id: c.branch.divergence_id, original_seq: c.event.seq, ...appended[i]! })),
    };
  }

  private chosenBranchEvents(roomId: string, seqs: unknown, wanted: unknown): { branch: PreservedBranch; event: RoomEvent }[] {
    if (!Array.isArray(seqs) || seqs.length === 0 || seqs.length > 1000 || !seqs.every((s) => Number.isSafeInteger(s) && s > 0)) {
      throw new HermesError("invalid_params", "seqs must be a list of 1..1000 positive seqs of preserved events", {
        data: { field: "seqs" },
      });
    }
    if (wanted !== undefined && (!Number.isSafeInteger(wanted) || (wanted as number) < 1)) {
      throw new HermesError("invalid_params", "divergence_id must be a positive integer", { data: { field: "divergence_id" } });
    }
    const branches = this.store.divergences(roomId, true).filter((b) => wanted === undefined || b.divergence_id === wanted);
    return (seqs as number[]).map((seq) => {
      const holding = branches.filter((b) => b.events.some((e) => e.seq === seq));
      if (holding.length === 0) {
        throw new HermesError(
          "not_found",
          `no preserved event at seq ${seq}${wanted === undefined ? "" : ` in divergence ${wanted}`} on this gateway; see hermes groups divergence ${roomId}`,
          { data: { seq } },
        );
      }
      if (holding.length > 1) {
        throw new HermesError(
          "invalid_params",
          `seq ${seq} is in several preserved branches (${holding.map((b) => b.divergence_id).join(", ")}); pass divergence_id`,
          { data: { seq, divergence_ids: holding.map((b) => b.divergence_id) } },
        );
      }
      const branch = holding[0]!;
      const event = branch.events.find((e) => e.seq === seq)!;
      if (event.kind !== "message.user" && event.kind !== "message.member") {
        throw new HermesError("invalid_params", `seq ${seq} is a ${event.kind}, not a message; only messages can be reposted`, {
          data: { seq },
        });
      }
      return { branch, event };
    });
  }

  /** Appends operator messages on this gateway (the authority). */
  private async appendReposts(roomId: string, messages: RepostMessage[]): Promise<{ event: RoomEvent; idempotent: boolean }[]> {
    if (messages.length > 1000)
      throw new HermesError("invalid_params", "at most 1000 messages per repost", { data: { field: "messages" } });
    const outcomes = await Promise.all(
      messages.map((m) => {
        const payload: Record<string, unknown> = { text: m.text };
        if (m.thread_id !== undefined) payload.thread_id = m.thread_id;
        const origin = typeof m.origin === "string" && m.origin.length > 0 ? ` (repost of ${m.origin})` : " (repost)";
        return this.roomLog.append(roomId, {
          origin: "repost",
          event_id: m.event_id,
          kind: "message.user",
          actor: { kind: "user", id: "operator", display_name: `operator${origin}`.slice(0, 200) },
          payload,
        });
      }),
    );
    return outcomes.map((o) => ({ event: o.event, idempotent: o.kind === "idempotent" }));
  }

  /** Operator action: clears quarantined / diverged after looking at the reason. */
  release(roomId: unknown): ReplicaStateResult {
    const id = checkedRoomId(roomId);
    const { state } = this.room(id);
    const released = releaseSafety(state);
    if (!released.ok) throw refusalError(released.refusal);
    this.store.saveState(id, released.state);
    return this.replicaState(id);
  }

  followSource(roomId: string): FollowSourceRef | null {
    return this.store.room(roomId)?.follow ?? null;
  }
}
