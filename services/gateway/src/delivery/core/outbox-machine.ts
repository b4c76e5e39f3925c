import { HermesError, isoTime, LaneScheduler } from "@hermes/common/pure";
import { type DeliveryReason, isTerminal } from "@hermes/contract";
import { checkFingerprint } from "./envelope.js";
import { outboxFromTarget } from "./outbox-outcome.js";
import { claim, type DeliveryRecord, endByDeletion, expireIfDue, fail, type Receipt } from "./receipt.js";
import { botChatKey, type OutboxRow } from "./rows.js";

/**
 * The sender's side of every delivery sent from this gateway, as one pure state machine: events in,
 * effects out.
 *
 *   send ──▶ outbox row ──local──▶ admit_local (the ingress row commits with it) ── reports ──▶ the end
 *                       └─remote─▶ the target's outbound lane ──▶ claim (durable) ──▶ transmit
 *   transport_answered ──▶ the target's end, taken over as it is (the target applied the retry rule)
 *   transport_failed   ──▶ queued again once (the single retry, same lane slot) or failed
 *   the end ──▶ notify (the completion notification in the sender's Bot Chat) ──▶ notified
 *
 * The shell (delivery/app/delivery-service.ts) commits the row changes of a step in one group
 * commit and runs the other effects after it: a send is acked, an envelope transmitted and a
 * notification written only once the row change that makes it true is durable. Mail to one remote
 * target goes one delivery at a time, in send order; a local delivery follows its ingress row
 * (`target_reported`), whose changes commit in the same transaction as the outbox's.
 */

export interface OutboxSettings {
  /** Remote targets sent to at once (`delivery.max_parallel_targets`). */
  maxParallelTargets: number;
  /** Pause before the single retry of a transport failure (`delivery.retry_delay_seconds`). */
  retryDelayMs: number;
}

/** A failed hop to another gateway, as the shell classified it. */
export interface TransportFailure {
  reason: DeliveryReason;
  error: string;
}

/** Where the ingress row of an open local delivery stands at start-up. */
export type LocalIngressState = "open" | Receipt | undefined;

export type OutboxEvent =
  /** A validated send (`stored`: the row the store holds under its id, when the machine holds none). */
  | { kind: "send"; row: OutboxRow; stored: OutboxRow | undefined }
  /** The local ingress refused the mail (e.g. the target's identity migration is unfinished). */
  | { kind: "local_refused"; id: string; failure: TransportFailure }
  /** The local ingress row moved (claimed, or ended). */
  | { kind: "target_reported"; receipt: Receipt }
  | { kind: "transport_answered"; id: string; receipt: Receipt }
  | { kind: "transport_failed"; id: string; failure: TransportFailure }
  | { kind: "retry_due"; id: string }
  /** The completion notification was written into the sender's Bot Chat. */
  | { kind: "notified"; id: string }
  /** Periodic: remote mail not handed over within its TTL expires. */
  | { kind: "sweep" }
  | { kind: "profile_deleted"; profile: string }
  | { kind: "profile_renamed"; from: string; to: string }
  /** Start-up: the open rows (with their local ingress state) and the ended rows not yet notified. */
  | { kind: "recover"; open: readonly { row: OutboxRow; ingress: LocalIngressState }[]; unnotified: readonly OutboxRow[] }
  | { kind: "stop" };

export type OutboxEffect =
  | { kind: "insert_outbox"; row: OutboxRow }
  | { kind: "save_outbox"; record: DeliveryRecord }
  /** Deferrable: a crash before it only makes the start-up repair look for the notification. */
  | { kind: "mark_notified"; id: string; at: string }
  /** Store the ingress row of a local delivery (in the same commit) and queue it there. */
  | { kind: "admit_local"; row: OutboxRow }
  | { kind: "transmit"; row: OutboxRow }
  | { kind: "retry_timer"; id: string; ms: number }
  | { kind: "ended"; row: OutboxRow }
  | { kind: "retrying"; id: string; reason: DeliveryReason; error: string }
  /** Write the completion notification (`recovering`: a crash may have written it already). */
  | { kind: "notify"; row: OutboxRow; recovering: boolean }
  | { kind: "abandon_waiters"; error: HermesError };

type Stage =
  /** A local delivery: its ingress row decides. */
  | "local"
  /** Remote, in its outbound lane. */
  | "waiting"
  /** Remote, claimed and handed to its transport. */
  | "sending"
  /** Remote, failed once; the single retry waits for its delay (keeping the slot). */
  | "retry_wait"
  /** Remote, out of its lane until the next start (a stop cut the attempt, or the target answered without an end). */
  | "stalled";

interface OpenDelivery {
  row: OutboxRow;
  stage: Stage;
}

export class OutboxMachine {
  private readonly open = new Map<string, OpenDelivery>();
  private readonly lanes: LaneScheduler;
  private seq = 0;
  private stopping = false;
  /** The profile being deleted during its `profile_deleted` step: its own Bot Chat gets no notifications. */
  private deleting: string | undefined;

  constructor(private readonly settings: OutboxSettings) {
    this.lanes = new LaneScheduler(settings.maxParallelTargets);
  }

  isOpen(id: string): boolean {
    return this.open.has(id);
  }

  /** Deliveries sent and not ended yet. */
  depth(): number {
    return this.open.size;
  }

  /** Open deliveries sent by `profile`. */
  openSentBy(profile: string): Set<string> {
    return new Set([...this.open.values()].filter((o) => o.row.from_profile === profile).map((o) => o.row.delivery_id));
  }

  handle(event: OutboxEvent, now: number): OutboxEffect[] {
    switch (event.kind) {
      case "send":
        return this.send(event.row, event.stored, now);
      case "local_refused":
        return this.localRefused(event.id, event.failure, now);
      case "target_reported":
        return this.targetReported(event.receipt, now);
      case "transport_answered":
        return this.transportAnswered(event.id, event.receipt, now);
      case "transport_failed":
        return this.transportFailed(event.id, event.failure, now);
      case "retry_due":
        return this.retryDue(event.id, now);
      case "notified":
        return [{ kind: "mark_notified", id: event.id, at: isoTime(now) }];
      case "sweep":
        return this.sweep(now);
      case "profile_deleted":
        return this.profileDeleted(event.profile, now);
      case "profile_renamed":
        return this.profileRenamed(event.from, event.to);
      case "recover":
        return this.recover(event.open, event.unnotified, now);
      case "stop":
        this.stopping = true;
        return [
          {
            kind: "abandon_waiters",
            error: new HermesError("runtime_offline", "the gateway is stopping; the delivery continues after the restart"),
          },
        ];
    }
  }

  /** A new row is stored (and acked once committed); a repeat of a known id with the same payload is acked again. */
  private send(row: OutboxRow, stored: OutboxRow | undefined, now: number): OutboxEffect[] {
    if (this.stopping) throw new HermesError("runtime_offline", "the gateway is stopping; send again when it is back");
    const known = this.open.get(row.delivery_id)?.row ?? stored;
    if (known !== undefined) {
      checkFingerprint(known, row);
      return [];
    }
    const effects: OutboxEffect[] = [{ kind: "insert_outbox", row }];
    if (row.route.kind === "local") {
      this.open.set(row.delivery_id, { row, stage: "local" });
      effects.push({ kind: "admit_local", row });
      return effects;
    }
    this.enqueue(row);
    return [...effects, ...this.pump(now)];
  }

  private enqueue(row: OutboxRow): void {
    this.open.set(row.delivery_id, { row, stage: "waiting" });
    this.lanes.enqueue({ lane: row.route.target, id: row.delivery_id, seq: ++this.seq });
  }

  /** Hands the lane heads a free slot allows to their transports; a row left claimed by a restart is simply sent again. */
  private pump(now: number): OutboxEffect[] {
    if (this.stopping) return [];
    const effects: OutboxEffect[] = [];
    for (const item of this.lanes.take(() => true)) effects.push(...this.attempt(this.open.get(item.id)!, now));
    return effects;
  }

  private attempt(open: OpenDelivery, now: number): OutboxEffect[] {
    const claimed = open.row.state === "queued" ? claim(open.row, now) : open.row;
    if (claimed.state !== "claimed") return this.finish(open, claimed, now);
    open.stage = "sending";
    const effects: OutboxEffect[] = [];
    if (claimed !== open.row) {
      open.row = { ...open.row, ...claimed };
      effects.push({ kind: "save_outbox", record: claimed });
    }
    effects.push({ kind: "transmit", row: open.row });
    return effects;
  }

  private targetReported(receipt: Receipt, now: number): OutboxEffect[] {
    const open = this.open.get(receipt.delivery_id);
    if (open === undefined) return [];
    const next = outboxFromTarget(open.row, receipt, now);
    if (next === open.row) return [];
    if (isTerminal(next.state)) return this.finish(open, next, now);
    open.row = { ...open.row, ...next };
    return [{ kind: "save_outbox", record: next }];
  }

  /** The local ingress refused the mail: it ends here, final (it never ran). */
  private localRefused(id: string, failure: TransportFailure, now: number): OutboxEffect[] {
    const open = this.open.get(id);
    if (open === undefined) return [];
    const claimed = open.row.state === "queued" ? claim(open.row, now) : open.row;
    return this.finish(open, claimed.state === "claimed" ? fail(claimed, { ...failure, final: true }, now) : claimed, now);
  }

  /** The target's end, as it reported it: final here, the retry rule is never applied twice. */
  private transportAnswered(id: string, receipt: Receipt, now: number): OutboxEffect[] {
    const open = this.open.get(id);
    if (open?.stage !== "sending") return [];
    const next = outboxFromTarget(open.row, receipt, now);
    if (isTerminal(next.state)) return this.finish(open, next, now);
    // An answer without an end: the row stays open and is sent again after the next start.
    this.lanes.finish(id);
    open.stage = "stalled";
    const changed = next !== open.row;
    open.row = { ...open.row, ...next };
    return [...(changed ? [{ kind: "save_outbox" as const, record: next }] : []), ...this.pump(now)];
  }

  /** The hop failed (peer unreachable, deadline, refused key…): the single-retry rule, on the sender. */
  private transportFailed(id: string, failure: TransportFailure, now: number): OutboxEffect[] {
    const open = this.open.get(id);
    if (open?.stage !== "sending") return [];
    if (this.stopping) {
      // The row stays as it is and is sent again after the restart (the target dedupes).
      this.lanes.finish(id);
      open.stage = "stalled";
      return [];
    }
    const next = fail(open.row, failure, now);
    if (next.state !== "queued") return this.finish(open, next, now);
    open.row = { ...open.row, ...next };
    const effects: OutboxEffect[] = [
      { kind: "save_outbox", record: next },
      { kind: "retrying", id, reason: failure.reason, error: failure.error },
    ];
    if (this.settings.retryDelayMs > 0) {
      open.stage = "retry_wait";
      return [...effects, { kind: "retry_timer", id, ms: this.settings.retryDelayMs }];
    }
    return [...effects, ...this.attempt(open, now)];
  }

  private retryDue(id: string, now: number): OutboxEffect[] {
    const open = this.open.get(id);
    if (open?.stage !== "retry_wait" || this.stopping) return [];
    return this.attempt(open, now);
  }

  /** The end: stored, answered to waiters, and the sender notified in its Bot Chat (unless it is being deleted). */
  private finish(open: OpenDelivery, record: DeliveryRecord, now: number): OutboxEffect[] {
    const id = open.row.delivery_id;
    this.open.delete(id);
    if (this.lanes.isRunning(id)) this.lanes.finish(id);
    else this.lanes.remove(id);
    const row: OutboxRow = { ...open.row, ...record };
    const effects: OutboxEffect[] = [
      { kind: "save_outbox", record },
      { kind: "ended", row },
      row.from_profile === this.deleting ? { kind: "mark_notified", id, at: isoTime(now) } : { kind: "notify", row, recovering: false },
    ];
    return open.stage === "local" ? effects : [...effects, ...this.pump(now)];
  }

  /** Remote mail still waiting in its lane past its TTL expires (queued_expired). */
  private sweep(now: number): OutboxEffect[] {
    const effects: OutboxEffect[] = [];
    for (const open of [...this.open.values()]) {
      if (open.stage !== "waiting") continue;
      const expired = expireIfDue(open.row, now);
      if (expired !== open.row) effects.push(...this.finish(open, expired, now));
    }
    return effects;
  }

  /** Every open delivery from or to the deleted profile ends (failed, unknown_target, naming the deletion). */
  private profileDeleted(profile: string, now: number): OutboxEffect[] {
    this.deleting = profile;
    try {
      const effects: OutboxEffect[] = [];
      for (const open of [...this.open.values()]) {
        const { row } = open;
        if (row.from_profile !== profile && row.target_profile !== profile) continue;
        const side = row.target_profile === profile ? "target" : "sender";
        effects.push(...this.finish(open, endByDeletion(row, { profile, side }, now), now));
      }
      return effects;
    } finally {
      this.deleting = undefined;
    }
  }

  /** The identity migration rekeyed the rows; the open ones held here follow. */
  private profileRenamed(from: string, to: string): OutboxEffect[] {
    for (const open of this.open.values()) {
      let row = open.row;
      if (row.from_profile === from) {
        row = { ...row, from_profile: to, from: `${to}@${row.from_gateway}`, sender_session_key: botChatKey(to) };
      }
      if (row.target_profile === from && row.route.kind === "local") {
        row = { ...row, target_profile: to, route: { ...row.route, profile: to } };
      }
      open.row = row;
    }
    return [];
  }

  /**
   * Start-up: every open row goes on (remote ones are sent again: the target dedupes by id; a local
   * one follows its ingress row, or is admitted again when that row is missing), and ended rows
   * whose notification a crash left unwritten are notified (the writer checks the transcript first).
   */
  private recover(
    open: readonly { row: OutboxRow; ingress: LocalIngressState }[],
    unnotified: readonly OutboxRow[],
    now: number,
  ): OutboxEffect[] {
    const effects: OutboxEffect[] = [];
    for (const { row, ingress } of open) {
      if (this.open.has(row.delivery_id)) continue;
      if (row.route.kind !== "local") {
        this.enqueue(row);
        continue;
      }
      this.open.set(row.delivery_id, { row, stage: "local" });
      if (ingress === undefined) effects.push({ kind: "admit_local", row });
      else if (ingress !== "open") effects.push(...this.targetReported(ingress, now));
    }
    for (const row of unnotified) effects.push({ kind: "notify", row, recovering: true });
    return [...effects, ...this.pump(now)];
  }
}
