import { type Clock, type Db, HermesError, isoTime, type Logger } from "@hermes/common";
import type { Registry } from "prom-client";
import { Events } from "../../home/app/events.js";
import {
  type AppendOutcome,
  type AppendRequest,
  type Authority,
  DEFAULT_LINGER,
  type DemoteResult,
  formatAuthority,
  observeEpoch,
  type PromoteResult,
  planDemote,
  planPromote,
  type QuorumPolicy,
  refusalError,
} from "../core/index.js";
import { RoomsStore } from "../store/rooms-store.js";
import { GroupCommit } from "./group-commit.js";
import { IdCompactor } from "./id-compactor.js";
import { RoomChanges } from "./live-tail.js";
import type { QuorumGate } from "./quorum/quorum-acks.js";
import { RoomsMetrics } from "./rooms-metrics.js";

export interface RoomLogDeps {
  db: Db;
  gatewayId: string;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  /** Appends of one room per group commit (1..1000). */
  maxAppendsPerCommit: number;
  /** How long a small group commit may wait for more appends (rooms.commit_linger_ms); absent or 0: never. */
  commitLingerMs?: number;
  /** How appends to quorum rooms are acknowledged; absent on a gateway without a coordinator. */
  quorum?: QuorumGate | undefined;
}

/** A promote as the room log commits it (the caller checked confirm and stopped following). */
export interface PromoteCommit {
  reason: unknown;
  /** A coordinated claim: exactly this epoch (the record's). */
  claimEpoch?: number;
  /** The quorum policy to record with the claim (a replica taking over). */
  replication?: QuorumPolicy | null;
}

/** What happens to the rooms of this gateway, for the services built after the log (the discussion driver). */
export interface RoomLogEventMap {
  /** Events were committed to the room (a user message may have arrived). */
  appended: [roomId: string];
  /** Promote, demote or a fence changed who leads the room. */
  authorityChanged: [roomId: string];
}

/**
 * The durable room logs of this gateway: the store, group commit (every append, a client's send or
 * the discussion driver's turn events, is acknowledged after its batch's commit), the change
 * notifications live tails wait on, and the room metrics. The rooms service (the room API) and the
 * discussion driver are both built on it, the driver first, so the rooms service can show its status.
 */
export class RoomLog {
  readonly store: RoomsStore;
  readonly metrics: RoomsMetrics;
  /** Live tails wait on these (per room). */
  readonly changes = new RoomChanges();
  readonly events = new Events<RoomLogEventMap>();
  private readonly commits: GroupCommit;

  constructor(private readonly deps: RoomLogDeps) {
    const now = () => isoTime(deps.clock.now());
    this.store = new RoomsStore(deps.db, deps.gatewayId, now);
    new IdCompactor(this.store, deps.logger);
    this.metrics = new RoomsMetrics(deps.registry, () => this.store.replicaLagMax());
    this.commits = new GroupCommit(
      this.store,
      now,
      {
        committed: (appended, batchSize) => {
          let total = 0;
          for (const [roomId, plan] of appended) {
            total += plan.appended.length;
            const state = this.store.state(roomId);
            if (state) this.deps.quorum?.committed(roomId, state.last_seq);
            // The tails of the room take the committed events (and their bytes) as they are; the
            // plan's state is the stored state only when the commit stored exactly that plan.
            const stored = plan.state === state ? { state, events: plan.appended, run: plan.run } : undefined;
            this.changes.notify(roomId, false, stored);
            this.events.emit("appended", roomId);
          }
          this.metrics.appends.inc(total);
          this.metrics.appendBatch.observe(batchSize);
        },
        listenerFailed: (err) => deps.logger.error({ err }, "a room listener failed after a group commit"),
      },
      deps.maxAppendsPerCommit,
      { ...DEFAULT_LINGER, maxMs: deps.commitLingerMs ?? 0 },
    );
  }

  /**
   * Any append through group commit; a refusal rejects with its typed error. In a quorum room the
   * answer waits, after the commit, until the event may be acknowledged (durable on every in-sync
   * replica, under a valid lease).
   */
  async append(roomId: string, request: AppendRequest): Promise<Exclude<AppendOutcome, { kind: "refused" }>> {
    const quorum = this.quorumGate(roomId);
    const state = quorum ? this.store.state(roomId) : undefined;
    if (quorum && state) quorum.admit(roomId, state);
    const outcome = await this.commits.submit(roomId, request);
    if (outcome.kind === "refused") {
      if (outcome.refusal.reason === "authority_conflict") this.metrics.fencedRefusals.inc();
      throw refusalError(outcome.refusal);
    }
    if (quorum && state) await quorum.acknowledged(roomId, outcome.event.seq, state);
    return outcome;
  }

  /** The gate of a quorum room; none for a local room. A quorum room without a coordinator acknowledges nothing. */
  private quorumGate(roomId: string): QuorumGate | undefined {
    if (this.store.room(roomId)?.replication == null) return undefined;
    if (this.deps.quorum) return this.deps.quorum;
    throw new HermesError(
      "coordinator_unavailable",
      `room ${roomId} has quorum replication and this gateway runs without a coordinator; start it with --coordinator (coordinator.etcd)`,
      { data: { room_id: roomId } },
    );
  }

  /** Self-fencing on an observation of (room, authority) from anywhere. */
  observe(roomId: string, observed: Authority): void {
    const state = this.store.state(roomId);
    if (!state) return;
    const fenced = observeEpoch(state, observed);
    if (fenced === null) return;
    this.store.saveState(roomId, fenced.state);
    this.deps.logger.warn({ room_id: roomId, fence: fenced.fence }, `fenced: ${formatAuthority(fenced.fence)} claims this room`);
    this.authorityChanged(roomId);
  }

  /**
   * Claims the room here: makes the replica log durable (a FULL commit), takes the epoch (one above
   * every durable epoch, or exactly the coordinator's) and commits `authority.claimed` with the new
   * state and the epoch counter in one FULL transaction before anything uses it.
   */
  promote(roomId: string, input: PromoteCommit): PromoteResult {
    this.store.syncBarrier();
    const state = this.store.state(roomId);
    if (!state) throw new HermesError("not_found", `no room ${roomId} on this gateway`, { data: { room_id: roomId } });
    const plan = planPromote(
      state,
      {
        confirm: true,
        reason: input.reason,
        max_durable_epoch: this.store.maxDurableEpoch(),
        stored: this.store.storedKinds(roomId),
        ...(input.claimEpoch === undefined ? {} : { claim_epoch: input.claimEpoch }),
      },
      isoTime(this.deps.clock.now()),
    );
    if (!plan.ok) throw refusalError(plan.refusal);
    this.store.commitPromote(roomId, plan, input.replication ?? null);
    this.deps.logger.warn({ room_id: roomId, promote: plan.result }, "promoted: this gateway now leads the room");
    this.authorityChanged(roomId);
    return plan.result;
  }

  /** Demotes the room here in favour of `observed`: the audit record; the log is left as it is. */
  demote(roomId: string, observed: { observed_gateway_id?: unknown; observed_epoch?: unknown }): DemoteResult {
    const state = this.store.state(roomId);
    if (!state) throw new HermesError("not_found", `no room ${roomId} on this gateway`, { data: { room_id: roomId } });
    const plan = planDemote(
      state,
      { observed_gateway_id: observed.observed_gateway_id, observed_epoch: observed.observed_epoch },
      isoTime(this.deps.clock.now()),
    );
    if (!plan.ok) throw refusalError(plan.refusal);
    if (plan.idempotent) return plan.result;
    this.store.commitDemote(roomId, plan);
    this.deps.logger.warn({ room_id: roomId, demote: plan.result }, "demoted: this gateway now follows the new authority");
    this.authorityChanged(roomId);
    return plan.result;
  }

  /** Who leads the room changed here (promote, demote, a fence): tails and subscribers hear it. */
  authorityChanged(roomId: string): void {
    this.changes.notify(roomId);
    this.events.emit("authorityChanged", roomId);
  }

  /** Commits what is pending now (the last step of a stop). */
  flush(): void {
    this.commits.flush();
  }
}
