import { type Clock, type Db, isoTime, type Logger } from "@hermes/common";
import type { Registry } from "prom-client";
import { type AppendOutcome, type AppendRequest, refusalError } from "../../core/rooms/index.js";
import { RoomsStore } from "../../store/rooms-store.js";
import { Events } from "../events.js";
import { GroupCommit } from "./group-commit.js";
import { RoomChanges } from "./live-tail.js";
import { RoomsMetrics } from "./rooms-metrics.js";

export interface RoomLogDeps {
  db: Db;
  gatewayId: string;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  /** Appends of one room per group commit (1..1000). */
  maxAppendsPerCommit: number;
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

  constructor(deps: RoomLogDeps) {
    const now = () => isoTime(deps.clock.now());
    this.store = new RoomsStore(deps.db, deps.gatewayId, now);
    this.metrics = new RoomsMetrics(deps.registry, () => this.store.replicaLagMax());
    this.commits = new GroupCommit(
      this.store,
      now,
      {
        committed: (appended, batchSize) => {
          let total = 0;
          for (const [roomId, n] of appended) {
            total += n;
            this.changes.notify(roomId);
            this.events.emit("appended", roomId);
          }
          this.metrics.appends.inc(total);
          this.metrics.appendBatch.observe(batchSize);
        },
        listenerFailed: (err) => deps.logger.error({ err }, "a room listener failed after a group commit"),
      },
      deps.maxAppendsPerCommit,
    );
  }

  /** Any append through group commit; a refusal rejects with its typed error. */
  async append(roomId: string, request: AppendRequest): Promise<Exclude<AppendOutcome, { kind: "refused" }>> {
    const outcome = await this.commits.submit(roomId, request);
    if (outcome.kind === "refused") {
      if (outcome.refusal.reason === "authority_conflict") this.metrics.fencedRefusals.inc();
      throw refusalError(outcome.refusal);
    }
    return outcome;
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
