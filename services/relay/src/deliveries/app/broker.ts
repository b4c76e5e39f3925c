import { type Clock, HermesError, type Logger, toHermesError } from "@hermes/common";
import { LaneScheduler } from "@hermes/common/pure";
import { ttlExpired } from "@hermes/contract";
import { ackFrame, deliverFrame, outcomeFrame } from "../../connections/app/frames.js";
import type { SessionTable } from "../../connections/app/sessions.js";
import type { RelayMetrics } from "../../home/app/relay-metrics.js";
import type { RelayStore } from "../../home/store/relay-store.js";
import {
  applyResult,
  decideSend,
  expireIfDue,
  forward,
  laneKey,
  type NewDelivery,
  type Outcome,
  outcomeLabel,
  type RelayDelivery,
  requeue,
  targetLost,
} from "../core/deliveries.js";
import type { SendRequest } from "../core/send.js";

export interface BrokerDeps {
  store: RelayStore;
  sessions: SessionTable;
  clock: Clock;
  logger: Logger;
  metrics: RelayMetrics;
  maxParallelTargets: number;
  retentionMs: number;
}

interface InFlight {
  connection: string;
  /** The stream it went down; a replaced stream hands its deliveries back to the queue. */
  sessionId: number;
  /** The target's answer is being committed: a second answer or a disconnect changes nothing. */
  answered: boolean;
}

/** A change waiting for the next group commit, and what to do once it is durable. */
type PendingWrite =
  | { kind: "insert"; record: NewDelivery; after(stored: RelayDelivery): void; failed(err: HermesError): void }
  | { kind: "save"; record: RelayDelivery; after(): void; failed(err: HermesError): void }
  | { kind: "ack"; id: string; after(): void; failed(err: HermesError): void };

const PRUNE_EVERY_MS = 60_000;

/**
 * The relay's delivery engine: commits an envelope before acking `queued`, forwards it down
 * its target's stream in per-target order (targets in parallel up to a cap), relays the target's
 * outcome to the sender, expires what waited past its TTL, and tells the sender `runtime_offline`
 * when a target disconnects mid-delivery.
 *
 * Writes are group-committed: every change decided in one turn of the event loop goes into one
 * SQLite transaction (synchronous=FULL, one fsync), and acks and outcomes are sent only after it
 * committed. Decisions read through the uncommitted changes, so a repeat arriving in the same batch
 * sees the first copy.
 */
export class DeliveryBroker {
  private readonly lanes: LaneScheduler;
  private readonly inFlight = new Map<string, InFlight>();
  /** Expiry times of queued deliveries (the sweep needs no table scan). */
  private readonly expiries = new Map<string, number>();
  private batch: PendingWrite[] = [];
  /** The latest decided state of deliveries changed in the pending batch. */
  private readonly uncommitted = new Map<string, RelayDelivery>();
  private flushScheduled = false;
  private lastPrune = 0;

  constructor(private readonly deps: BrokerDeps) {
    this.lanes = new LaneScheduler(deps.maxParallelTargets);
  }

  /** Start-up: every open delivery is queued again, in commit order (the target deduplicates). */
  recover(): number {
    const open = this.deps.store.open();
    const now = this.deps.clock.now();
    for (const record of open) {
      const queued = record.state === "forwarded" ? requeue(record, now) : record;
      if (queued !== record) this.deps.store.save(queued);
      this.enqueue(queued);
    }
    return open.length;
  }

  private enqueue(record: RelayDelivery): void {
    this.lanes.enqueue({ lane: laneKey(record.target_connection, record.target_handle), id: record.delivery_id, seq: record.seq });
    this.expiries.set(record.delivery_id, record.expires_at);
  }

  private lookup(id: string): RelayDelivery | undefined {
    return this.uncommitted.get(id) ?? this.deps.store.delivery(id);
  }

  // -------------------------------------------------------------------------------------------
  // Group commit

  private write(w: PendingWrite): void {
    if (w.kind !== "ack") this.uncommitted.set(w.record.delivery_id, { seq: -1, ...w.record } as RelayDelivery);
    this.batch.push(w);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Commits the pending batch in one transaction, then runs what waited for it. */
  flush(): void {
    this.flushScheduled = false;
    const batch = this.batch;
    if (batch.length === 0) return;
    this.batch = [];
    let stored: (RelayDelivery | undefined)[];
    try {
      stored = this.deps.store.db
        .transaction(() =>
          batch.map((w) => {
            if (w.kind === "insert") return this.deps.store.insert(w.record);
            if (w.kind === "save") this.deps.store.save(w.record);
            return undefined;
          }),
        )
        .immediate();
    } catch (err) {
      const e = toHermesError(err);
      this.deps.logger.error({ err: e, writes: batch.length }, "relay commit failed; nothing in it was acknowledged");
      this.uncommitted.clear();
      for (const w of batch) w.failed(e);
      return;
    }
    this.uncommitted.clear();
    batch.forEach((w, i) => {
      try {
        if (w.kind === "insert") w.after(stored[i]!);
        else w.after();
      } catch (err) {
        this.deps.logger.error({ err: toHermesError(err) }, "after-commit step failed");
      }
    });
    this.pump();
  }

  // -------------------------------------------------------------------------------------------
  // Frames

  /**
   * A `send` frame from `sender`. The `queued` ack is written only after the envelope is committed;
   * a repeat of an ended delivery is answered with the stored outcome.
   */
  send(sender: string, send: SendRequest): void {
    const id = send.envelope.delivery_id;
    const now = this.deps.clock.now();
    const existing = this.lookup(id);
    if (!existing && !this.deps.store.hasConnection(send.target_connection)) {
      throw new HermesError(
        "unknown_target",
        `no connection called ${JSON.stringify(send.target_connection)} is known to the relay; it needs a key (hermes relay key add ${send.target_connection}) and its gateway must connect`,
        { data: { target: send.envelope.target, connection: send.target_connection } },
      );
    }
    const decision = decideSend(existing, sender, send, now);
    const ack = () => this.deps.sessions.get(sender)?.send(ackFrame(id));
    const refuse = (err: HermesError) => this.deps.sessions.get(sender)?.send(ackFrame(id, err));
    switch (decision.action) {
      case "insert":
        this.write({
          kind: "insert",
          record: decision.record,
          after: (record) => {
            this.deps.metrics.accepted.inc();
            this.deps.logger.debug(
              { delivery_id: id, from: sender, target: `${record.target_handle}@${record.target_connection}` },
              "envelope queued",
            );
            ack();
            this.enqueue(record);
          },
          failed: refuse,
        });
        return;
      case "requeue":
        this.write({
          kind: "save",
          record: decision.record,
          after: () => {
            this.deps.logger.info({ delivery_id: id, from: sender }, "envelope queued again (the sender's retry)");
            ack();
            this.enqueue(decision.record);
          },
          failed: refuse,
        });
        return;
      case "ack":
        // A repeat of a delivery still in the pending batch is acked once that batch is durable.
        if (this.uncommitted.has(id)) this.write({ kind: "ack", id, after: ack, failed: refuse });
        else ack();
        return;
      case "ack_outcome":
        ack();
        this.deps.sessions.get(sender)?.send(outcomeFrame(id, decision.outcome));
        return;
    }
  }

  /** A target's answer for a delivery forwarded to it. False when it was not expected (ignored). */
  result(from: string, deliveryId: string, outcome: Outcome): boolean {
    const flight = this.inFlight.get(deliveryId);
    if (!flight || flight.connection !== from || flight.answered) return false;
    const record = this.lookup(deliveryId);
    const now = this.deps.clock.now();
    const ended = record?.state === "queued" ? applyResult(forward(record, now), from, outcome, now) : undefined;
    if (!ended) return false;
    flight.answered = true;
    this.write({
      kind: "save",
      record: ended,
      after: () => {
        this.inFlight.delete(deliveryId);
        this.lanes.finish(deliveryId);
        this.expiries.delete(deliveryId);
        this.report(ended);
      },
      failed: () => {
        // Not durable: the delivery stays in flight; a disconnect or restart sends it again.
        flight.answered = false;
      },
    });
    return true;
  }

  /** A gateway connected (or reconnected): its lanes can run. */
  connectionUp(): void {
    this.pump();
  }

  /**
   * A gateway's stream ended. Deliveries it held are reported `runtime_offline` to their senders
   * (who apply the single-retry rule), unless the stream was replaced by a newer one of the same
   * gateway: then they are simply forwarded again on the new stream.
   */
  connectionDown(connection: string, sessionId: number, how: "lost" | "replaced"): void {
    const now = this.deps.clock.now();
    for (const [id, flight] of [...this.inFlight]) {
      if (flight.connection !== connection || flight.sessionId !== sessionId || flight.answered) continue;
      this.inFlight.delete(id);
      const record = this.lookup(id);
      if (!record || how === "replaced") {
        this.lanes.finish(id, record !== undefined);
        continue;
      }
      const lost = targetLost({ ...record, state: "forwarded" }, now);
      this.lanes.finish(id);
      this.expiries.delete(id);
      this.deps.logger.warn({ delivery_id: id, target: `${record.target_handle}@${connection}` }, "target disconnected mid-delivery");
      this.write({
        kind: "save",
        record: lost,
        after: () => this.report(lost),
        // Not durable: it is still queued in the database; queue it here again too.
        failed: () => this.enqueue(record),
      });
    }
    this.pump();
  }

  /** Expires queued deliveries past their TTL; now and then forgets long-ended ones. */
  sweep(): void {
    const now = this.deps.clock.now();
    for (const [id, at] of [...this.expiries]) {
      if (!ttlExpired(at, now) || this.lanes.isRunning(id)) continue;
      const record = this.lookup(id);
      this.expiries.delete(id);
      this.lanes.remove(id);
      if (!record) continue;
      const expired = expireIfDue(record, now);
      if (expired === record) continue;
      this.deps.logger.info({ delivery_id: id, target: `${record.target_handle}@${record.target_connection}` }, "envelope expired");
      this.write({ kind: "save", record: expired, after: () => this.report(expired), failed: () => this.enqueue(record) });
    }
    if (now - this.lastPrune >= PRUNE_EVERY_MS) {
      this.lastPrune = now;
      const pruned = this.deps.store.prune(now - this.deps.retentionMs);
      if (pruned > 0) this.deps.logger.info({ pruned }, "forgot ended deliveries past the retention");
    }
    this.pump();
  }

  /** Starts whatever the lanes allow now. */
  pump(): void {
    const sessions = this.deps.sessions;
    const items = this.lanes.take((lane) => sessions.isOnline(lane.slice(0, lane.indexOf("\u0000"))));
    for (const item of items) {
      const record = this.lookup(item.id);
      if (record?.state !== "queued") {
        this.lanes.finish(item.id);
        this.expiries.delete(item.id);
        continue;
      }
      const session = sessions.get(record.target_connection);
      if (!session?.send(deliverFrame(record))) {
        this.lanes.finish(item.id, true);
        continue;
      }
      this.inFlight.set(item.id, { connection: record.target_connection, sessionId: session.id, answered: false });
      this.deps.metrics.forwards.inc();
    }
  }

  private report(record: RelayDelivery): void {
    const outcome = record.outcome!;
    const label = outcomeLabel(outcome);
    this.deps.metrics.deliveries.inc({ outcome: label });
    this.deps.metrics.deliverySeconds.observe({ outcome: label }, Math.max(0, record.updated_at - record.accepted_at) / 1000);
    this.deps.sessions.get(record.sender_connection)?.send(outcomeFrame(record.delivery_id, outcome));
  }

  depth(): { queued: number; in_flight: number } {
    const d = this.lanes.depth();
    return { queued: d.queued, in_flight: d.running };
  }
}
