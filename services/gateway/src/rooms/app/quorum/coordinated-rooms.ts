import { HermesError, type Logger, toHermesError } from "@hermes/common";
import {
  type AuthorityRead,
  type AuthorityRecord,
  assessAuthorityRecord,
  type Coordinator,
  refusalError as coordinatorRefusal,
  decideRoomCourse,
  initialRecord,
  type KnownAuthority,
  type RegisteredGateway,
  releaseRecord,
  type WatchHandle,
} from "@hermes/coordinator";
import { Counter, type Registry } from "prom-client";
import type { CreateRoomPlan, DemoteResult, PromoteResult, QuorumPolicy, RoomState } from "../../core/index.js";
import type { StoredRoom } from "../../store/rooms-store.js";
import type { QuorumFollow, ReplicateProgress, ReplicateResult, Replicator } from "../replicator.js";
import type { RoomLog } from "../room-log.js";
import { AckSender } from "./ack-sender.js";
import type { QuorumAcks } from "./quorum-acks.js";

/** What `groups.state` shows of a room's replication. */
export interface ReplicationView {
  mode: "local" | "quorum";
  replicas: string[];
  min_insync: number;
  isr: string[];
  missing: string[];
  lease: { holder: string; expires_in_ms: number } | null;
}

export const LOCAL_REPLICATION: ReplicationView = Object.freeze({
  mode: "local",
  replicas: [],
  min_insync: 1,
  isr: [],
  missing: [],
  lease: null,
}) as ReplicationView;

/** The rooms service's view of the coordinated mesh: what it hands over for quorum rooms. */
export interface RoomCoordination {
  /** Writes the room's first record in etcd, then creates it here and leads it. */
  create(plan: Extract<CreateRoomPlan, { ok: true }>, policy: QuorumPolicy): Promise<StoredRoom>;
  /** An operator's promote: the same compare-and-swap claim as a failover (`unclean`: outside the ISR). */
  promote(roomId: string, input: { reason: string; unclean: boolean }): Promise<PromoteResult>;
  /** An operator's demote: releases the room (the leader) and follows whoever claims it. */
  demote(roomId: string): Promise<DemoteResult>;
  view(roomId: string, policy: QuorumPolicy): ReplicationView;
  /** `groups stop` on a replica: stop following until `resume`. */
  pause(roomId: string): void;
  /** `groups replicate` of a quorum room: follow its authority (from the record) again. */
  resume(roomId: string, options: { onProgress?: (p: ReplicateProgress) => void; signal?: AbortSignal }): Promise<ReplicateResult>;
}

export interface CoordinatedRoomsDeps {
  coordinator: Coordinator;
  log: RoomLog;
  replicator: Replicator;
  acks: QuorumAcks;
  /** Sent to the other gateways of the mesh (following, acks). */
  meshKey: string | undefined;
  leaseTtlMs: number;
  logger: Logger;
  registry: Registry;
  /** Monotonic clock in ms. */
  now?: () => number;
}

function policyOf(record: AuthorityRecord): QuorumPolicy {
  return { mode: "quorum", replicas: [...record.replicas], min_insync: record.min_insync };
}

function notFound(roomId: string): HermesError {
  return new HermesError("not_found", `no room ${roomId} on this gateway; list rooms with: hermes groups list`, {
    data: { room_id: roomId },
  });
}

/**
 * The quorum rooms of a coordinated gateway, kept in the course the coordinator's records say
 * (core: decideRoomCourse): it watches every room's authority record and the registrations, and
 * for each room this gateway is a replica of it leads (QuorumAcks), claims the room when its
 * holder's lease is gone and this gateway is in sync (failover: `authority.claimed {reason:
 * "lease-expired"}`), follows the holder (durably, reporting what it holds: AckSender), or demotes
 * itself first when it still leads at an older epoch (a returning old authority; its
 * unacknowledged suffix is preserved as a divergence when the first page arrives). Records it
 * cannot adopt (malformed, a lower epoch, another holder for a known epoch, deleted) are refused
 * and logged, and a room led under one stops acknowledging. Every decision is taken again on each
 * change, one at a time per room.
 */
export class CoordinatedRooms implements RoomCoordination {
  private readonly self: string;
  private readonly now: () => number;
  private readonly records = new Map<string, { record: AuthorityRecord; modRevision: string }>();
  /** Rooms whose record was refused, with the text refused (each new text is logged once). */
  private readonly refused = new Map<string, string | null>();
  private readonly gateways = new Map<string, RegisteredGateway>();
  private readonly paused = new Set<string>();
  private readonly released = new Set<string>();
  /** Rooms an operator's promote is claiming right now. */
  private readonly claiming = new Set<string>();
  /** What each followed room's follower was started for (`holder@epoch url`). */
  private readonly following = new Map<string, string>();
  /** etcd's TTL of other gateways' leases, as last asked. */
  private readonly leaseSamples = new Map<string, { ttlMs: number; at: number }>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  /**
   * Claims (automatic and an operator's promote) run one at a time on this gateway. A claim's epoch
   * is one above every durable epoch of this gateway, all rooms together (what the local promote
   * checks), so two claims at once would both take the same epoch, both win in etcd (different
   * keys), and the second takeover would be refused here.
   */
  private claims: Promise<unknown> = Promise.resolve();
  private readonly watches: WatchHandle[] = [];
  private readonly ackSender: AckSender;
  private readonly failovers: Counter;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly deps: CoordinatedRoomsDeps) {
    this.self = deps.coordinator.gatewayId;
    this.now = deps.now ?? (() => performance.now());
    this.ackSender = new AckSender(this.self, deps.meshKey, deps.logger);
    this.failovers = new Counter({
      name: "hermes_room_failovers_total",
      help: "Quorum rooms this gateway claimed from an authority whose lease was gone or released (failovers and operator promotes)",
      registers: [deps.registry],
    });
    deps.replicator.events.on("followStopped", (roomId) => {
      this.following.delete(roomId);
      // Not at once: a source that refuses at once would make a loop of it.
      if (this.records.has(roomId)) setTimeout(() => this.reconcile(roomId), Math.min(1000, deps.leaseTtlMs / 4)).unref();
    });
    deps.coordinator.onLeaseChange(() => this.reconcileAll());
  }

  /** Reads the registrations and every record, watches both, and starts leading, claiming and following. */
  async start(): Promise<void> {
    const { coordinator } = this.deps;
    for (const [id, registration] of await coordinator.gateways()) this.gateways.set(id, registration);
    this.watches.push(
      await coordinator.watchGateways(
        (id, registration) => this.registrationChanged(id, registration),
        () => void this.rereadGateways(),
      ),
    );
    this.watches.push(
      await coordinator.watchAuthorities(
        (roomId, read) => this.observed(roomId, read),
        () => void this.rereadRecords(),
      ),
    );
    this.deps.acks.start();
    this.timer = setInterval(() => void this.checkLeases(), Math.max(200, Math.floor(this.deps.leaseTtlMs / 3)));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await Promise.all(this.watches.splice(0).map((w) => w.cancel().catch(() => undefined)));
    await Promise.all([...this.running.values()].map((r) => r.catch(() => undefined)));
    this.ackSender.close();
    this.deps.acks.stop();
  }

  // ------------------------------------------------------------------------------------------
  // What the rooms service hands over

  async create(plan: Extract<CreateRoomPlan, { ok: true }>, policy: QuorumPolicy): Promise<StoredRoom> {
    const { coordinator, log, acks } = this.deps;
    const roomId = plan.state.room_id;
    const record = initialRecord(this.self, coordinator.requireLease(), plan.state.authority.epoch, policy);
    const written = await coordinator.writeAuthority(roomId, "0", record);
    if (written.kind === "lease_lost")
      throw new HermesError("lease_lost", `gateway ${this.self} lost its coordinator lease while creating room ${roomId}; retry`);
    if (written.kind === "conflict") {
      const holder = written.current.record;
      throw new HermesError(
        "already_exists",
        `room id ${roomId} is already used in this mesh${holder ? ` (led by ${holder.gateway_id}@${holder.epoch})` : ""}; choose another id`,
        { data: { room_id: roomId } },
      );
    }
    const stored = log.store.createRoom(plan, policy);
    this.records.set(roomId, { record, modRevision: written.modRevision });
    acks.lead(roomId, { record, modRevision: written.modRevision, logEnd: plan.state.last_seq, joinFloor: 0 });
    return stored;
  }

  async promote(roomId: string, input: { reason: string; unclean: boolean }): Promise<PromoteResult> {
    const { coordinator, log } = this.deps;
    const stored = log.store.room(roomId);
    if (!stored) throw notFound(roomId);
    // The room's course is not set meanwhile: the watch reports the claimed record before the claim
    // returns, and taking the room over from there too would take it twice.
    this.claiming.add(roomId);
    try {
      await this.running.get(roomId);
      return await this.oneClaimAtATime(async () => {
        const outcome = await coordinator.claimAuthority(roomId, {
          mode: input.unclean ? "promote_unclean" : "promote",
          localMaxEpoch: log.store.maxDurableEpoch(),
          known: this.known(roomId, log.store.state(roomId)),
          policy: stored.replication ?? undefined,
        });
        if (outcome.kind === "conflict") {
          this.observed(roomId, outcome.current);
          throw new HermesError(
            "refused",
            `the authority record of room ${roomId} changed while claiming it; look at hermes groups state ${roomId} and retry`,
          );
        }
        if (outcome.kind === "refuse") throw coordinatorRefusal(outcome);
        return await this.takeOver(roomId, outcome.record, outcome.modRevision, input.reason);
      });
    } finally {
      this.claiming.delete(roomId);
      this.reconcile(roomId);
    }
  }

  async demote(roomId: string): Promise<DemoteResult> {
    const { coordinator, log, acks } = this.deps;
    const before = log.store.state(roomId);
    if (!before) throw notFound(roomId);
    if (before.role === "replica") {
      return {
        room_id: roomId,
        authority_gateway_id: before.authority.gateway_id,
        authority_epoch: before.authority.epoch,
        idempotent: true,
      };
    }
    const held = acks.record(roomId);
    const entry = this.records.get(roomId);
    if (held && entry) {
      const lease = coordinator.requireLease();
      const change = releaseRecord(held, this.self, lease);
      if (change.kind === "refuse") throw coordinatorRefusal(change);
      // Stop acknowledging first, then let the in-sync replicas claim at once.
      this.released.add(roomId);
      acks.stopLeading(roomId, new HermesError("lease_lost", `room ${roomId} was handed over by a demote; retry on its new authority`));
      const written = await coordinator.writeAuthority(roomId, entry.modRevision, change.record).catch((err: unknown) => {
        this.released.delete(roomId);
        this.reconcile(roomId);
        throw err;
      });
      if (written.kind !== "written") {
        this.released.delete(roomId);
        this.reconcile(roomId);
        throw new HermesError(
          "refused",
          `could not release room ${roomId} (${written.kind}); look at hermes groups state ${roomId} and retry`,
        );
      }
      this.records.set(roomId, { record: change.record, modRevision: written.modRevision });
      this.deps.logger.warn({ room_id: roomId }, "released the room for an in-sync replica to claim");
    }
    this.reconcile(roomId);
    const demoted = await this.untilDemoted(roomId, this.deps.leaseTtlMs + 3000);
    return {
      room_id: roomId,
      authority_gateway_id: demoted.authority.gateway_id,
      authority_epoch: demoted.authority.epoch,
      idempotent: false,
    };
  }

  view(roomId: string, policy: QuorumPolicy): ReplicationView {
    const { acks } = this.deps;
    const record = acks.record(roomId) ?? this.records.get(roomId)?.record ?? null;
    const replicas = record?.replicas ?? policy.replicas;
    const led = acks.view(roomId);
    let lease: ReplicationView["lease"] = null;
    if (led) lease = led.leaseRemainingMs > 0 ? { holder: this.self, expires_in_ms: Math.floor(led.leaseRemainingMs) } : null;
    else if (record?.lease) {
      const sample = this.leaseSamples.get(record.lease);
      const registered = this.gateways.get(record.gateway_id)?.lease === record.lease;
      const left = sample ? sample.ttlMs - (this.now() - sample.at) : registered ? this.deps.leaseTtlMs : 0;
      if (left > 0) lease = { holder: record.gateway_id, expires_in_ms: Math.floor(left) };
    }
    return {
      mode: "quorum",
      replicas: [...replicas],
      min_insync: record?.min_insync ?? policy.min_insync,
      isr: [...(led?.isr ?? record?.isr ?? [])],
      missing: replicas.filter((g) => g !== this.self && !this.gateways.has(g)),
      lease,
    };
  }

  pause(roomId: string): void {
    this.paused.add(roomId);
    this.following.delete(roomId);
    this.ackSender.forget(roomId);
  }

  async resume(roomId: string, options: { onProgress?: (p: ReplicateProgress) => void; signal?: AbortSignal }): Promise<ReplicateResult> {
    this.paused.delete(roomId);
    const entry = this.records.get(roomId);
    const url = entry ? this.gateways.get(entry.record.gateway_id)?.advertise_url : undefined;
    if (!entry || !url || entry.record.gateway_id === this.self) {
      this.reconcile(roomId);
      throw new HermesError(
        "not_authority",
        `room ${roomId} has no authority this gateway can follow now${entry ? ` (${entry.record.gateway_id}@${entry.record.epoch})` : ""}; it follows by itself once one is registered`,
        entry ? { data: { authority: { gateway_id: entry.record.gateway_id, epoch: entry.record.epoch } } } : {},
      );
    }
    this.following.set(roomId, this.followKey(entry.record, url));
    return this.deps.replicator.replicate(
      roomId,
      { url, key: this.deps.meshKey },
      { follow: true, quorum: this.quorumFollow(roomId, entry.record, url), ...options },
    );
  }

  // ------------------------------------------------------------------------------------------
  // Watches

  private registrationChanged(id: string, registration: RegisteredGateway | null): void {
    if (registration) this.gateways.set(id, registration);
    else this.gateways.delete(id);
    // A holder that left (its lease expired) or came back: its rooms change course.
    for (const [roomId, { record }] of this.records) if (record.gateway_id === id) this.reconcile(roomId);
  }

  private async rereadGateways(): Promise<void> {
    try {
      const current = await this.deps.coordinator.gateways();
      for (const id of [...this.gateways.keys()]) if (!current.has(id)) this.registrationChanged(id, null);
      for (const [id, registration] of current) this.registrationChanged(id, registration);
    } catch (err) {
      this.deps.logger.warn({ err }, "re-reading the gateway registrations failed");
    }
  }

  private async rereadRecords(): Promise<void> {
    try {
      const current = await this.deps.coordinator.authorities();
      for (const [roomId, read] of current) this.observed(roomId, read);
      // A quorum room held here whose record vanished is refused (never acted on) and logged.
      for (const roomId of this.deps.log.store.quorumRoomIds()) {
        if (!current.has(roomId)) this.observed(roomId, { text: null, modRevision: "0", record: null, problem: null });
      }
    } catch (err) {
      this.deps.logger.warn({ err }, "re-reading the authority records failed");
    }
  }

  /** A version of a room's record: adopted (and acted on) or refused (logged, never adopted). */
  private observed(roomId: string, read: AuthorityRead): void {
    if (this.closed) return;
    const { log, acks, logger, replicator } = this.deps;
    const state = log.store.state(roomId);
    const assessed = assessAuthorityRecord(this.known(roomId, state), read.text);
    if (assessed.kind === "absent") return;
    if (assessed.kind === "refuse") {
      if (!this.refused.has(roomId) || this.refused.get(roomId) !== read.text) {
        logger.error(
          { room_id: roomId, problem: assessed.problem, found: read.text },
          `refused the authority record of room ${roomId}: ${assessed.message}`,
        );
      }
      this.refused.set(roomId, read.text);
      acks.stopLeading(
        roomId,
        new HermesError(
          "lease_lost",
          `the authority record of room ${roomId} in etcd is not valid (${assessed.problem}); nothing is acknowledged until it is fixed`,
        ),
      );
      return;
    }
    this.refused.delete(roomId);
    const previous = this.records.get(roomId);
    if (previous && read.modRevision !== "0" && BigInt(read.modRevision) < BigInt(previous.modRevision)) return;
    this.records.set(roomId, { record: assessed.record, modRevision: read.modRevision });
    if (assessed.record.gateway_id === this.self) acks.refreshRecord(roomId, assessed.record, read.modRevision);
    replicator.knowEpoch(roomId, assessed.record.epoch);
    this.reconcile(roomId);
  }

  /** The newest authority this gateway knows for the room: its own copy's, or the record adopted before. */
  private known(roomId: string, state: RoomState | undefined): KnownAuthority | null {
    const local = state && state.authority.epoch > 0 ? state.authority : null;
    const adopted = this.records.get(roomId)?.record;
    const fromRecord = adopted ? { gateway_id: adopted.gateway_id, epoch: adopted.epoch } : null;
    if (local && fromRecord) return fromRecord.epoch >= local.epoch ? fromRecord : local;
    return local ?? fromRecord;
  }

  /** Samples etcd's TTL of every other holder's lease (a gone lease sets the room's course again) and repeats the acks. */
  private async checkLeases(): Promise<void> {
    const leases = new Map<string, string[]>();
    for (const [roomId, { record }] of this.records) {
      if (record.lease === null || record.gateway_id === this.self || !record.replicas.includes(this.self)) continue;
      leases.set(record.lease, [...(leases.get(record.lease) ?? []), roomId]);
    }
    for (const [lease, rooms] of leases) {
      const ttlMs = await this.deps.coordinator.leaseTtlMs(lease).catch(() => null);
      if (ttlMs === null) continue;
      this.leaseSamples.set(lease, { ttlMs, at: this.now() });
      if (ttlMs === 0) for (const roomId of rooms) this.reconcile(roomId);
    }
    this.ackSender.resendAll();
  }

  // ------------------------------------------------------------------------------------------
  // The course of one room

  private reconcileAll(): void {
    for (const roomId of this.records.keys()) this.reconcile(roomId);
  }

  /** Sets the room's course again; runs one at a time per room (a change meanwhile runs it once more). */
  private reconcile(roomId: string): void {
    if (this.closed) return;
    if (this.running.has(roomId)) {
      this.again.add(roomId);
      return;
    }
    const run = (async () => {
      do {
        this.again.delete(roomId);
        try {
          await this.setCourse(roomId);
        } catch (err) {
          const e = toHermesError(err);
          this.deps.logger.warn(
            { room_id: roomId, reason: e.reason, err: e.message },
            "could not set the quorum room's course; retrying on the next change",
          );
        }
      } while (this.again.has(roomId) && !this.closed);
    })().finally(() => this.running.delete(roomId));
    this.running.set(roomId, run);
  }

  private async setCourse(roomId: string): Promise<void> {
    const entry = this.records.get(roomId);
    if (!entry || this.refused.has(roomId) || this.claiming.has(roomId)) return;
    const { coordinator, log, acks, logger } = this.deps;
    const { record, modRevision } = entry;
    const state = log.store.state(roomId);
    const lease = coordinator.leaseStatus();
    const course = decideRoomCourse({
      self: this.self,
      selfLease: lease.phase === "valid" ? lease.leaseId : null,
      record,
      recordLeaseAlive: await this.leaseAlive(record),
      local: state ? { role: state.role, epoch: state.authority.epoch } : null,
      released: this.released.has(roomId),
      paused: this.paused.has(roomId),
    });
    switch (course.kind) {
      case "ignore":
        return;
      case "lead":
        if (course.promote) await this.takeOver(roomId, record, modRevision, "lease-expired");
        else if (!acks.isLeading(roomId) && state)
          acks.lead(roomId, { record, modRevision, logEnd: state.last_seq, joinFloor: state.last_seq });
        return;
      case "claim":
        await this.oneClaimAtATime(async () => {
          // Read in the queue: the claim before this one may have raised the epochs known here.
          const outcome = await coordinator.claimAuthority(roomId, {
            mode: "automatic",
            localMaxEpoch: log.store.maxDurableEpoch(),
            known: this.known(roomId, log.store.state(roomId)),
          });
          // A released record is a planned hand-over; otherwise the holder's lease expired.
          if (outcome.kind === "claimed")
            await this.takeOver(roomId, outcome.record, outcome.modRevision, record.lease === null ? "planned-handover" : "lease-expired");
          else if (outcome.kind === "conflict") this.observed(roomId, outcome.current);
          else logger.debug({ room_id: roomId, refusal: outcome.code }, "did not claim the room");
        });
        return;
      case "follow":
        if (course.demote) {
          acks.stopLeading(
            roomId,
            new HermesError("not_authority", `room ${roomId} is led by ${course.authority.gateway_id}@${course.authority.epoch} now`, {
              data: { authority: course.authority },
            }),
          );
          log.demote(roomId, { observed_gateway_id: course.authority.gateway_id, observed_epoch: course.authority.epoch });
          this.released.delete(roomId);
        }
        this.follow(roomId, record);
        return;
      case "wait":
        if (acks.isLeading(roomId) && !(record.gateway_id === this.self && record.lease === lease.leaseId)) {
          acks.stopLeading(roomId, new HermesError("lease_lost", `gateway ${this.self} no longer holds room ${roomId}'s lease; retry`));
        }
        logger.debug({ room_id: roomId, why: course.why }, "waiting");
        return;
    }
  }

  private oneClaimAtATime<T>(claim: () => Promise<T>): Promise<T> {
    const run = this.claims.then(claim, claim);
    this.claims = run.catch(() => undefined);
    return run;
  }

  /** Whether the lease the record names is alive: this gateway's own, a registration under it, or etcd's word. */
  private async leaseAlive(record: AuthorityRecord): Promise<boolean> {
    if (record.lease === null) return false;
    const own = this.deps.coordinator.leaseStatus();
    if (record.lease === own.leaseId) return true;
    if (this.gateways.get(record.gateway_id)?.lease === record.lease) return true;
    // Unknown is alive: a room is never claimed on a guess.
    const ttlMs = await this.deps.coordinator.leaseTtlMs(record.lease).catch(() => null);
    if (ttlMs !== null) this.leaseSamples.set(record.lease, { ttlMs, at: this.now() });
    return ttlMs === null || ttlMs > 0;
  }

  /**
   * The claim won in etcd, made here: the log durable, `authority.claimed` at the record's epoch, then
   * leading. When the local promote refuses the epoch (one known here already at or above the claimed
   * one, e.g. from a page of another room that arrived while claiming), the record is released again:
   * held under this gateway's live lease with nobody leading, the room would be stuck for good, as no
   * other gateway claims a live lease. Released, an in-sync replica (this one too, at a higher epoch)
   * claims it at once; nothing was acknowledged at the refused epoch.
   */
  private async takeOver(roomId: string, record: AuthorityRecord, modRevision: string, reason: string): Promise<PromoteResult> {
    const { log, acks, replicator, logger } = this.deps;
    replicator.stopFollowing(roomId, true);
    this.following.delete(roomId);
    this.ackSender.forget(roomId);
    this.released.delete(roomId);
    let result: PromoteResult;
    try {
      result = log.promote(roomId, { reason, claimEpoch: record.epoch, replication: policyOf(record) });
    } catch (err) {
      // Only a refused epoch stays refused on every retry. Others pass (a room being created here is
      // seen in its record before its local copy exists: not_found, then led once it does).
      if (toHermesError(err).reason === "epoch_regression") await this.releaseRefusedClaim(roomId, record, modRevision, err);
      throw err;
    }
    this.records.set(roomId, { record, modRevision });
    acks.lead(roomId, { record, modRevision, logEnd: result.claim_seq, joinFloor: result.claim_seq });
    this.failovers.inc();
    logger.warn({ room_id: roomId, record, claim_seq: result.claim_seq }, `claimed room ${roomId} at epoch ${record.epoch} (${reason})`);
    return result;
  }

  private async releaseRefusedClaim(roomId: string, record: AuthorityRecord, modRevision: string, refusal: unknown): Promise<void> {
    const { coordinator, logger } = this.deps;
    const e = toHermesError(refusal);
    // Without a valid lease the record's lease expires by itself, and an in-sync replica claims then.
    const lease = coordinator.leaseStatus().leaseId;
    if (lease === null) return;
    const change = releaseRecord(record, this.self, lease);
    if (change.kind === "refuse") return;
    const written = await coordinator.writeAuthority(roomId, modRevision, change.record).catch(() => null);
    // Adopted at once: the course set again next must see the released record, not the claimed one.
    if (written?.kind === "written") this.records.set(roomId, { record: change.record, modRevision: written.modRevision });
    logger.warn(
      { room_id: roomId, epoch: record.epoch, reason: e.reason, err: e.message, released: written?.kind === "written" },
      `the claim of room ${roomId} at epoch ${record.epoch} won in etcd but was refused here; releasing the record for an in-sync replica to claim`,
    );
  }

  private follow(roomId: string, record: AuthorityRecord): void {
    const url = this.gateways.get(record.gateway_id)?.advertise_url;
    if (!url) return; // not registered (yet): its registration sets the course again
    const key = this.followKey(record, url);
    const running = this.deps.replicator.followStatus(roomId);
    if (this.following.get(roomId) === key && running && running.state !== "stopped") return;
    this.following.set(roomId, key);
    this.deps.logger.info(
      { room_id: roomId, authority: `${record.gateway_id}@${record.epoch}`, url },
      "following the quorum room's authority",
    );
    this.deps.replicator.resume(roomId, { url, key: this.deps.meshKey }, this.quorumFollow(roomId, record, url));
  }

  private followKey(record: AuthorityRecord, url: string): string {
    return `${record.gateway_id}@${record.epoch} ${url}`;
  }

  private quorumFollow(roomId: string, record: AuthorityRecord, url: string): QuorumFollow {
    return {
      policy: policyOf(record),
      epoch: record.epoch,
      durable: (seq, epoch) => this.ackSender.report(roomId, url, epoch, seq),
    };
  }

  /** Resolves with the room's state once this gateway is a replica of it (demoted), or times out. */
  private untilDemoted(roomId: string, timeoutMs: number): Promise<RoomState> {
    const { log } = this.deps;
    return new Promise((resolve, reject) => {
      const check = () => {
        const state = log.store.state(roomId);
        if (state?.role !== "replica") return false;
        done();
        resolve(state);
        return true;
      };
      const unsubscribe = log.events.on("authorityChanged", (id) => {
        if (id === roomId) check();
      });
      const timer = setTimeout(() => {
        done();
        reject(
          new HermesError(
            "timeout",
            `room ${roomId} is released, but no in-sync replica claimed it within ${timeoutMs} ms; this gateway acknowledges nothing for it meanwhile (hermes groups state ${roomId})`,
          ),
        );
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        unsubscribe();
      };
      check();
    });
  }
}
