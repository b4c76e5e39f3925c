import { HermesError, isoTime, LaneScheduler } from "@hermes/common/pure";
import { type DeliveryReason, isTerminal } from "@hermes/contract";
import { checkFingerprint } from "./envelope.js";
import {
  claim,
  type DeliveryRecord,
  endByDeletion,
  expireIfDue,
  fail,
  markAmbiguous,
  type Receipt,
  recoverAfterRestart,
  settle,
  toReceipt,
} from "./receipt.js";
import { decideRetry } from "./retry-policy.js";
import { botChatKey, type IngressRow, turnText } from "./rows.js";

/**
 * The target's side of every delivery run on this gateway (local mail, a peer's Deliver, the
 * relay), as one pure state machine: events in, effects out.
 *
 *   admit ──▶ queued in the target's lane ──(lane head, a free slot)──▶ open_session
 *   session_opened ──▶ claim (durable) ──▶ run_turn
 *   turn_ended ──▶ settled | failed | ambiguous | queued again for the single retry (same slot, same session)
 *
 * The machine decides; the shell (delivery/app/delivery-service.ts) applies the effects: the row
 * changes (`insert_ingress`, `save_ingress`, `touch_session`) go into one group commit, and every
 * other effect of the same step runs only after that commit, so a turn starts only once its claim
 * is durable and an answer goes out only once the end it reports is. Mail to one bot runs in
 * admission order, one turn at a time; up to `maxParallelTargets` bots run at once.
 *
 * The retry rule, idempotency (same id + same payload is the same delivery, another payload
 * `idempotency_conflict`) and the TTL of the first attempt are decided here. A claimed delivery
 * whose turn was cut off (a stop, a restart, a cancel) is `ambiguous` and never replayed.
 */

export interface IngressSettings {
  /** Bots whose mail runs at once (`delivery.max_parallel_targets`). */
  maxParallelTargets: number;
  /** Pause before the single retry (`delivery.retry_delay_seconds`). */
  retryDelayMs: number;
  /** How long a turn may run (`delivery.turn_timeout_seconds`), for the delivery_timeout text. */
  turnTimeoutMs: number;
}

/** A failed turn as the shell classified it (delivery/app/failure.ts). */
export interface TurnFailure {
  reason: DeliveryReason;
  error: string;
  /** The turn was cancelled before it ended: its outcome is unknown. */
  cancelled: boolean;
  /** The cancellation was the turn timeout. */
  timed_out: boolean;
  /** Tool calls the failed turn had already executed (messages sent). */
  effects: number;
}

export type TurnResult = { kind: "reply"; reply: string } | { kind: "failed"; failure: TurnFailure };

export type IngressEvent =
  /** New mail, or a repeat (`stored` is the row the store holds under its id, when the machine holds none). */
  | { kind: "admit"; row: IngressRow; stored: IngressRow | undefined }
  /** The Bot Chat's lane is held for the delivery (nothing else runs in that session until released). */
  | { kind: "session_opened"; id: string; session_id: string }
  /** The Bot Chat's lane could not be had (the gateway or the profile is stopping). */
  | { kind: "session_refused"; id: string }
  | { kind: "turn_ended"; id: string; result: TurnResult }
  | { kind: "retry_due"; id: string }
  /** Periodic: mail whose first attempt has not started within its TTL expires. */
  | { kind: "sweep" }
  /** A profile is being deleted: the mail to it, and the mail `sent_by_it` that runs here, ends. */
  | { kind: "profile_deleted"; profile: string; sent_by_it: ReadonlySet<string> }
  | { kind: "profile_renamed"; from: string; to: string }
  /** Start-up: the open rows of the store, oldest first. */
  | { kind: "recover"; rows: readonly IngressRow[] }
  /** Graceful stop: no new mail, nothing new starts, waiting callers are told. */
  | { kind: "stop" };

export type IngressEffect =
  | { kind: "insert_ingress"; row: IngressRow }
  | { kind: "save_ingress"; record: DeliveryRecord; claimed_at?: string | undefined }
  /** The session's activity after a settled turn, in the commit of the end. */
  | { kind: "touch_session"; session_id: string }
  | { kind: "open_session"; id: string; target_profile: string; session_key: string }
  | {
      kind: "run_turn";
      id: string;
      target_profile: string;
      session_id: string;
      text: string;
      user_meta: { delivery_id: string; from: string };
      /** Compact the transcript first (the retry after context_overflow). */
      compact: boolean;
      attempt: number;
    }
  | { kind: "release_session"; id: string }
  | { kind: "abort_turn"; id: string; error: HermesError }
  | { kind: "retry_timer"; id: string; ms: number }
  /** The delivery was claimed (a local sender's outbox follows it). */
  | { kind: "progress"; receipt: Receipt }
  /** The delivery ended here; `restart` when a restart found it mid-turn. */
  | { kind: "ended"; row: IngressRow; restart?: boolean }
  /** A repeat of a delivery that had already ended: its waiters get the stored receipt. */
  | { kind: "answer"; receipt: Receipt }
  | { kind: "retrying"; id: string; reason: DeliveryReason; error: string; compact: boolean }
  /** Nobody will get an answer from this process any more. */
  | { kind: "abandon_waiters"; error: HermesError };

type Stage =
  /** In its lane, not started. */
  | "waiting"
  /** Has a slot; its Bot Chat lane was asked for. */
  | "opening"
  /** Claimed; the turn runs. */
  | "running"
  /** Failed once; the single retry waits for its delay (keeping the slot). */
  | "retry_wait";

interface OpenDelivery {
  row: IngressRow;
  stage: Stage;
  session_id?: string;
}

export interface LaneStats {
  /** Deliveries holding a slot now, and the most seen at once. */
  running: number;
  maxRunning: number;
}

export class IngressMachine {
  private readonly open = new Map<string, OpenDelivery>();
  private readonly lanes: LaneScheduler;
  /** Ended deliveries whose turn is still winding down: their session is released when it has. */
  private readonly draining = new Set<string>();
  /** Targets whose Bot Chat refused the lane: not retried before the next sweep. */
  private readonly parked = new Set<string>();
  private seq = 0;
  private stopping = false;
  readonly stats: LaneStats = { running: 0, maxRunning: 0 };

  constructor(private readonly settings: IngressSettings) {
    this.lanes = new LaneScheduler(settings.maxParallelTargets);
  }

  /** True while the delivery is queued or running here. */
  isOpen(id: string): boolean {
    return this.open.has(id);
  }

  /** Deliveries queued or running. */
  depth(): number {
    return this.open.size;
  }

  handle(event: IngressEvent, now: number): IngressEffect[] {
    switch (event.kind) {
      case "admit":
        return this.admit(event.row, event.stored);
      case "session_opened":
        return this.sessionOpened(event.id, event.session_id, now);
      case "session_refused":
        return this.sessionRefused(event.id);
      case "turn_ended":
        return this.turnEnded(event.id, event.result, now);
      case "retry_due":
        return this.retryDue(event.id);
      case "sweep":
        return this.sweep(now);
      case "profile_deleted":
        return this.profileDeleted(event.profile, event.sent_by_it, now);
      case "profile_renamed":
        return this.profileRenamed(event.from, event.to);
      case "recover":
        return this.recover(event.rows, now);
      case "stop":
        this.stopping = true;
        return [
          {
            kind: "abandon_waiters",
            error: new HermesError("runtime_offline", "the target gateway is stopping; the delivery stays queued there"),
          },
        ];
    }
  }

  /** Same id + same payload answers with the stored result or waits for the open one; another payload is refused. */
  private admit(row: IngressRow, stored: IngressRow | undefined): IngressEffect[] {
    if (this.stopping) throw new HermesError("runtime_offline", "the target gateway is stopping; send again when it is back");
    const known = this.open.get(row.delivery_id)?.row ?? stored;
    if (known !== undefined) {
      checkFingerprint(known, row);
      // Open: the caller waits for its end like everyone else.
      return isTerminal(known.state) ? [{ kind: "answer", receipt: toReceipt(known) }] : [];
    }
    this.enqueue(row);
    return [{ kind: "insert_ingress", row }, ...this.pump()];
  }

  private enqueue(row: IngressRow): void {
    this.open.set(row.delivery_id, { row, stage: "waiting" });
    this.lanes.enqueue({ lane: row.target_profile, id: row.delivery_id, seq: ++this.seq });
  }

  /** Starts the lane heads a free slot allows, oldest first. */
  private pump(): IngressEffect[] {
    if (this.stopping) return [];
    const effects: IngressEffect[] = [];
    for (const item of this.lanes.take((lane) => !this.parked.has(lane))) {
      const open = this.open.get(item.id)!;
      open.stage = "opening";
      effects.push({ kind: "open_session", id: item.id, target_profile: open.row.target_profile, session_key: open.row.session_key });
    }
    this.stats.running = this.lanes.depth().running;
    this.stats.maxRunning = Math.max(this.stats.maxRunning, this.stats.running);
    return effects;
  }

  private sessionOpened(id: string, sessionId: string, now: number): IngressEffect[] {
    const open = this.open.get(id);
    if (open?.stage !== "opening") return [{ kind: "release_session", id }];
    if (this.stopping) {
      // Nothing new starts: the row stays queued for the next start.
      open.stage = "waiting";
      this.lanes.finish(id, true);
      return [{ kind: "release_session", id }];
    }
    open.session_id = sessionId;
    const claimed = claim(open.row, now);
    // Its TTL passed while it waited for the session: it never runs.
    if (claimed.state !== "claimed") return this.end(open, claimed);
    const claimedAt = isoTime(now);
    open.row = { ...open.row, ...claimed, claimed_at: claimedAt };
    open.stage = "running";
    return [
      { kind: "save_ingress", record: claimed, claimed_at: claimedAt },
      { kind: "progress", receipt: toReceipt(claimed) },
      {
        kind: "run_turn",
        id,
        target_profile: open.row.target_profile,
        session_id: sessionId,
        text: turnText(open.row),
        user_meta: { delivery_id: id, from: open.row.from },
        compact: open.row.compact,
        attempt: claimed.attempts,
      },
    ];
  }

  /** Not started: the row stays as it is (queued), and its target waits for the next sweep. */
  private sessionRefused(id: string): IngressEffect[] {
    const open = this.open.get(id);
    if (open?.stage !== "opening") return [];
    open.stage = "waiting";
    this.lanes.finish(id, true);
    this.parked.add(open.row.target_profile);
    return this.pump();
  }

  private turnEnded(id: string, result: TurnResult, now: number): IngressEffect[] {
    const open = this.open.get(id);
    if (open?.stage !== "running") {
      // Ended meanwhile (its sender or target was deleted): that end stands, the reply is dropped.
      if (!this.draining.delete(id)) return [];
      return [{ kind: "release_session", id }];
    }
    if (result.kind === "reply") return this.end(open, settle(open.row, result.reply, now), open.session_id);
    if (this.stopping) return this.end(open, markAmbiguous(open.row, "the gateway stopped while the turn was running", now));
    const failure = result.failure;
    let { reason, error } = failure;
    if (failure.cancelled && failure.timed_out) {
      reason = "delivery_timeout";
      error = `the turn did not finish within ${Math.round(this.settings.turnTimeoutMs / 1000)} s`;
    } else if (failure.cancelled) {
      return this.end(open, markAmbiguous(open.row, `the turn was cancelled (${failure.error})`, now));
    }
    // A turn that already sent messages would send them again if re-run: report, do not retry.
    const final = decideRetry({ reason, attempts: open.row.attempts }).retry && failure.effects > 0;
    if (final) {
      const n = failure.effects;
      error = `${error} (not retried: the failed turn had already sent ${n} message${n === 1 ? "" : "s"}, which a rerun would repeat)`;
    }
    const next = fail(open.row, { reason, error, final }, now);
    if (next.state !== "queued") return this.end(open, next);
    open.row = { ...open.row, ...next };
    const effects: IngressEffect[] = [
      { kind: "save_ingress", record: next },
      { kind: "release_session", id },
      { kind: "retrying", id, reason, error, compact: next.compact },
    ];
    if (this.settings.retryDelayMs > 0) {
      open.stage = "retry_wait";
      effects.push({ kind: "retry_timer", id, ms: this.settings.retryDelayMs });
    } else {
      effects.push(...this.reopen(open));
    }
    return effects;
  }

  /** The single retry runs in the slot its first attempt had, in the same session. */
  private retryDue(id: string): IngressEffect[] {
    const open = this.open.get(id);
    if (open?.stage !== "retry_wait" || this.stopping) return [];
    return this.reopen(open);
  }

  private reopen(open: OpenDelivery): IngressEffect[] {
    open.stage = "opening";
    return [{ kind: "open_session", id: open.row.delivery_id, target_profile: open.row.target_profile, session_key: open.row.session_key }];
  }

  /** Stores an end state (with the session's activity after a settled turn), frees the slot, starts the next. */
  private end(open: OpenDelivery, record: DeliveryRecord, touch?: string, restart = false): IngressEffect[] {
    const id = open.row.delivery_id;
    this.open.delete(id);
    if (this.lanes.isRunning(id)) this.lanes.finish(id);
    else this.lanes.remove(id);
    const row: IngressRow = { ...open.row, ...record };
    const effects: IngressEffect[] = [{ kind: "save_ingress", record }];
    if (touch !== undefined) effects.push({ kind: "touch_session", session_id: touch });
    effects.push({ kind: "ended", row, ...(restart ? { restart } : {}) });
    // An opening delivery's session is released when it is granted (sessionOpened finds it gone).
    if (open.stage === "running") effects.push({ kind: "release_session", id });
    return [...effects, ...this.pump()];
  }

  /** Mail whose first attempt has not started within its TTL expires (queued_expired). */
  private sweep(now: number): IngressEffect[] {
    this.parked.clear();
    const effects: IngressEffect[] = [];
    for (const open of [...this.open.values()]) {
      if (open.stage !== "waiting" && open.stage !== "opening") continue;
      const expired = expireIfDue(open.row, now);
      if (expired !== open.row) effects.push(...this.end(open, expired));
    }
    return [...effects, ...this.pump()];
  }

  /**
   * Every open delivery here that the deleted profile is a party of ends (`endByDeletion`), queued
   * or running; a running turn is stopped, and its session released once it has wound down.
   */
  private profileDeleted(profile: string, sentByIt: ReadonlySet<string>, now: number): IngressEffect[] {
    const effects: IngressEffect[] = [];
    for (const open of [...this.open.values()]) {
      const id = open.row.delivery_id;
      const side = open.row.target_profile === profile ? "target" : sentByIt.has(id) ? "sender" : undefined;
      if (side === undefined) continue;
      if (open.stage === "running") {
        this.draining.add(id);
        effects.push({ kind: "abort_turn", id, error: new HermesError("profile_deleted", `profile ${profile} was deleted`) });
        open.stage = "waiting"; // its session stays held until the turn has ended
      }
      effects.push(...this.end(open, endByDeletion(open.row, { profile, side }, now)));
    }
    return effects;
  }

  /** Mail for a renamed profile keeps its place, in the lane under the new name, and runs in its rekeyed Bot Chat. */
  private profileRenamed(from: string, to: string): IngressEffect[] {
    for (const open of this.open.values()) {
      if (open.row.target_profile === from) open.row = { ...open.row, target_profile: to, session_key: botChatKey(to) };
    }
    this.lanes.rename(from, to);
    return [];
  }

  /**
   * Start-up: a delivery claimed when the process died has an unknown outcome and becomes
   * ambiguous (never replayed); queued ones are queued again in their original order.
   */
  private recover(rows: readonly IngressRow[], now: number): IngressEffect[] {
    const effects: IngressEffect[] = [];
    for (const row of rows) {
      if (this.open.has(row.delivery_id)) continue;
      if (row.state === "claimed") {
        const open: OpenDelivery = { row, stage: "waiting" };
        effects.push(...this.end(open, recoverAfterRestart(row, now), undefined, true));
      } else if (row.state === "queued") {
        this.enqueue(row);
      }
    }
    return [...effects, ...this.pump()];
  }
}
