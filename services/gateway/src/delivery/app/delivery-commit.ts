import { type Logger, toHermesError } from "@hermes/common";
import type { HermesError } from "@hermes/common/pure";
import { Events } from "../../home/app/events.js";
import { forgetSessionRows } from "../../identity/store/sessions-store.js";
import type { IngressEffect } from "../core/ingress-machine.js";
import type { OutboxEffect } from "../core/outbox-machine.js";
import type { DeliveriesStore } from "../store/deliveries-store.js";

/** The row changes the delivery machines decide, as they are committed. */
export type DeliveryWrite =
  | Extract<OutboxEffect, { kind: "insert_outbox" | "save_outbox" | "mark_notified" }>
  | Extract<IngressEffect, { kind: "insert_ingress" | "save_ingress" | "touch_session" }>;

const WRITE_KINDS: ReadonlySet<string> = new Set([
  "insert_outbox",
  "save_outbox",
  "mark_notified",
  "insert_ingress",
  "save_ingress",
  "touch_session",
]);

export function isDeliveryWrite(effect: OutboxEffect | IngressEffect): effect is DeliveryWrite {
  return WRITE_KINDS.has(effect.kind);
}

export interface DeliveryCommitDeps {
  store: DeliveriesStore;
  /** The session's activity (`updated_at` and its routing entry) after a settled turn. */
  touchSession(sessionId: string): void;
  /** Persists the live routing index's pending changes (inside the commit, so they need none of their own). */
  flushRouting(): void;
  logger: Logger;
  /** How long a batch of only deferrable writes (notified marks) may wait for company. */
  deferMs?: number;
  /** Pause before a failed commit is tried again. */
  retryMs?: number;
}

export interface DeliveryCommitEvents {
  /** A batch committed (before anything that waited for it runs): the writes, in order. */
  committed: [writes: readonly DeliveryWrite[]];
}

interface Batch {
  writes: DeliveryWrite[];
  after: (() => void)[];
  durable: { resolve(): void }[];
}

const emptyBatch = (): Batch => ({ writes: [], after: [], durable: [] });

/**
 * The group commit of deliveries: every row change decided while the event loop works through one
 * turn is committed in ONE `IMMEDIATE` transaction of state.db (synchronous=FULL: one fsync), with
 * the routing index's pending changes; then, in order, everything that waited for it (acks,
 * answers, turns to start, notifications to write). Nothing is acknowledged before the commit that
 * makes it true. A batch of only notified marks waits up to `deferMs` for other writes to ride with.
 *
 * A commit that fails (a full disk) is rolled back and tried again later with the same writes,
 * in order; what waited for it keeps waiting, and `failure` says why (new mail is refused meanwhile).
 */
export class DeliveryCommit {
  readonly events = new Events<DeliveryCommitEvents>();
  private batch: Batch = emptyBatch();
  private immediate: NodeJS.Immediate | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastFailure: HermesError | undefined;
  private readonly deferMs: number;
  private readonly retryMs: number;
  /** The batch's transaction, made once (making one per commit costs a third of a small commit). */
  private readonly commitWrites: (writes: readonly DeliveryWrite[]) => void;

  constructor(private readonly deps: DeliveryCommitDeps) {
    this.deferMs = deps.deferMs ?? 1000;
    this.retryMs = deps.retryMs ?? 1000;
    const tx = deps.store.db.transaction((writes: readonly DeliveryWrite[]) => this.apply(writes));
    this.commitWrites = (writes) => tx.immediate(writes);
  }

  /** Why the last commit failed, until one succeeds again. */
  get failure(): HermesError | undefined {
    return this.lastFailure;
  }

  /** Adds writes to the open batch and what runs once they (and everything before them) are committed. */
  add(writes: readonly DeliveryWrite[], after: readonly (() => void)[]): void {
    this.batch.writes.push(...writes);
    this.batch.after.push(...after);
    this.schedule();
  }

  /** Resolves once everything added so far is committed. */
  durable(): Promise<void> {
    return new Promise((resolve) => {
      this.batch.durable.push({ resolve });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.immediate !== undefined || (this.lastFailure !== undefined && this.timer !== undefined)) return;
    const b = this.batch;
    const deferrable = b.after.length === 0 && b.durable.length === 0 && b.writes.every((w) => w.kind === "mark_notified");
    if (deferrable) {
      if (b.writes.length > 0 && this.timer === undefined) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.flush();
        }, this.deferMs);
        this.timer.unref();
      }
      return;
    }
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.immediate = setImmediate(() => {
      this.immediate = undefined;
      this.flush();
    });
  }

  /** Commits the open batch now, then runs what waited for it (also at a stop, or before a profile's rows are purged). */
  flush(): void {
    if (this.immediate !== undefined) {
      clearImmediate(this.immediate);
      this.immediate = undefined;
    }
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const batch = this.batch;
    if (batch.writes.length === 0 && batch.after.length === 0 && batch.durable.length === 0) return;
    this.batch = emptyBatch();
    if (batch.writes.length > 0) {
      try {
        this.commitWrites(batch.writes);
      } catch (err) {
        this.failed(batch, err);
        return;
      }
      this.lastFailure = undefined;
      this.events.emit("committed", batch.writes);
    }
    for (const run of batch.after) {
      try {
        run();
      } catch (err) {
        this.deps.logger.error({ err: toHermesError(err) }, "a step after a delivery commit failed");
      }
    }
    for (const d of batch.durable) d.resolve();
  }

  private apply(writes: readonly DeliveryWrite[]): void {
    const { store } = this.deps;
    for (const w of writes) {
      switch (w.kind) {
        case "insert_outbox":
          store.insertOutbox(w.row);
          break;
        case "save_outbox":
          store.saveOutbox(w.record);
          break;
        case "mark_notified":
          store.markNotified(w.id, w.at);
          break;
        case "insert_ingress":
          store.insertIngress(w.row);
          break;
        case "save_ingress":
          store.saveIngress(w.record, w.claimed_at);
          break;
        case "touch_session":
          this.deps.touchSession(w.session_id);
          break;
      }
    }
    if (writes.some((w) => w.kind === "touch_session")) this.deps.flushRouting();
  }

  /** Nothing of the batch committed: it goes back in front of what came since, and is tried again. */
  private failed(batch: Batch, err: unknown): void {
    const e = toHermesError(err);
    this.lastFailure = e;
    // The rolled-back touches had updated the kept session rows.
    forgetSessionRows(this.deps.store.db);
    this.deps.logger.error({ err: e, writes: batch.writes.length }, "delivery commit failed; nothing in it was acknowledged; retrying");
    this.batch = {
      writes: [...batch.writes, ...this.batch.writes],
      after: [...batch.after, ...this.batch.after],
      durable: [...batch.durable, ...this.batch.durable],
    };
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, this.retryMs);
    this.timer.unref();
  }
}
