import { HermesError, type Logger } from "@hermes/common";
import {
  AckTracker,
  type AuthorityRecord,
  type Coordinator,
  changeIsr,
  refusalError as coordinatorRefusal,
  type MaxLag,
} from "@hermes/coordinator";
import { Gauge, type Registry } from "prom-client";
import type { RoomState } from "../../core/index.js";

/**
 * How appends to a quorum room are acknowledged on its authority (`QuorumGate` of the room log):
 * admitted only while this gateway holds the room's record under its valid lease with enough
 * replicas in sync; answered only once durable here and on every ISR member (the coordinator's
 * AckTracker), and only while the lease is still valid at that instant by this process's monotonic
 * clock. ISR changes are written to the record (compare-and-swap) before acks depend on them.
 */
export interface QuorumGate {
  /** Before an append is queued; throws the typed refusal when it could not be acknowledged now. */
  admit(roomId: string, state: RoomState): void;
  /** After a commit: the room's log ends at `lastSeq`, durable here. */
  committed(roomId: string, lastSeq: number): void;
  /** Resolves once the event at `seq` may be acknowledged; rejects with why it may not (`state`: the room as the append found it). */
  acknowledged(roomId: string, seq: number, state: RoomState): Promise<void>;
}

export interface LeadParams {
  record: AuthorityRecord;
  modRevision: string;
  /** Last seq of the log, durable here. */
  logEnd: number;
  /** A replica joins the ISR only holding this seq (the claim, after a failover). */
  joinFloor: number;
}

interface Waiter {
  seq: number;
  resolve(): void;
  reject(err: HermesError): void;
}

class LeadingRoom {
  readonly tracker: AckTracker;
  /** Appends waiting for their ack, in the order they committed (ascending seq, but for retries). */
  waiters: Waiter[] = [];
  /** A settle is queued for the end of this turn (the waiters of one commit are settled together). */
  settleQueued = false;
  writing = false;

  constructor(
    readonly roomId: string,
    public record: AuthorityRecord,
    public modRevision: string,
    maxLag: MaxLag,
    params: LeadParams,
    now: () => number,
  ) {
    this.tracker = new AckTracker({
      authority: record.gateway_id,
      epoch: record.epoch,
      replicas: record.replicas.filter((g) => g !== record.gateway_id),
      minInsync: record.min_insync,
      maxLag,
      recordedIsr: record.isr,
      logEnd: params.logEnd,
      joinFloor: params.joinFloor,
      now,
    });
  }
}

export interface QuorumAcksDeps {
  coordinator: Coordinator;
  logger: Logger;
  registry: Registry;
  maxLag: MaxLag;
  /** Monotonic clock in ms (the lease's). */
  now?: () => number;
}

function notLeading(roomId: string, gatewayId: string): HermesError {
  return new HermesError(
    "lease_lost",
    `gateway ${gatewayId} does not hold room ${roomId}'s lease now, so it acknowledges nothing for it; retry (another gateway may be taking over)`,
    { data: { room_id: roomId } },
  );
}

export class QuorumAcks implements QuorumGate {
  private readonly leading = new Map<string, LeadingRoom>();
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: QuorumAcksDeps) {
    this.now = deps.now ?? (() => performance.now());
    const leading = this.leading;
    new Gauge({
      name: "hermes_room_isr_size",
      help: "The smallest recorded in-sync replica set (authority included) among the quorum rooms this gateway leads; 0 when it leads none",
      registers: [deps.registry],
      collect() {
        const sizes = [...leading.values()].map((r) => r.tracker.isr.recorded.length);
        this.set(sizes.length === 0 ? 0 : Math.min(...sizes));
      },
    });
    deps.coordinator.onLeaseChange(() => this.settleAll());
  }

  /** Starts the timer that shrinks the ISR of lagging members (a quarter of max_lag, 50 ms to 1 s). */
  start(): void {
    const every = Math.min(1000, Math.max(50, Math.floor(this.deps.maxLag.ms / 4)));
    this.timer = setInterval(() => this.settleAll(), every);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    for (const roomId of [...this.leading.keys()])
      this.stopLeading(roomId, new HermesError("unavailable", "the gateway is shutting down; retry"));
  }

  /** This gateway holds the room's record under its lease: acknowledge as its authority. */
  lead(roomId: string, params: LeadParams): void {
    this.stopLeading(roomId, notLeading(roomId, this.deps.coordinator.gatewayId));
    this.leading.set(roomId, new LeadingRoom(roomId, params.record, params.modRevision, this.deps.maxLag, params, this.now));
    this.deps.logger.info({ room_id: roomId, record: params.record }, "leading the quorum room");
  }

  /** It no longer does (demoted, released, the record changed): every waiting append is refused with `error`. */
  stopLeading(roomId: string, error: HermesError): void {
    const room = this.leading.get(roomId);
    if (!room) return;
    this.leading.delete(roomId);
    for (const w of room.waiters.splice(0)) w.reject(error);
  }

  isLeading(roomId: string): boolean {
    return this.leading.has(roomId);
  }

  /** The record this gateway leads the room by (with its ISR as last written), or null. */
  record(roomId: string): AuthorityRecord | null {
    return this.leading.get(roomId)?.record ?? null;
  }

  /** Updates the record held (the reconciler read a newer revision of our own record). */
  refreshRecord(roomId: string, record: AuthorityRecord, modRevision: string): void {
    const room = this.leading.get(roomId);
    if (!room || room.writing || BigInt(modRevision) <= BigInt(room.modRevision)) return;
    room.record = record;
    room.modRevision = modRevision;
  }

  admit(roomId: string, state: RoomState): void {
    // A replica's answer (not_authority, or an idempotent retry) comes from the core; a retry is
    // then refused by `acknowledged`: only the leading authority acknowledges anything.
    if (state.role !== "authority" || state.fenced_by !== null) return;
    const room = this.leading.get(roomId);
    if (!room) throw notLeading(roomId, this.deps.coordinator.gatewayId);
    const admission = room.tracker.admit(this.leaseValid(room));
    if (admission.kind === "refuse") throw coordinatorRefusal(admission);
  }

  committed(roomId: string, lastSeq: number): void {
    const room = this.leading.get(roomId);
    if (!room) return;
    while (room.tracker.logEnd < lastSeq) room.tracker.appended(room.tracker.logEnd + 1);
    this.settle(room);
  }

  acknowledged(roomId: string, seq: number, state: RoomState): Promise<void> {
    const room = this.leading.get(roomId);
    if (!room && state.role === "replica") {
      // An idempotent retry on a replica: only the authority may say the event is acknowledged.
      return Promise.reject(
        new HermesError(
          "not_authority",
          `this gateway is not the authority of room ${roomId}; send to ${state.authority.gateway_id}@${state.authority.epoch} instead`,
          {
            data: { authority: { ...state.authority } },
          },
        ),
      );
    }
    if (!room) return Promise.reject(notLeading(roomId, this.deps.coordinator.gatewayId));
    return new Promise<void>((resolve, reject) => {
      room.waiters.push({ seq, resolve, reject });
      this.settleSoon(room);
    });
  }

  /**
   * One settle for all the waiters a commit adds (each append of a batch reaches `acknowledged` in
   * the same turn): settling per waiter would walk every waiter once per append.
   */
  private settleSoon(room: LeadingRoom): void {
    if (room.settleQueued) return;
    room.settleQueued = true;
    queueMicrotask(() => {
      room.settleQueued = false;
      if (this.leading.get(room.roomId) === room) this.settle(room);
    });
  }

  /**
   * A replica's durable seq (`QuorumService.Ack`). Refused when this gateway does not lead the room
   * at that epoch; answers the epoch and the acknowledged seq.
   */
  replicaAck(roomId: string, gatewayId: string, epoch: number, durableSeq: number): { epoch: number; committed_seq: number } {
    const room = this.leading.get(roomId);
    if (!room) throw notLeading(roomId, this.deps.coordinator.gatewayId);
    const authority = { gateway_id: room.record.gateway_id, epoch: room.record.epoch };
    if (epoch !== room.tracker.epoch) {
      throw new HermesError("not_authority", `room ${roomId} is led at epoch ${room.tracker.epoch}, not ${epoch}`, { data: { authority } });
    }
    if (!room.tracker.replicaAck(gatewayId, epoch, durableSeq)) {
      throw new HermesError("refused", `${gatewayId} is not a replica of room ${roomId}`, { data: { authority } });
    }
    this.settle(room);
    return { epoch: room.tracker.epoch, committed_seq: room.tracker.committed() };
  }

  /** What `groups.state` shows of a room led here. */
  view(roomId: string): { isr: readonly string[]; leaseRemainingMs: number } | null {
    const room = this.leading.get(roomId);
    if (!room) return null;
    const lease = this.deps.coordinator.leaseStatus();
    return { isr: room.tracker.isr.recorded, leaseRemainingMs: this.leaseValid(room) ? lease.remainingMs : 0 };
  }

  private leaseValid(room: LeadingRoom): boolean {
    const lease = this.deps.coordinator.leaseStatus();
    return lease.phase === "valid" && lease.leaseId === room.record.lease;
  }

  private settleAll(): void {
    for (const room of this.leading.values()) this.settle(room);
  }

  /** Answers the waiters that may be answered now, and writes the next ISR change, if any. */
  private settle(room: LeadingRoom): void {
    if (!this.leaseValid(room)) {
      // Past the safe deadline nothing is acknowledged: the room may already have another authority.
      for (const w of room.waiters.splice(0)) w.reject(notLeading(room.roomId, this.deps.coordinator.gatewayId));
      return;
    }
    const committed = room.tracker.committed();
    // Fewer in sync than min_insync: nothing waiting can be acknowledged until replicas catch up.
    const admission = room.tracker.admit(true);
    const waiting: Waiter[] = [];
    for (const w of room.waiters) {
      if (w.seq <= committed) w.resolve();
      else if (admission.kind === "refuse") w.reject(coordinatorRefusal(admission));
      else waiting.push(w);
    }
    room.waiters = waiting;
    this.writeIsr(room);
  }

  private writeIsr(room: LeadingRoom): void {
    if (room.writing) return;
    const plan = room.tracker.planIsr();
    if (plan.kind === "keep") return;
    const lease = room.record.lease;
    if (lease === null) return;
    const change = changeIsr(room.record, room.record.gateway_id, lease, plan.isr);
    if (change.kind !== "write") return;
    room.writing = true;
    room.tracker.isrWriting(plan.isr);
    const { coordinator, logger } = this.deps;
    coordinator
      .writeAuthority(room.roomId, room.modRevision, change.record)
      .then(
        async (written) => {
          if (written.kind === "written") {
            room.record = change.record;
            room.modRevision = written.modRevision;
            room.tracker.isrRecorded(change.record.isr);
            logger.info(
              { room_id: room.roomId, isr: change.record.isr, added: plan.added, removed: plan.removed },
              "in-sync replicas changed",
            );
            room.writing = false;
            if (this.leading.get(room.roomId) === room) this.settle(room);
            return;
          }
          room.tracker.isrWriteFailed();
          if (written.kind === "conflict") {
            const current = written.current.record;
            // Our own record at another revision (the reconciler wrote it, or a retried write landed): go on from it.
            if (
              current &&
              current.gateway_id === room.record.gateway_id &&
              current.epoch === room.record.epoch &&
              current.lease === lease
            ) {
              room.record = current;
              room.modRevision = written.current.modRevision;
              room.tracker.isrRecorded(current.isr);
            } else {
              logger.error(
                { room_id: room.roomId, found: written.current.text },
                "the room's authority record changed under its authority",
              );
              this.stopLeading(room.roomId, notLeading(room.roomId, coordinator.gatewayId));
            }
          }
        },
        (err: unknown) => {
          room.tracker.isrWriteFailed();
          logger.warn({ room_id: room.roomId, err }, "writing the in-sync replicas failed; retrying");
        },
      )
      // A failed write is tried again by the next settle (the timer's, at the latest).
      .finally(() => {
        room.writing = false;
      });
  }
}
