import { type Db, databaseError, HermesError } from "@hermes/common";
import type Database from "better-sqlite3";
import {
  type AppendBatchPlan,
  type CreateRoomPlan,
  concatRuns,
  cutIdChunks,
  cutSegments,
  type DemotePlan,
  type DemotionRecord,
  type DivergenceRecord,
  decodeIdChunk,
  decodeRun,
  type EventIdLookup,
  encodeIdChunk,
  encodeTuples,
  endsFromBytes,
  endsToBytes,
  entryAt,
  eventIdHash,
  ID_HASH_END,
  ID_MERGE_STEP_KEYS,
  IdFilter,
  type IdKeys,
  type IdMergePlan,
  type IdRunInfo,
  idKeysInRange,
  idMergeStep,
  isFragment,
  joinIdKeys,
  type LineageEntry,
  type LocalLogLookup,
  type LogPage,
  type Member,
  mergeIdKeys,
  type PromotePlan,
  planIdMerge,
  type QuorumPolicy,
  RecentIds,
  type ReplicationDecision,
  type RoomEvent,
  type RoomState,
  type SafetyStatus,
  SEGMENT_SEAL_EVENTS,
  seqsOfHash,
  shouldFlushIds,
  sliceRun,
  type TupleRun,
  tupleStart,
  withHosts,
  withoutIdKey,
} from "../core/index.js";

/**
 * SQLite store of replicated rooms (migrations 002, 005, 006 and 009). The pure core plans every decision;
 * this file applies each plan in ONE IMMEDIATE transaction and keeps a cache of room states that is
 * only updated after a commit, so a plan is always made against what is durable.
 *
 * A room's log is stored in segments (room_log_segments, encoding in rooms/core/log-segment.ts):
 * the events a commit appends become one or a few rows, never one row per event; reads by seq
 * decode the segments that hold them, and a replication page is made of their bytes as they are.
 * The event id index (event_id → seq, for idempotency) is log-structured (rooms/core/id-index.ts):
 * the newest ids in memory, older ones in sorted runs (room_id_runs, room_id_chunks) merged in steps
 * by `compactIds`. `room_meta_events` lists the room.* events.
 *
 * better-sqlite3 is synchronous: planning with the cached state and committing happen in one run of
 * the event loop, so no other write can slip in between (single writer per gateway).
 *
 * Durability: the connection runs synchronous=FULL (a commit fsyncs the WAL), so an acknowledged
 * append is on disk. Replica pages are applied with synchronous=NORMAL (no fsync per page: a replica
 * can always pull again); the next FULL commit fsyncs the WAL and with it every earlier page, which is
 * what `syncBarrier` uses before a promote claims authority over them.
 */

/** Name, members and bookkeeping of a room, derived from its room.* events. */
export interface RoomMeta {
  name: string;
  members: Member[];
  revision: number;
  created_at: string;
  updated_at: string;
  disbanded_at: string | null;
}

/** Where a replica follows its authority from, as persisted (a registered peer: never a key). */
export type FollowSourceRef = { peer: string } | { url: string };

export interface StoredRoom {
  state: RoomState;
  meta: RoomMeta;
  follow: FollowSourceRef | null;
  /** The room's quorum policy, or null for a local room. */
  replication: QuorumPolicy | null;
}

export interface PreservedBranch {
  divergence_id: number;
  record: DivergenceRecord;
  /** The moved events (only when asked for). */
  events: RoomEvent[];
}

interface RoomRow {
  room_id: string;
  name: string;
  members_json: string;
  authority_gateway_id: string;
  authority_epoch: number;
  next_seq: number;
  revision: number;
  created_at: string;
  updated_at: string;
  disbanded_at: string | null;
  fenced_by_epoch: number | null;
  fenced_by_gateway_id: string | null;
  max_epoch_seen: number;
  last_hash: string;
  replica_last_seq: number | null;
  replica_latest_seq: number | null;
  safety_status: SafetyStatus;
  safety_reason: string | null;
  replica_source_json: string | null;
  replication_json?: string | null;
}

interface DivergenceRow {
  divergence_id: number;
  room_id: string;
  detected_at: string;
  from_seq: number;
  branch_epoch: number;
  branch_gateway_id: string;
  winning_epoch: number;
  winning_gateway_id: string;
  count: number;
  markers_only: number;
}

const EVENT_COLUMNS = "room_id, seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash";

/** A log as the store writes it: its id, where it ends, and the fragments (small segments) at its end. */
interface LogTail {
  logId: number;
  lastSeq: number;
  fragments: { first_seq: number; count: number; bytes: number }[];
  /** Its event id index, loaded when first needed (and released when idle: releaseIdleIds). */
  ids?: IdIndex | undefined;
  /** Whether `ids` was used since the last releaseIdleIds. */
  idsUsed?: boolean;
}

/** A stored run of the id index, with its filter in memory. */
interface IdRun extends IdRunInfo {
  filter: IdFilter;
}

/**
 * A log's event id index in memory: the ids of the events after room_logs.ids_through, which the
 * segments hold and no run yet, and the stored runs.
 */
interface IdIndex {
  recent: RecentIds;
  runs: IdRun[];
}

/** Whether a log's runs have a merge to start or to finish. */
function hasMergeWork(runs: readonly IdRun[]): boolean {
  return runs.some((r) => r.merged_below !== null) || planIdMerge(runs) !== null;
}

/** A segment row as read: `[first_seq, ends, body]`. */
type SegmentRow = [first_seq: number, ends: Buffer, body: Buffer];

function segmentRun(row: SegmentRow): TupleRun {
  return { first_seq: row[0], body: row[2], ends: endsFromBytes(row[1]) };
}

/** A byte array as better-sqlite3 binds a BLOB (a Buffer over the same memory). */
function blob(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function parseJson<T>(text: string | null, fallback: T): T {
  if (text === null) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

export class RoomsStore {
  private readonly cache = new Map<string, StoredRoom>();
  /** One transaction function for every write (made once: a group commit runs one per turn of the event loop). */
  private readonly transaction: Database.Transaction<(fn: () => void) => void>;
  /** Logs this gateway has opened (written or read), by room. */
  private readonly logs = new Map<string, LogTail>();
  private readonly stmt: {
    room: Database.Statement;
    lineage: Database.Statement;
    retired: Database.Statement;
    logId: Database.Statement;
    addLog: Database.Statement;
    tailSegments: Database.Statement;
    segments: Database.Statement;
    insertSegment: Database.Statement;
    deleteSegmentsFrom: Database.Statement;
    idsThrough: Database.Statement;
    setIdsThrough: Database.Statement;
    idRuns: Database.Statement;
    idRunIds: Database.Statement;
    runChunks: Database.Statement;
    chunkAt: Database.Statement;
    rangeChunks: Database.Statement;
    insertChunk: Database.Statement;
    deleteChunk: Database.Statement;
    insertRun: Database.Statement;
    setMergeSource: Database.Statement;
    setMergedBelow: Database.Statement;
    finishMerge: Database.Statement;
    deleteMergedChunks: Database.Statement;
    deleteMergedRuns: Database.Statement;
    insertMeta: Database.Statement;
    upsertRoom: Database.Statement;
    updateRoomState: Database.Statement;
    updateMeta: Database.Statement;
    deleteLineage: Database.Statement;
    insertLineage: Database.Statement;
    deleteMembers: Database.Statement;
    insertMember: Database.Statement;
    retire: Database.Statement;
    setSource: Database.Statement;
    setReplication: Database.Statement;
    insertDemotion: Database.Statement;
    lastDemotion: Database.Statement;
    normalSync: Database.Statement;
    fullSync: Database.Statement;
  };

  constructor(
    readonly db: Db,
    readonly selfGatewayId: string,
    /** ISO time for updated_at and retirement records. */
    private readonly now: () => string,
  ) {
    this.transaction = db.transaction((fn: () => void) => fn());
    this.stmt = {
      room: db.prepare("SELECT * FROM rooms WHERE room_id = ?"),
      lineage: db.prepare("SELECT epoch, gateway_id, start_seq FROM room_lineage WHERE room_id = ? ORDER BY epoch"),
      retired: db.prepare("SELECT 1 FROM room_retired_ids WHERE room_id = ?"),
      logId: db.prepare("SELECT log_id FROM room_logs WHERE room_id = ?").pluck(),
      addLog: db.prepare("INSERT INTO room_logs (room_id) VALUES (?)"),
      tailSegments: db
        .prepare("SELECT first_seq, last_seq, length(body) FROM room_log_segments WHERE log_id = ? ORDER BY first_seq DESC LIMIT ?")
        .raw(true),
      // The segment holding seq @from and those after it up to seq @to (segments are contiguous).
      segments: db
        .prepare(
          `SELECT first_seq, ends, body FROM room_log_segments
           WHERE log_id = @log AND first_seq <= @to AND first_seq >= COALESCE(
             (SELECT first_seq FROM room_log_segments WHERE log_id = @log AND first_seq <= @from ORDER BY first_seq DESC LIMIT 1), @from)
           ORDER BY first_seq`,
        )
        .raw(true),
      insertSegment: db.prepare(
        "INSERT INTO room_log_segments (log_id, first_seq, last_seq, last_epoch, ends, body) VALUES (?, ?, ?, ?, ?, ?)",
      ),
      deleteSegmentsFrom: db.prepare("DELETE FROM room_log_segments WHERE log_id = ? AND first_seq >= ?"),
      idsThrough: db.prepare("SELECT ids_through FROM room_logs WHERE log_id = ?").pluck(),
      setIdsThrough: db.prepare("UPDATE room_logs SET ids_through = ? WHERE log_id = ?"),
      idRuns: db
        .prepare("SELECT run_id, level, count, merging_into, merged_below, filter FROM room_id_runs WHERE log_id = ? ORDER BY run_id")
        .raw(true),
      idRunIds: db.prepare("SELECT run_id FROM room_id_runs WHERE log_id = ?").pluck(),
      runChunks: db.prepare("SELECT keys FROM room_id_chunks WHERE log_id = ? AND run_id = ? ORDER BY first_hash").pluck(),
      // The one chunk of a run that may hold a hash: the last one starting at or below it.
      chunkAt: db
        .prepare(
          "SELECT first_hash, keys FROM room_id_chunks WHERE log_id = ? AND run_id = ? AND first_hash <= ? ORDER BY first_hash DESC LIMIT 1",
        )
        .raw(true),
      // The chunks of a run that may hold hashes in [@from, @to).
      rangeChunks: db
        .prepare(
          `SELECT keys FROM room_id_chunks
           WHERE log_id = @log AND run_id = @run AND first_hash < @to AND first_hash >= COALESCE(
             (SELECT first_hash FROM room_id_chunks WHERE log_id = @log AND run_id = @run AND first_hash <= @from ORDER BY first_hash DESC LIMIT 1), @from)
           ORDER BY first_hash`,
        )
        .pluck(),
      insertChunk: db.prepare("INSERT INTO room_id_chunks (log_id, run_id, first_hash, keys) VALUES (?, ?, ?, ?)"),
      deleteChunk: db.prepare("DELETE FROM room_id_chunks WHERE log_id = ? AND run_id = ? AND first_hash = ?"),
      insertRun: db.prepare(
        "INSERT INTO room_id_runs (log_id, run_id, level, count, merging_into, merged_below, filter) VALUES (?, ?, ?, ?, NULL, ?, ?)",
      ),
      setMergeSource: db.prepare("UPDATE room_id_runs SET merging_into = ? WHERE log_id = ? AND run_id = ?"),
      setMergedBelow: db.prepare("UPDATE room_id_runs SET merged_below = ? WHERE log_id = ? AND run_id = ?"),
      finishMerge: db.prepare("UPDATE room_id_runs SET merged_below = NULL, filter = ? WHERE log_id = ? AND run_id = ?"),
      deleteMergedChunks: db.prepare(
        "DELETE FROM room_id_chunks WHERE log_id = ? AND run_id IN (SELECT run_id FROM room_id_runs WHERE log_id = ? AND merging_into = ?)",
      ),
      deleteMergedRuns: db.prepare("DELETE FROM room_id_runs WHERE log_id = ? AND merging_into = ?"),
      insertMeta: db.prepare("INSERT INTO room_meta_events (log_id, seq) VALUES (?, ?)"),
      upsertRoom: db.prepare(`
        INSERT INTO rooms (room_id, name, members_json, authority_gateway_id, authority_epoch, next_seq, revision, created_at,
          updated_at, disbanded_at, fenced_by_epoch, fenced_by_gateway_id, max_epoch_seen, last_hash, replica_last_seq,
          replica_latest_seq, safety_status, safety_reason, replica_source_json)
        VALUES (@room_id, @name, @members_json, @authority_gateway_id, @authority_epoch, @next_seq, @revision, @created_at,
          @updated_at, @disbanded_at, @fenced_by_epoch, @fenced_by_gateway_id, @max_epoch_seen, @last_hash, @replica_last_seq,
          @replica_latest_seq, @safety_status, @safety_reason, @replica_source_json)
        ON CONFLICT(room_id) DO UPDATE SET
          authority_gateway_id = excluded.authority_gateway_id, authority_epoch = excluded.authority_epoch,
          next_seq = excluded.next_seq, updated_at = excluded.updated_at, fenced_by_epoch = excluded.fenced_by_epoch,
          fenced_by_gateway_id = excluded.fenced_by_gateway_id, max_epoch_seen = excluded.max_epoch_seen,
          last_hash = excluded.last_hash, replica_last_seq = excluded.replica_last_seq,
          replica_latest_seq = excluded.replica_latest_seq, safety_status = excluded.safety_status,
          safety_reason = excluded.safety_reason`),
      // The columns of a room's state (what upsertRoom changes in a stored row), by position: every commit writes them.
      updateRoomState: db.prepare(
        `UPDATE rooms SET authority_gateway_id = ?, authority_epoch = ?, next_seq = ?, updated_at = ?, fenced_by_epoch = ?,
           fenced_by_gateway_id = ?, max_epoch_seen = ?, last_hash = ?, replica_last_seq = ?, replica_latest_seq = ?,
           safety_status = ?, safety_reason = ? WHERE room_id = ?`,
      ),
      updateMeta: db.prepare(
        "UPDATE rooms SET name = @name, members_json = @members_json, revision = @revision, created_at = @created_at, disbanded_at = @disbanded_at WHERE room_id = @room_id",
      ),
      deleteLineage: db.prepare("DELETE FROM room_lineage WHERE room_id = ?"),
      insertLineage: db.prepare("INSERT INTO room_lineage (room_id, epoch, gateway_id, start_seq) VALUES (?, ?, ?, ?)"),
      deleteMembers: db.prepare("DELETE FROM room_members WHERE room_id = ?"),
      insertMember: db.prepare("INSERT OR REPLACE INTO room_members (room_id, member_id, profile) VALUES (?, ?, ?)"),
      retire: db.prepare("INSERT OR IGNORE INTO room_retired_ids (room_id, retired_at) VALUES (?, ?)"),
      setSource: db.prepare("UPDATE rooms SET replica_source_json = ? WHERE room_id = ?"),
      setReplication: db.prepare("UPDATE rooms SET replication_json = ? WHERE room_id = ?"),
      insertDemotion: db.prepare(`
        INSERT OR REPLACE INTO room_demotions (room_id, demoted_at, previous_gateway_id, previous_epoch, authority_gateway_id, authority_epoch, last_seq)
        VALUES (@room_id, @demoted_at, @previous_gateway_id, @previous_epoch, @authority_gateway_id, @authority_epoch, @last_seq)`),
      lastDemotion: db.prepare("SELECT * FROM room_demotions WHERE room_id = ? ORDER BY authority_epoch DESC LIMIT 1"),
      normalSync: db.prepare("PRAGMA synchronous = NORMAL"),
      fullSync: db.prepare("PRAGMA synchronous = FULL"),
    };
  }

  // ------------------------------------------------------------------------------------------
  // Reads

  /** The room as stored (cached after the first read), or undefined. */
  room(roomId: string): StoredRoom | undefined {
    const cached = this.cache.get(roomId);
    if (cached !== undefined) return cached;
    const row = this.stmt.room.get(roomId) as RoomRow | undefined;
    if (row === undefined) return undefined;
    const lineage = this.stmt.lineage.all(roomId) as LineageEntry[];
    const stored = this.fromRow(row, lineage);
    this.cache.set(roomId, stored);
    return stored;
  }

  state(roomId: string): RoomState | undefined {
    return this.room(roomId)?.state;
  }

  isRetired(roomId: string): boolean {
    return this.stmt.retired.get(roomId) !== undefined;
  }

  eventById(roomId: string, eventId: string): RoomEvent | null {
    const log = this.log(roomId);
    return log === undefined ? null : this.storedEventOfId(roomId, log, eventId, eventIdHash(eventId));
  }

  /** Synchronous event_id → kind of a room's stored events (where a server event needs a fresh id). */
  storedKinds(roomId: string): EventIdLookup {
    return (eventId) => this.eventById(roomId, eventId)?.kind;
  }

  /** The audit record of this gateway's latest demotion for the room, or null. */
  lastDemotion(roomId: string): DemotionRecord | null {
    return (this.stmt.lastDemotion.get(roomId) as DemotionRecord | undefined) ?? null;
  }

  /** The stored events among `eventIds` (the idempotency lookup of a group commit: usually none exist). */
  eventsByIds(roomId: string, eventIds: readonly string[]): Map<string, RoomEvent> {
    const found = new Map<string, RoomEvent>();
    const log = this.log(roomId);
    if (log === undefined) return found;
    for (const eventId of eventIds) {
      const event = this.storedEventOfId(roomId, log, eventId, eventIdHash(eventId));
      if (event !== null) found.set(eventId, event);
    }
    return found;
  }

  eventAt(roomId: string, seq: number): RoomEvent | null {
    return this.events(roomId, seq - 1, 1)[0] ?? null;
  }

  /**
   * Up to `limit` events after `afterSeq`, in seq order; with `maxBytes`, reading stops after the
   * segment where the events' tuples pass that many bytes (see packedEvents).
   */
  events(roomId: string, afterSeq: number, limit: number, maxBytes = Number.POSITIVE_INFINITY): RoomEvent[] {
    const events: RoomEvent[] = [];
    const from = afterSeq + 1;
    const to = afterSeq + limit;
    for (const run of this.packedEvents(roomId, afterSeq, limit, maxBytes)) {
      const decoded = decodeRun(roomId, run, Math.max(0, from - run.first_seq), Math.min(run.ends.length, to - run.first_seq + 1));
      for (const event of decoded) events.push(event);
    }
    return events;
  }

  /**
   * The same events for a replication page, as the segments hold them (nothing decoded): the
   * segment holding `afterSeq + 1` and those after it up to `afterSeq + limit`, or only up to the
   * one where the tuples from `afterSeq + 1` pass `maxBytes`. An event's tuple and its separator
   * take fewer bytes than the event's wire size (eventWireBytes), so a page of at most `maxBytes`
   * wire bytes never needs a segment past that one: a page of a room of large events reads what it
   * sends, not `limit` events.
   */
  packedEvents(roomId: string, afterSeq: number, limit: number, maxBytes = Number.POSITIVE_INFINITY): TupleRun[] {
    const log = this.log(roomId);
    if (log === undefined || limit < 1) return [];
    const runs: TupleRun[] = [];
    let bytes = 0;
    for (const row of this.stmt.segments.iterate({
      log: log.logId,
      from: afterSeq + 1,
      to: afterSeq + limit,
    }) as IterableIterator<SegmentRow>) {
      const run = segmentRun(row);
      runs.push(run);
      bytes += run.body.length - tupleStart(run, Math.max(0, afterSeq + 1 - run.first_seq));
      if (bytes > maxBytes) break;
    }
    return runs;
  }

  /** Synchronous seq → stored entry, for planReplication (the last segment read is kept for the next seq). */
  lookup(roomId: string): LocalLogLookup {
    let run: TupleRun | undefined;
    return (seq) => {
      if (run === undefined || seq < run.first_seq || seq >= run.first_seq + run.ends.length) {
        run = this.packedEvents(roomId, seq - 1, 1).find((r) => seq >= r.first_seq && seq < r.first_seq + r.ends.length);
        if (run === undefined) return undefined;
      }
      const [event] = decodeRun(roomId, run, seq - run.first_seq, seq - run.first_seq + 1);
      return event && { event_id: event.event_id, epoch: event.epoch, hash: event.hash, kind: event.kind };
    };
  }

  /** Room ids, most recently updated first. */
  roomIds(options: { limit: number; offset: number; includeDisbanded: boolean }): string[] {
    const rows = this.db
      .prepare(
        `SELECT room_id FROM rooms ${options.includeDisbanded ? "" : "WHERE disbanded_at IS NULL"} ORDER BY updated_at DESC, room_id LIMIT ? OFFSET ?`,
      )
      .all(options.limit, options.offset) as { room_id: string }[];
    return rows.map((r) => r.room_id);
  }

  count(): number {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM rooms").get() as { n: number }).n;
  }

  /** Preserved branches of a room, oldest first, with their events when asked. */
  divergences(roomId: string, withEvents: boolean): PreservedBranch[] {
    const rows = this.db.prepare("SELECT * FROM room_divergences WHERE room_id = ? ORDER BY divergence_id").all(roomId) as DivergenceRow[];
    const eventsOf = this.db.prepare(`SELECT ${EVENT_COLUMNS} FROM room_divergent_events WHERE divergence_id = ? ORDER BY seq`);
    return rows.map((row) => ({
      divergence_id: row.divergence_id,
      record: {
        room_id: row.room_id,
        detected_at: row.detected_at,
        from_seq: row.from_seq,
        branch_epoch: row.branch_epoch,
        branch_gateway_id: row.branch_gateway_id,
        winning_epoch: row.winning_epoch,
        winning_gateway_id: row.winning_gateway_id,
        count: row.count,
        markers_only: row.markers_only === 1,
      },
      events: withEvents ? (eventsOf.all(row.divergence_id) as RoomEvent[]) : [],
    }));
  }

  /**
   * The highest epoch in ANY durable state of this gateway (cf. ZOOKEEPER-582): every room row
   * (own, seen, fence), the lineage tables, the preserved branches, the tip of every log and the
   * counter promote writes (the logs: the epoch of every segment's last event, epochs never decrease
   * along a log). A promote claims one above it.
   */
  maxDurableEpoch(): number {
    const row = this.db
      .prepare(
        `SELECT MAX(
           COALESCE((SELECT MAX(MAX(authority_epoch, max_epoch_seen, COALESCE(fenced_by_epoch, 0))) FROM rooms), 0),
           COALESCE((SELECT MAX(epoch) FROM room_lineage), 0),
           COALESCE((SELECT MAX(MAX(branch_epoch, winning_epoch)) FROM room_divergences), 0),
           COALESCE((SELECT MAX(last_epoch) FROM room_log_segments), 0),
           COALESCE((SELECT CAST(value AS INTEGER) FROM gateway_meta WHERE key = 'rooms_max_epoch'), 0)
         ) AS epoch`,
      )
      .get() as { epoch: number };
    return row.epoch;
  }

  /** The quorum rooms held here (authority or replica), by id. */
  quorumRoomIds(): string[] {
    return this.db.prepare("SELECT room_id FROM rooms WHERE replication_json IS NOT NULL ORDER BY room_id").pluck().all() as string[];
  }

  /** Largest (authority latest_seq − stored last_seq) over the replicas here: the lag gauge. */
  replicaLagMax(): number {
    const row = this.db
      .prepare("SELECT MAX(MAX(replica_latest_seq - replica_last_seq, 0)) AS lag FROM rooms WHERE replica_last_seq IS NOT NULL")
      .get() as { lag: number | null };
    return row.lag ?? 0;
  }

  /** Replicas that follow a registered peer (resumed at start). */
  followedRooms(): { roomId: string; source: FollowSourceRef }[] {
    const rows = this.db.prepare("SELECT room_id, replica_source_json FROM rooms WHERE replica_source_json IS NOT NULL").all() as {
      room_id: string;
      replica_source_json: string;
    }[];
    return rows.flatMap((r) => {
      const source = parseJson<FollowSourceRef | null>(r.replica_source_json, null);
      return source ? [{ roomId: r.room_id, source }] : [];
    });
  }

  // ------------------------------------------------------------------------------------------
  // Writes: each is one IMMEDIATE transaction; the cache changes only after the commit.

  /** `groups.create`: the room row, its lineage, room.created, the local membership handles and the replication policy. */
  createRoom(plan: Extract<CreateRoomPlan, { ok: true }>, replication: QuorumPolicy | null = null): StoredRoom {
    const meta: RoomMeta = {
      name: plan.name,
      members: plan.members,
      revision: 1,
      created_at: plan.event.created_at,
      updated_at: plan.event.created_at,
      disbanded_at: null,
    };
    const stored: StoredRoom = { state: plan.state, meta, follow: null, replication };
    this.write([plan.state.room_id], () => {
      if (this.stmt.room.get(plan.state.room_id) !== undefined) {
        throw new HermesError("already_exists", `room ${plan.state.room_id} already exists on this gateway`);
      }
      this.stmt.upsertRoom.run(this.rowParams(stored));
      this.writeLineage(plan.state.room_id, plan.state.lineage);
      this.appendToLog(plan.state.room_id, [plan.event]);
      this.writeMembers(plan.state.room_id, meta.members);
      if (replication) this.stmt.setReplication.run(JSON.stringify(replication), plan.state.room_id);
    });
    this.cache.set(plan.state.room_id, stored);
    return stored;
  }

  /**
   * Group commit: the appended events and new states of several rooms in one transaction. Every
   * append of the batch is acknowledged only after this returns true. With `idsUnchecked` (plans
   * made without looking up the stored events of their ids) an event id that is already stored
   * makes it return false before anything is written. Without it, that is a bug in the plan and throws.
   */
  commitAppends(batches: readonly { roomId: string; plan: AppendBatchPlan }[], options: { idsUnchecked?: boolean } = {}): boolean {
    const next = new Map<string, StoredRoom>();
    const changing = batches.filter((b) => b.plan.appended.length > 0);
    if (changing.length === 0) return true;
    const hashes = changing.map((b) => idHashes(b.plan.appended));
    if (options.idsUnchecked === true && changing.some((b, i) => this.anyIdStored(b.roomId, b.plan.appended, hashes[i]!))) return false;
    this.write(
      changing.map((b) => b.roomId),
      () => {
        for (const [i, { roomId, plan }] of changing.entries()) {
          const current = this.mustRoom(roomId);
          this.appendToLog(roomId, plan.appended, plan.run, hashes[i]);
          const meta = this.metaAfter(current, plan.appended, plan.state.lineage);
          const stored: StoredRoom = { ...current, state: plan.state, meta };
          this.saveRow(stored, current);
          next.set(roomId, stored);
        }
      },
    );
    for (const [roomId, stored] of next) this.cache.set(roomId, stored);
    return true;
  }

  /**
   * Applies one replication decision with synchronous=NORMAL (`durable`: FULL, so the page is
   * fsynced when this returns: a quorum replica acknowledges what it applied). `apply`/`noop`/
   * `quarantined` save the state (and insert events); `diverged` first moves the local branch to
   * room_divergent_events with its record; `refused` saves only a fence; `refetch` writes nothing.
   * Returns the id of a divergence record, if one was written. `page` is the page the decision was
   * made on: when it kept the bytes its events came from (a packed page), those are stored.
   */
  applyReplication(roomId: string, decision: ReplicationDecision, options: { durable?: boolean; page?: LogPage } = {}): number | null {
    const { page } = options;
    if (decision.kind === "refetch") return null;
    if (decision.kind === "refused" && decision.fence === null) return null;
    const current = this.room(roomId);
    let divergenceId: number | null = null;
    let stored: StoredRoom | undefined;
    const sync = options.durable ? (fn: () => void) => fn() : (fn: () => void) => this.withNormalSync(fn);
    sync(() =>
      this.write([roomId], () => {
        const base: StoredRoom = current ?? this.newReplicaRoom(decision.state);
        switch (decision.kind) {
          case "apply": {
            this.appendToLog(roomId, decision.events, receivedRun(decision.events, page));
            stored = { ...base, state: decision.state, meta: this.metaAfter(base, decision.events, decision.state.lineage) };
            break;
          }
          case "noop":
          case "quarantined":
          case "refused":
            stored = { ...base, state: decision.state, meta: { ...base.meta, updated_at: this.now() } };
            break;
          case "diverged": {
            divergenceId = this.moveBranch(roomId, decision.divergence, decision.moved);
            this.appendToLog(roomId, decision.events, receivedRun(decision.events, page));
            stored = { ...base, state: decision.state, meta: this.recomputeMeta(roomId, base.meta, decision.state.lineage) };
            break;
          }
        }
        this.saveRow(stored!, current);
      }),
    );
    if (stored) this.cache.set(roomId, stored);
    return divergenceId;
  }

  /**
   * `groups.promote`: the claim, the new state and the durable epoch counter in one transaction at
   * synchronous=FULL. Call `syncBarrier` before planning so the replica log is on disk first.
   */
  commitPromote(roomId: string, plan: Extract<PromotePlan, { ok: true }>, replication: QuorumPolicy | null = null): void {
    const current = this.mustRoom(roomId);
    const stored: StoredRoom = {
      ...current,
      state: plan.state,
      meta: { ...current.meta, updated_at: this.now() },
      follow: null,
      replication: replication ?? current.replication,
    };
    this.write([roomId], () => {
      this.db
        .prepare(
          "INSERT INTO gateway_meta (key, value) VALUES ('rooms_max_epoch', ?) ON CONFLICT(key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
        )
        .run(String(plan.epoch));
      this.appendToLog(roomId, [plan.claim]);
      this.saveRow(stored, current);
      this.stmt.setSource.run(null, roomId);
      if (replication) this.stmt.setReplication.run(JSON.stringify(replication), roomId);
    });
    this.cache.set(roomId, stored);
  }

  /** `groups.demote`: the adopted authority and the demotion's audit record (the log is left as it is). */
  commitDemote(roomId: string, plan: Extract<DemotePlan, { ok: true; idempotent: false }>): void {
    const current = this.mustRoom(roomId);
    const stored: StoredRoom = { ...current, state: plan.state, meta: { ...current.meta, updated_at: this.now() } };
    this.write([roomId], () => {
      this.stmt.insertDemotion.run(plan.demotion);
      this.saveRow(stored, current);
    });
    this.cache.set(roomId, stored);
  }

  /** A state change without events: a fence (self-fencing) or a released safety status. */
  saveState(roomId: string, state: RoomState): void {
    const current = this.mustRoom(roomId);
    const stored: StoredRoom = { ...current, state, meta: { ...current.meta, updated_at: this.now() } };
    this.write([roomId], () => this.saveRow(stored, current));
    this.cache.set(roomId, stored);
  }

  /** Records the quorum policy of a room this gateway holds (a replica, when it starts following). */
  setReplication(roomId: string, replication: QuorumPolicy): void {
    const current = this.room(roomId);
    if (!current) return;
    this.write([roomId], () => this.stmt.setReplication.run(JSON.stringify(replication), roomId));
    this.cache.set(roomId, { ...current, replication });
  }

  /** Remembers (or forgets, with null) the peer a replica follows. */
  setFollowSource(roomId: string, source: FollowSourceRef | null): void {
    const current = this.room(roomId);
    if (!current) return;
    this.write([roomId], () => this.stmt.setSource.run(source === null ? null : JSON.stringify(source), roomId));
    this.cache.set(roomId, { ...current, follow: source });
  }

  /**
   * A commit at synchronous=FULL: fsyncs the WAL, and with it every replica page applied before at
   * NORMAL. After it returns, everything this gateway stored is durable (a promote never claims
   * authority over unsynced events).
   */
  syncBarrier(): void {
    this.db.transaction(() => {
      this.db
        .prepare(
          "INSERT INTO gateway_meta (key, value) VALUES ('rooms_sync_barrier', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        )
        .run(this.now());
    })();
  }

  /** Forgets cached states (tests that edit the database behind the store's back). */
  dropCache(): void {
    this.cache.clear();
    this.logs.clear();
  }

  // ------------------------------------------------------------------------------------------
  // Internals

  private mustRoom(roomId: string): StoredRoom {
    const room = this.room(roomId);
    if (!room) throw new HermesError("not_found", `no room ${roomId} on this gateway`, { data: { room_id: roomId } });
    return room;
  }

  /**
   * Runs `fn` in an IMMEDIATE transaction; on failure the rooms' cache entries are dropped (reloaded
   * from disk) and SQLite's error becomes a typed one (database_busy, database_corrupt, …).
   */
  private write(roomIds: readonly string[], fn: () => void): void {
    try {
      this.transaction.immediate(fn);
    } catch (err) {
      for (const id of roomIds) {
        this.cache.delete(id);
        this.logs.delete(id);
      }
      if (err instanceof HermesError) throw err;
      const code = (err as { code?: unknown }).code;
      // A constraint is a bug in a plan, not the disk: keep SQLite's message for the log.
      if (typeof code === "string" && code.startsWith("SQLITE_CONSTRAINT")) throw err;
      throw databaseError(err, "gateway state.db", this.db.name);
    }
  }

  /** Runs `fn` (a replica page) at synchronous=NORMAL: no fsync at its commit; back to FULL after. */
  private withNormalSync(fn: () => void): void {
    this.stmt.normalSync.run();
    try {
      fn();
    } finally {
      this.stmt.fullSync.run();
    }
  }

  private newReplicaRoom(state: RoomState): StoredRoom {
    const now = this.now();
    return {
      state,
      meta: { name: "", members: [], revision: 0, created_at: now, updated_at: now, disbanded_at: null },
      follow: null,
      replication: null,
    };
  }

  private fromRow(row: RoomRow, lineage: LineageEntry[]): StoredRoom {
    const role = row.authority_gateway_id === this.selfGatewayId ? "authority" : "replica";
    const lastSeq = row.next_seq - 1;
    const state: RoomState = {
      room_id: row.room_id,
      self_gateway_id: this.selfGatewayId,
      role,
      authority: { gateway_id: row.authority_gateway_id, epoch: row.authority_epoch },
      lineage,
      last_seq: lastSeq,
      last_hash: row.last_hash,
      latest_seq: role === "authority" ? lastSeq : (row.replica_latest_seq ?? 0),
      max_epoch_seen: row.max_epoch_seen,
      fenced_by: row.fenced_by_epoch === null ? null : { gateway_id: row.fenced_by_gateway_id ?? "", epoch: row.fenced_by_epoch },
      disbanded: row.disbanded_at !== null,
      safety_status: row.safety_status,
      safety_reason: row.safety_reason,
    };
    return {
      state,
      meta: {
        name: row.name,
        members: parseJson<Member[]>(row.members_json, []),
        revision: row.revision,
        created_at: row.created_at,
        updated_at: row.updated_at,
        disbanded_at: row.disbanded_at,
      },
      follow: parseJson<FollowSourceRef | null>(row.replica_source_json, null),
      replication: parseJson<QuorumPolicy | null>(row.replication_json ?? null, null),
    };
  }

  private rowParams(stored: StoredRoom): RoomRow {
    const { state, meta } = stored;
    const replica = state.role === "replica";
    return {
      room_id: state.room_id,
      name: meta.name,
      members_json: JSON.stringify(meta.members),
      authority_gateway_id: state.authority.gateway_id,
      authority_epoch: state.authority.epoch,
      next_seq: state.last_seq + 1,
      revision: meta.revision,
      created_at: meta.created_at,
      updated_at: meta.updated_at,
      disbanded_at: meta.disbanded_at,
      fenced_by_epoch: state.fenced_by?.epoch ?? null,
      fenced_by_gateway_id: state.fenced_by?.gateway_id ?? null,
      max_epoch_seen: state.max_epoch_seen,
      last_hash: state.last_hash,
      replica_last_seq: replica ? state.last_seq : null,
      replica_latest_seq: replica ? state.latest_seq : null,
      safety_status: state.safety_status,
      safety_reason: state.safety_reason,
      replica_source_json: stored.follow === null ? null : JSON.stringify(stored.follow),
    };
  }

  /** Writes the row (and the lineage, members and meta when they changed) inside a transaction. */
  private saveRow(stored: StoredRoom, before: StoredRoom | undefined): void {
    const { state, meta } = stored;
    if (before === undefined) this.stmt.upsertRoom.run(this.rowParams(stored));
    else {
      const replica = state.role === "replica";
      const info = this.stmt.updateRoomState.run(
        state.authority.gateway_id,
        state.authority.epoch,
        state.last_seq + 1,
        meta.updated_at,
        state.fenced_by?.epoch ?? null,
        state.fenced_by?.gateway_id ?? null,
        state.max_epoch_seen,
        state.last_hash,
        replica ? state.last_seq : null,
        replica ? state.latest_seq : null,
        state.safety_status,
        state.safety_reason,
        state.room_id,
      );
      if (info.changes !== 1) throw new HermesError("database_corrupt", `room ${state.room_id} has no row to update`);
    }
    if (before === undefined || !sameLineage(before.state.lineage, state.lineage)) this.writeLineage(state.room_id, state.lineage);
    if (before === undefined || !sameMetaBesidesTime(before.meta, meta)) {
      this.stmt.updateMeta.run({
        room_id: state.room_id,
        name: meta.name,
        members_json: JSON.stringify(meta.members),
        revision: meta.revision,
        created_at: meta.created_at,
        disbanded_at: meta.disbanded_at,
      });
      if (before === undefined || before.meta.members !== meta.members) this.writeMembers(state.room_id, meta.members);
    }
  }

  private writeLineage(roomId: string, lineage: readonly LineageEntry[]): void {
    this.stmt.deleteLineage.run(roomId);
    for (const entry of lineage) this.stmt.insertLineage.run(roomId, entry.epoch, entry.gateway_id, entry.start_seq);
  }

  /** The membership handles of this gateway's profiles: the members it hosts (the identity registry rekeys them). */
  private writeMembers(roomId: string, members: readonly Member[]): void {
    this.stmt.deleteMembers.run(roomId);
    for (const member of members) {
      if (member.gateway_id === this.selfGatewayId) this.stmt.insertMember.run(roomId, member.member_id, member.profile);
    }
  }

  /** The room's log (its id, end and trailing fragments, read once), or undefined when it has none. */
  private log(roomId: string): LogTail | undefined {
    const known = this.logs.get(roomId);
    if (known !== undefined) return known;
    const logId = this.stmt.logId.get(roomId) as number | undefined;
    if (logId === undefined) return undefined;
    const rows = this.stmt.tailSegments.all(logId, SEGMENT_SEAL_EVENTS + 1) as [number, number, number][];
    const fragments: LogTail["fragments"] = [];
    let count = 0;
    let bytes = 0;
    for (const [first, last, size] of rows) {
      count += last - first + 1;
      bytes += size;
      if (!isFragment(count, bytes)) break;
      fragments.unshift({ first_seq: first, count: last - first + 1, bytes: size });
    }
    const tail: LogTail = { logId, lastSeq: rows[0]?.[1] ?? 0, fragments };
    this.logs.set(roomId, tail);
    return tail;
  }

  /**
   * Appends events to the room's log (inside a write transaction): as one or a few segments, the
   * fragments at the end of the log merged in once they add up to a sealed segment; then their ids
   * and the seqs of room.* events. `run` is their encoding when it is at hand (a replica page's
   * bytes), else they are encoded here. The events must continue the log: seqs stay dense.
   * `knownNew`: the hashes of their ids, which the caller looked up (an authority's appends); without
   * it (a replica's page) each id is checked against the index, and a stored one refuses the write.
   */
  private appendToLog(roomId: string, events: readonly RoomEvent[], run: TupleRun = encodeTuples(events), knownNew?: Float64Array): void {
    if (events.length === 0) return;
    let log = this.log(roomId);
    if (log === undefined) {
      log = { logId: Number(this.stmt.addLog.run(roomId).lastInsertRowid), lastSeq: 0, fragments: [] };
      this.logs.set(roomId, log);
    }
    const first = events[0]!.seq;
    if (first !== log.lastSeq + 1 || run.first_seq !== first || run.ends.length !== events.length) {
      throw new HermesError("internal", `room ${roomId}: events from seq ${first} do not continue the log at seq ${log.lastSeq}`);
    }
    // Loaded before the new events are written: its recent ids come from the log as it was.
    const index = this.idIndex(roomId, log);
    let pending = run;
    const tailCount = log.fragments.reduce((n, f) => n + f.count, 0);
    const tailBytes = log.fragments.reduce((n, f) => n + f.bytes, 0);
    const mergeFrom = log.fragments[0]?.first_seq;
    if (mergeFrom !== undefined && !isFragment(tailCount + events.length, tailBytes + run.body.length)) {
      const fragments = this.packedEvents(roomId, mergeFrom - 1, log.lastSeq - mergeFrom + 1);
      pending = concatRuns([...fragments, run]);
      this.stmt.deleteSegmentsFrom.run(log.logId, mergeFrom);
      log.fragments = [];
    }
    for (const segment of cutSegments(pending)) {
      const count = segment.ends.length;
      const lastSeq = segment.first_seq + count - 1;
      const lastEpoch = lastSeq >= first ? events[lastSeq - first]!.epoch : decodeRun(roomId, segment, count - 1, count)[0]!.epoch;
      this.stmt.insertSegment.run(log.logId, segment.first_seq, lastSeq, lastEpoch, endsToBytes(segment.ends), blob(segment.body));
      if (isFragment(count, segment.body.length)) log.fragments.push({ first_seq: segment.first_seq, count, bytes: segment.body.length });
    }
    log.lastSeq = first + events.length - 1;
    this.indexIds(roomId, log, index, events, knownNew);
    for (const e of events) {
      if (!e.kind.startsWith("room.")) continue;
      this.stmt.insertMeta.run(log.logId, e.seq);
      if (e.kind === "room.disbanded") this.stmt.retire.run(e.room_id, this.now());
    }
  }

  // ------------------------------------------------------------------------------------------
  // The event id index (rooms/core/id-index.ts)

  /** The log's id index, loaded on first use: the runs with their filters, and the recent ids from the segments. */
  private idIndex(roomId: string, log: LogTail): IdIndex {
    log.idsUsed = true;
    if (log.ids !== undefined) return log.ids;
    const runs: IdRun[] = [];
    for (const [run_id, level, count, merging_into, merged_below, filterBytes] of this.stmt.idRuns.all(log.logId) as [
      number,
      number,
      number,
      number | null,
      number | null,
      Buffer | null,
    ][]) {
      let filter: IdFilter;
      if (filterBytes !== null) filter = IdFilter.fromBytes(filterBytes);
      else {
        // A merge's target, part built (the filter is stored when it is done): its keys so far.
        filter = IdFilter.forKeys(count);
        for (const bytes of this.stmt.runChunks.iterate(log.logId, run_id) as Iterable<Buffer>) addToFilter(filter, decodeIdChunk(bytes));
      }
      runs.push({ run_id, level, count, merging_into, merged_below, filter });
    }
    const idsThrough = this.stmt.idsThrough.get(log.logId) as number;
    const index: IdIndex = { recent: new RecentIds(), runs };
    for (const event of this.events(roomId, idsThrough, log.lastSeq - idsThrough)) {
      index.recent.add(eventIdHash(event.event_id), event.seq);
    }
    log.ids = index;
    if (hasMergeWork(runs)) this.idWork?.();
    return index;
  }

  /**
   * The stored seqs an id with this hash may be at (recent ones first). While a merge is built, a
   * key can be in its source and its target: a seq is listed once.
   */
  private idCandidates(log: LogTail, index: IdIndex, hash: number): number[] {
    const seqs = index.recent.seqsOf(hash);
    for (const run of index.runs) {
      if (!run.filter.mayContain(hash)) continue;
      const row = this.stmt.chunkAt.get(log.logId, run.run_id, hash) as [number, Buffer] | undefined;
      if (row === undefined) continue;
      for (const seq of seqsOfHash(decodeIdChunk(row[1]), hash)) if (!seqs.includes(seq)) seqs.push(seq);
    }
    return seqs;
  }

  /** The stored event with this id (`hash` its hash), read at each seq the index offers and compared. */
  private storedEventOfId(roomId: string, log: LogTail, eventId: string, hash: number): RoomEvent | null {
    for (const seq of this.idCandidates(log, this.idIndex(roomId, log), hash)) {
      const event = this.eventAt(roomId, seq);
      if (event !== null && event.event_id === eventId) return event;
      // Another id with the same hash is fine; an entry that fits no event is not.
      if (event === null || eventIdHash(event.event_id) !== hash) {
        throw new HermesError(
          "database_corrupt",
          `room ${roomId}: the event id index points at seq ${seq}, which does not hold that event`,
        );
      }
    }
    return null;
  }

  /** Whether any of these events' ids (`hashes` their hashes) is stored in the room (the filters answer most without a read). */
  private anyIdStored(roomId: string, events: readonly RoomEvent[], hashes: Float64Array): boolean {
    const log = this.log(roomId);
    if (log === undefined) return false;
    const index = this.idIndex(roomId, log);
    for (let i = 0; i < events.length; i++) {
      if (mayBeIndexed(index, hashes[i]!) && this.storedEventOfId(roomId, log, events[i]!.event_id, hashes[i]!) !== null) return true;
    }
    return false;
  }

  /**
   * Indexes appended events (inside their write transaction, after their segments): each id into
   * the recent ids, a stored one refused (with `knownNew`, their hashes, only within the recent ids,
   * where a repeat costs nothing to see); once the recent ids make a run, they are written as one.
   */
  private indexIds(roomId: string, log: LogTail, index: IdIndex, events: readonly RoomEvent[], knownNew?: Float64Array): void {
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      const hash = knownNew === undefined ? eventIdHash(event.event_id) : knownNew[i]!;
      // The event is not indexed yet (its segment is written): a stored one with its id is an earlier event.
      if (
        (knownNew ? index.recent.has(hash) : mayBeIndexed(index, hash)) &&
        this.storedEventOfId(roomId, log, event.event_id, hash) !== null
      ) {
        throw new HermesError("internal", `room ${roomId}: event id ${event.event_id} (seq ${event.seq}) is already stored`);
      }
      index.recent.add(hash, event.seq);
    }
    if (shouldFlushIds(index.recent.size)) this.flushIds(log, index);
  }

  /** Writes the recent ids as a new run of level 0 and moves ids_through to the log's end. */
  private flushIds(log: LogTail, index: IdIndex): void {
    const sorted = index.recent.sortedKeys();
    const filter = IdFilter.forKeys(index.recent.size);
    addToFilter(filter, sorted);
    const run = this.insertIdRun(log, index, 0, index.recent.size, filter);
    this.insertIdChunks(log.logId, run.run_id, sorted);
    index.runs.push(run);
    index.recent.clear();
    this.stmt.setIdsThrough.run(log.lastSeq, log.logId);
    if (planIdMerge(index.runs) !== null) this.idWork?.();
  }

  /**
   * A new run's row, for about `keys` keys: complete with `filter` (its keys are written next, in
   * this transaction), or without one a merge's target, empty and built from merged_below 0 on.
   */
  private insertIdRun(log: LogTail, index: IdIndex, level: number, keys: number, filter?: IdFilter): IdRun {
    const runId = Math.max(0, ...index.runs.map((r) => r.run_id)) + 1;
    const mergedBelow = filter === undefined ? 0 : null;
    this.stmt.insertRun.run(log.logId, runId, level, keys, mergedBelow, filter === undefined ? null : blob(filter.bytes()));
    return { run_id: runId, level, count: keys, merging_into: null, merged_below: mergedBelow, filter: filter ?? IdFilter.forKeys(keys) };
  }

  /** Sorted keys appended to a run, as chunks (rooms/core/id-index.ts, cutIdChunks). */
  private insertIdChunks(logId: number, runId: number, sorted: IdKeys): void {
    for (const [from, to] of cutIdChunks(sorted)) {
      this.stmt.insertChunk.run(logId, runId, sorted[2 * from]!, blob(encodeIdChunk(sorted, from, to)));
    }
  }

  /**
   * Drops from memory the id indexes not used since the last call (between writes, never inside
   * one): a room that stops getting sends gives back its recent ids and its runs' filters (~140 KB
   * for a room of 20,000 events); its next send reads them back as a restart does (~3 ms). An
   * index with merging to do stays, so its merge finishes. Returns how many were dropped.
   */
  releaseIdleIds(): number {
    let released = 0;
    for (const log of this.logs.values()) {
      const index = log.ids;
      if (index === undefined) continue;
      if (log.idsUsed || hasMergeWork(index.runs)) {
        log.idsUsed = false;
        continue;
      }
      log.ids = undefined;
      released++;
    }
    return released;
  }

  /** How many logs have their id index in memory. */
  loadedIdIndexes(): number {
    let loaded = 0;
    for (const log of this.logs.values()) if (log.ids !== undefined) loaded++;
    return loaded;
  }

  /** Set by whoever runs `compactIds`: called (from inside a write, so it must only schedule) when there is merging to do. */
  idWork: (() => void) | undefined;

  /**
   * One step of merging the id index's runs, in its own transaction: the keys of the next hash
   * range of a merge in progress are copied from its sources into its target (the last step stores
   * the target's filter and drops the sources), or a merge starts. Only logs this store has opened
   * are merged (a log nobody reads has no look-ups to speed up). Returns whether there is more to do.
   * `stepKeys`: about how many keys one step copies.
   */
  compactIds(stepKeys = ID_MERGE_STEP_KEYS): boolean {
    for (const [roomId, log] of this.logs) {
      const index = log.ids;
      if (index === undefined) continue;
      const work = index.runs.find((r) => r.merged_below !== null) ?? planIdMerge(index.runs);
      if (work === null) continue;
      // At NORMAL: a step only copies keys, so losing it to a power cut loses nothing; the next FULL commit syncs it.
      this.withNormalSync(() => this.write([roomId], () => this.mergeStep(log, index, work, stepKeys)));
      return true;
    }
    return false;
  }

  /** One step of the merge whose target is being built, or (`work` a plan) the start of one and its first step. */
  private mergeStep(log: LogTail, index: IdIndex, work: IdRun | IdMergePlan, stepKeys: number): void {
    let target: IdRun;
    if ("run_id" in work) target = work;
    else {
      const plan = work;
      target = this.insertIdRun(log, index, plan.level, plan.keys);
      for (const run of index.runs) {
        if (!plan.sources.includes(run.run_id)) continue;
        run.merging_into = target.run_id;
        this.stmt.setMergeSource.run(target.run_id, log.logId, run.run_id);
      }
      index.runs.push(target);
    }
    const targetId = target.run_id;
    const { from, to } = idMergeStep(target.merged_below!, target.count, stepKeys);
    // Each source's chunks in the range follow one another in key order: joined, one sorted array per source.
    const parts: IdKeys[] = [];
    for (const source of index.runs) {
      if (source.merging_into !== targetId) continue;
      const chunks = (this.stmt.rangeChunks.all({ log: log.logId, run: source.run_id, from, to }) as Buffer[]).map((bytes) =>
        idKeysInRange(decodeIdChunk(bytes), from, to),
      );
      parts.push(joinIdKeys(chunks));
    }
    const merged = mergeIdKeys(parts);
    addToFilter(target.filter, merged);
    this.insertIdChunks(log.logId, targetId, merged);
    if (to < ID_HASH_END) {
      target.merged_below = to;
      this.stmt.setMergedBelow.run(to, log.logId, targetId);
      return;
    }
    this.stmt.deleteMergedChunks.run(log.logId, log.logId, targetId);
    this.stmt.deleteMergedRuns.run(log.logId, targetId);
    this.stmt.finishMerge.run(blob(target.filter.bytes()), log.logId, targetId);
    target.merged_below = null;
    index.runs = index.runs.filter((r) => r.merging_into !== targetId);
  }

  /**
   * Meta after appending `events` (only room.* kinds change it), `lineage` describing them.
   * When nothing but the time changed, the members are the same array (saveRow then writes only the row's state).
   */
  private metaAfter(room: StoredRoom, events: readonly RoomEvent[], lineage: readonly LineageEntry[]): RoomMeta {
    let meta: RoomMeta = { ...room.meta, updated_at: this.now() };
    for (const event of events) {
      if (!event.kind.startsWith("room.")) continue;
      meta = applyMetaEvent(meta, event, lineage);
    }
    return meta;
  }

  /** Meta from the log as it now stands (after a branch moved away, a rename may have gone with it). */
  private recomputeMeta(roomId: string, before: RoomMeta, lineage: readonly LineageEntry[]): RoomMeta {
    const log = this.log(roomId);
    const seqs =
      log === undefined
        ? []
        : (this.db.prepare("SELECT seq FROM room_meta_events WHERE log_id = ? ORDER BY seq").pluck().all(log.logId) as number[]);
    let meta: RoomMeta = { ...before, name: "", members: [], revision: 0, disbanded_at: null, updated_at: this.now() };
    for (const seq of seqs) {
      const event = this.eventAt(roomId, seq);
      if (event === null) throw new HermesError("database_corrupt", `room ${roomId}: no event at seq ${seq}, listed as a room.* event`);
      meta = applyMetaEvent(meta, event, lineage);
    }
    return meta;
  }

  /**
   * Moves local seqs from..to (the end of the log) to room_divergent_events under a new divergence
   * record: the log is cut back to from − 1 (the segment holding `from` keeps its part before it),
   * and the moved events leave the id and room.* indexes. Nothing else is deleted.
   */
  private moveBranch(roomId: string, record: DivergenceRecord, moved: { from_seq: number; to_seq: number }): number {
    const log = this.log(roomId);
    const events = this.events(roomId, moved.from_seq - 1, moved.to_seq - moved.from_seq + 1);
    if (log === undefined || events.length !== record.count || log.lastSeq !== moved.to_seq) {
      throw new HermesError(
        "database_corrupt",
        `room ${roomId}: expected ${record.count} events in seqs ${moved.from_seq}..${moved.to_seq} to preserve, found ${events.length}; nothing was moved`,
      );
    }
    const info = this.db
      .prepare(
        `INSERT INTO room_divergences (room_id, detected_at, from_seq, branch_epoch, branch_gateway_id, winning_epoch, winning_gateway_id, count, markers_only)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        roomId,
        record.detected_at,
        record.from_seq,
        record.branch_epoch,
        record.branch_gateway_id,
        record.winning_epoch,
        record.winning_gateway_id,
        record.count,
        record.markers_only ? 1 : 0,
      );
    const divergenceId = Number(info.lastInsertRowid);
    const preserve = this.db.prepare(
      `INSERT INTO room_divergent_events (divergence_id, ${EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    for (const e of events) {
      preserve.run(divergenceId, e.room_id, e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash);
    }
    const [holding] = this.packedEvents(roomId, moved.from_seq - 1, 1);
    this.stmt.deleteSegmentsFrom.run(log.logId, moved.from_seq);
    if (holding !== undefined && holding.first_seq < moved.from_seq) {
      const kept = sliceRun(holding, 0, moved.from_seq - holding.first_seq);
      const lastEpoch = decodeRun(roomId, kept, kept.ends.length - 1, kept.ends.length)[0]!.epoch;
      this.db
        .prepare("UPDATE room_log_segments SET last_seq = ?, last_epoch = ?, ends = ?, body = ? WHERE log_id = ? AND first_seq = ?")
        .run(moved.from_seq - 1, lastEpoch, endsToBytes(kept.ends), blob(kept.body), log.logId, holding.first_seq);
    }
    this.unindexIds(log, events, moved.from_seq);
    this.db.prepare("DELETE FROM room_meta_events WHERE log_id = ? AND seq >= ?").run(log.logId, moved.from_seq);
    // Read the end of the log again (inside this transaction) before anything is appended to it.
    this.logs.delete(roomId);
    return divergenceId;
  }

  /**
   * Takes the ids of events cut from the log's end (seqs `fromSeq` on) out of the index: their keys
   * from whichever run holds them (its chunk is written again without them), and ids_through back
   * before them (the recent ids are in memory: the caller drops the log's cached state, which
   * rebuilds them).
   */
  private unindexIds(log: LogTail, events: readonly RoomEvent[], fromSeq: number): void {
    const idsThrough = this.stmt.idsThrough.get(log.logId) as number;
    if (idsThrough < fromSeq) return;
    const runIds = this.stmt.idRunIds.all(log.logId) as number[];
    for (const event of events) {
      if (event.seq > idsThrough) continue;
      const hash = eventIdHash(event.event_id);
      for (const runId of runIds) {
        const row = this.stmt.chunkAt.get(log.logId, runId, hash) as [number, Buffer] | undefined;
        const kept = row && withoutIdKey(decodeIdChunk(row[1]), hash, event.seq);
        if (!row || !kept) continue;
        this.stmt.deleteChunk.run(log.logId, runId, row[0]);
        if (kept.length > 0) this.stmt.insertChunk.run(log.logId, runId, kept[0]!, blob(encodeIdChunk(kept, 0, kept.length / 2)));
      }
    }
    this.stmt.setIdsThrough.run(fromSeq - 1, log.logId);
  }
}

/** The hashes of the events' ids. */
function idHashes(events: readonly RoomEvent[]): Float64Array {
  const hashes = new Float64Array(events.length);
  for (let i = 0; i < events.length; i++) hashes[i] = eventIdHash(events[i]!.event_id);
  return hashes;
}

/** Adds a run's keys (sorted or not) to a filter. */
function addToFilter(filter: IdFilter, keys: IdKeys): void {
  for (let i = 0; i < keys.length; i += 2) filter.add(keys[i]!);
}

/** False: no id with this hash is stored. True: one may be (look it up). */
function mayBeIndexed(index: IdIndex, hash: number): boolean {
  if (index.recent.has(hash)) return true;
  for (const run of index.runs) if (run.filter.mayContain(hash)) return true;
  return false;
}

/**
 * The part of a page's received bytes that holds `events` (what a replication decision applies),
 * when the page kept them and `events` are its own events; else undefined (they get encoded).
 */
function receivedRun(events: readonly RoomEvent[], page: LogPage | undefined): TupleRun | undefined {
  const run = page?.tuples;
  if (run === undefined || page === undefined || events.length === 0 || run.ends.length !== page.events.length) return undefined;
  const from = events[0]!.seq - run.first_seq;
  const to = from + events.length;
  if (from < 0 || to > run.ends.length || page.events[from] !== events[0] || page.events[to - 1] !== events[events.length - 1]) {
    return undefined;
  }
  return sliceRun(run, from, to);
}

/** Equal but for updated_at (which every write of the row's state writes anyway). */
function sameMetaBesidesTime(a: RoomMeta, b: RoomMeta): boolean {
  return (
    a.name === b.name &&
    a.members === b.members &&
    a.revision === b.revision &&
    a.created_at === b.created_at &&
    a.disbanded_at === b.disbanded_at
  );
}

function sameLineage(a: readonly LineageEntry[], b: readonly LineageEntry[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((x, i) => x.epoch === b[i]!.epoch && x.gateway_id === b[i]!.gateway_id && x.start_seq === b[i]!.start_seq);
}

/**
 * The meta a room.* event leaves. A member list names every member's host gateway: a member
 * without one (lists written by earlier versions) lives on the gateway that wrote the list, the
 * authority in force at the event's seq.
 */
function applyMetaEvent(meta: RoomMeta, event: RoomEvent, lineage: readonly LineageEntry[]): RoomMeta {
  const payload = parseJson<Record<string, unknown>>(event.payload_json, {});
  const members = () => {
    if (!Array.isArray(payload.members)) return meta.members;
    const writer = entryAt(lineage, event.seq)?.gateway_id;
    return writer === undefined ? (payload.members as Member[]) : withHosts(payload.members as Member[], writer);
  };
  switch (event.kind) {
    case "room.created":
      return {
        ...meta,
        name: typeof payload.name === "string" ? payload.name : meta.name,
        members: members(),
        revision: Math.max(meta.revision, 1),
        created_at: event.created_at,
      };
    case "room.renamed":
      return { ...meta, name: typeof payload.name === "string" ? payload.name : meta.name, revision: meta.revision + 1 };
    case "room.members_changed":
      return { ...meta, members: members(), revision: meta.revision + 1 };
    case "room.disbanded":
      return { ...meta, disbanded_at: event.created_at, revision: meta.revision + 1 };
    default:
      return meta;
  }
}
