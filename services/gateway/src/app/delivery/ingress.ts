import { type Clock, HermesError, isoTime, type Logger } from "@hermes/common";
import {
  attributedMessage,
  checkIdempotency,
  type DeliveryEnvelope,
  parseEnvelope,
  payloadFingerprint,
} from "../../core/delivery/envelope.js";
import {
  claim,
  createRecord,
  type DeliveryRecord,
  endByDeletion,
  expireIfDue,
  fail,
  isTerminal,
  markAmbiguous,
  type Receipt,
  recoverAfterRestart,
  settle,
  toReceipt,
} from "../../core/delivery/receipt.js";
import { decideRetry } from "../../core/delivery/retry-policy.js";
import { botChatOrigin, routingKey } from "../../core/identity/routing-key.js";
import type { DeliveriesStore, IngressRow, IngressSource } from "../../store/deliveries-store.js";
import type { ChatService } from "../chat.js";
import type { DeliverySettings } from "../config.js";
import type { ProfileService } from "../profiles.js";
import type { SessionService } from "../sessions.js";
import type { DeliveryMetrics } from "./delivery-metrics.js";
import { attemptFailure } from "./failure.js";
import type { TargetLanes } from "./lanes.js";
import { OutcomeWaiters } from "./waiters.js";

export interface AcceptOptions {
  /** The profile on this gateway the mail is for (a name or a former name). */
  target_profile: string;
  /** The sender's display name, for the attribution prefix (the profile name when absent). */
  sender_name?: string | undefined;
  source: IngressSource;
  /** Called when the delivery is claimed (the local sender mirrors it). */
  onProgress?: ((receipt: Receipt) => void) | undefined;
  signal?: AbortSignal | undefined;
}

export interface IngressDeps {
  store: DeliveriesStore;
  profiles: ProfileService;
  sessions: SessionService;
  chat: ChatService;
  clock: Clock;
  logger: Logger;
  settings: DeliverySettings;
  metrics: DeliveryMetrics;
  lanes: TargetLanes;
}

type AttemptOutcome = "done" | "retry";

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/**
 * The target side of a delivery: `accept(envelope)` is the one entry point for local deliveries, the
 * gateway-to-gateway Deliver RPC and (later) the relay client. It stores the ingress row (same id +
 * same payload answers with the stored result or waits for the running one; another payload is
 * idempotency_conflict), queues the turn in the target's lane behind whatever runs in its Bot Chat,
 * and resolves with the receipt once the delivery has ended. The retry rule runs here, on the
 * target, so a sender never applies it twice.
 */
export class DeliveryIngress {
  private readonly waiters = new OutcomeWaiters();
  private stopping = false;
  private readonly stopController = new AbortController();
  /** The running turn of each claimed delivery, so a profile deletion can stop exactly that turn. */
  private readonly turns = new Map<string, AbortController>();

  constructor(private readonly deps: IngressDeps) {
    // Mail queued for a renamed profile keeps its place, in the lane under the new name.
    deps.profiles.events.on("renamed", (oldName, newName) => deps.lanes.rename(oldName, newName));
  }

  /** Admits a delivery and resolves with its receipt when it has ended (see the class comment). */
  accept(envelope: DeliveryEnvelope | unknown, options: AcceptOptions): Promise<Receipt> {
    try {
      const admitted = this.admit(envelope, options);
      admitted.schedule();
      return admitted.outcome;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * The synchronous half of accept: validates, stores the ingress row and registers the waiter; the
   * caller runs `schedule()` once its transaction has committed (a local sender stores its outbox
   * row and this ingress row in one commit). Deliveries admitted one after another keep their order.
   */
  admit(value: unknown, options: AcceptOptions): { outcome: Promise<Receipt>; schedule: () => void } {
    if (this.stopping) throw new HermesError("runtime_offline", "the target gateway is stopping; send again when it is back");
    const envelope = parseEnvelope(value);
    const profile = this.targetProfile(options.target_profile);
    const fingerprint = payloadFingerprint(envelope);
    const existing = this.deps.store.ingress(envelope.delivery_id);
    if (existing) {
      checkIdempotency({ delivery_id: existing.delivery_id, fingerprint: existing.fingerprint }, envelope);
      if (isTerminal(existing.state)) return { outcome: Promise.resolve(toReceipt(existing)), schedule: () => {} };
      const wait = this.waiters.wait(existing.delivery_id, options.onProgress, options.signal);
      return { outcome: wait, schedule: () => this.schedule(existing) };
    }
    this.deps.profiles.assertIdentitySettled(profile);
    // The Bot Chat is made sure of when the turn runs; the row only needs its key.
    const sessionKey = routingKey(botChatOrigin(profile));
    const now = this.deps.clock.now();
    const row: IngressRow = {
      ...createRecord(envelope, now),
      sender_name: options.sender_name?.trim() || envelope.from_profile,
      target_profile: profile,
      session_key: sessionKey,
      source: options.source,
      message: envelope.message,
      fingerprint,
      claimed_at: null,
    };
    this.deps.store.insertIngress(row);
    this.deps.logger.info({ delivery_id: row.delivery_id, from: row.from, target: profile, source: options.source }, "delivery admitted");
    const wait = this.waiters.wait(row.delivery_id, options.onProgress, options.signal);
    return { outcome: wait, schedule: () => this.schedule(row) };
  }

  /** The local profile for `name` (aliases too); an unknown one is unknown_target with the profiles listed. */
  private targetProfile(name: string): string {
    try {
      return this.deps.profiles.resolve(name);
    } catch (err) {
      if (err instanceof HermesError && (err.reason === "not_found" || err.reason === "invalid_name")) {
        const profiles = this.deps.profiles.names();
        throw new HermesError("unknown_target", `no bot called ${JSON.stringify(name)} here; this gateway has: ${profiles.join(", ")}`, {
          data: { target: name, teammates: profiles },
        });
      }
      throw err;
    }
  }

  /** The receipt of a delivery run here, if any. */
  receipt(deliveryId: string): Receipt | undefined {
    const row = this.deps.store.ingress(deliveryId);
    return row && toReceipt(row);
  }

  /** Waits for a delivery run here to end (resolves at once when it has). */
  wait(deliveryId: string, signal?: AbortSignal): Promise<Receipt> | undefined {
    const row = this.deps.store.ingress(deliveryId);
    if (!row) return undefined;
    if (isTerminal(row.state)) return Promise.resolve(toReceipt(row));
    return this.waiters.wait(deliveryId, undefined, signal);
  }

  private schedule(row: IngressRow): void {
    this.deps.lanes.add(row.target_profile, row.delivery_id, () => this.run(row.delivery_id));
  }

  /** The lane job: attempts until the delivery has ended (at most the first attempt and one retry). */
  private async run(id: string): Promise<void> {
    for (;;) {
      const row = this.deps.store.ingress(id);
      if (!row || isTerminal(row.state)) {
        if (row) this.waiters.ended(toReceipt(row));
        return;
      }
      let outcome: AttemptOutcome;
      try {
        outcome = await this.deps.lanes.inSlot(() => this.attempt(id));
      } catch (err) {
        // Not started (stopping, or the profile is being deleted): the row stays as it is.
        if (!this.stopping && !this.hasEnded(id)) this.deps.logger.warn({ err, delivery_id: id }, "delivery attempt could not start");
        return;
      }
      if (outcome === "done") return;
      if (this.deps.settings.retryDelayMs > 0) await sleep(this.deps.settings.retryDelayMs, this.stopController.signal);
      if (this.stopping) return;
    }
  }

  /** One attempt in the target's Bot Chat lane: claim (durable), run the turn, record the outcome. */
  private async attempt(id: string): Promise<AttemptOutcome> {
    const first = this.deps.store.ingress(id);
    if (!first || isTerminal(first.state)) return "done";
    const session = this.deps.sessions.store.byKey(first.session_key) ?? this.deps.sessions.botChat(first.target_profile);
    return this.deps.chat.exclusive(session.session_id, async () => {
      const row = this.deps.store.ingress(id);
      if (!row || isTerminal(row.state)) return "done";
      const log = this.deps.logger.child({ delivery_id: id, target: row.target_profile });
      const claimedAt = this.deps.clock.now();
      const claimed = claim(row, claimedAt);
      if (claimed.state !== "claimed") return this.end(row, claimed, log);
      // One commit: the claim, and the local sender's outbox mirroring it.
      this.transaction(() => {
        this.deps.store.saveIngress(claimed, isoTime(claimedAt));
        this.waiters.progress(toReceipt(claimed));
      });
      log.debug({ attempt: claimed.attempts }, "delivery claimed");
      if (claimed.compact) this.deps.chat.compact(row.target_profile, session.session_id);

      const timeout = AbortSignal.timeout(this.deps.settings.turnTimeoutMs);
      const turn = new AbortController();
      this.turns.set(id, turn);
      const signal = AbortSignal.any([timeout, this.stopController.signal, turn.signal]);
      const handle = row.source === "local" ? row.from.slice(0, row.from.lastIndexOf("@")) : row.from;
      try {
        const out = await this.deps.chat.runLocked(
          row.target_profile,
          session,
          attributedMessage({ name: row.sender_name, handle }, row.message),
          { signal, user_meta: { delivery_id: id, from: row.from }, commands: false, obligation: false, touch: false },
        );
        // Ended meanwhile (its sender or target was deleted): that end stands, the reply is dropped.
        if (this.hasEnded(id)) return "done";
        return this.end(row, settle(claimed, out.reply, this.deps.clock.now()), log, () => this.deps.sessions.touch(session.session_id));
      } catch (err) {
        if (this.hasEnded(id)) return "done";
        const failure = attemptFailure(err);
        const now = this.deps.clock.now();
        if (this.stopping || this.stopController.signal.aborted) {
          return this.end(row, markAmbiguous(claimed, "the gateway stopped while the turn was running", now), log);
        }
        if (failure.cancelled && timeout.aborted) {
          failure.reason = "delivery_timeout";
          failure.error = `the turn did not finish within ${Math.round(this.deps.settings.turnTimeoutMs / 1000)} s`;
        } else if (failure.cancelled) {
          return this.end(row, markAmbiguous(claimed, `the turn was cancelled (${failure.error})`, now), log);
        }
        // A turn that already sent messages would send them again if re-run: report, do not retry.
        const retry = decideRetry({ reason: failure.reason, attempts: claimed.attempts });
        const final = retry.retry && failure.effects > 0;
        const error = final
          ? `${failure.error} (not retried: the failed turn had already sent ${failure.effects} message${failure.effects === 1 ? "" : "s"}, which a rerun would repeat)`
          : failure.error;
        const next = fail(claimed, { reason: failure.reason, error, final }, now);
        if (next.state === "queued") {
          this.deps.store.saveIngress(next);
          this.deps.metrics.recordRetry("ingress", failure.reason);
          log.warn({ reason: failure.reason, error, compact: next.compact }, "delivery attempt failed; retrying once in the same session");
          return "retry";
        }
        return this.end(row, next, log);
      } finally {
        this.turns.delete(id);
      }
    });
  }

  /** True when the delivery has ended here, or its row is gone (purged with a deleted profile). */
  private hasEnded(id: string): boolean {
    const row = this.deps.store.ingress(id);
    return !row || isTerminal(row.state);
  }

  /**
   * Stores an end state and tells the waiters, all in one commit: a local sender's outbox row, and
   * `alsoInCommit` (the target session's activity after a turn). Counts it.
   */
  private end(row: IngressRow, record: DeliveryRecord, log: Logger, alsoInCommit?: () => void): "done" {
    this.transaction(() => {
      this.deps.store.saveIngress(record);
      alsoInCommit?.();
      this.waiters.ended(toReceipt({ ...row, ...record }));
    });
    this.deps.metrics.recordEnd("ingress", record, this.deps.clock.now());
    log.info({ state: record.state, reason: record.reason, attempts: record.attempts }, `delivery ${record.state}`);
    return "done";
  }

  private transaction(fn: () => void): void {
    this.deps.store.db.transaction(fn).immediate();
  }

  /**
   * Start-up: a delivery claimed when the process died has an unknown outcome and becomes
   * ambiguous (never replayed); queued ones are queued again in their original order.
   */
  recover(): { ambiguous: number; requeued: number } {
    const now = this.deps.clock.now();
    let ambiguous = 0;
    for (const row of this.deps.store.ingressIn("claimed")) {
      const next = recoverAfterRestart(row, now);
      this.deps.store.saveIngress(next);
      this.deps.metrics.recordEnd("ingress", next, now);
      this.deps.logger.warn({ delivery_id: row.delivery_id, target: row.target_profile }, "delivery was mid-turn at restart: ambiguous");
      ambiguous++;
    }
    const queued = this.deps.store.ingressIn("queued");
    for (const row of queued) this.schedule(row);
    return { ambiguous, requeued: queued.length };
  }

  /** Expires queued deliveries whose first attempt has not started within their TTL. */
  sweep(): number {
    const now = this.deps.clock.now();
    let expired = 0;
    for (const row of this.deps.store.unclaimedQueued().ingress) {
      const next = expireIfDue(row, now);
      if (next === row) continue;
      this.end(row, next, this.deps.logger.child({ delivery_id: row.delivery_id, target: row.target_profile }));
      expired++;
    }
    return expired;
  }

  /**
   * A profile is being deleted: every open delivery here that it is a party of ends (`endByDeletion`),
   * queued or running (that turn is stopped). Its waiters (a local sender's outbox, a peer's
   * Deliver call, the relay) get the receipt as for any other end.
   */
  endForDeletion(profile: string, sentByIt: ReadonlySet<string>): void {
    const now = this.deps.clock.now();
    for (const row of [...this.deps.store.ingressIn("claimed"), ...this.deps.store.ingressIn("queued")]) {
      const side = row.target_profile === profile ? "target" : sentByIt.has(row.delivery_id) ? "sender" : undefined;
      if (side === undefined) continue;
      this.end(
        row,
        endByDeletion(row, { profile, side }, now),
        this.deps.logger.child({ delivery_id: row.delivery_id, target: row.target_profile }),
      );
      this.turns.get(row.delivery_id)?.abort(new HermesError("profile_deleted", `profile ${profile} was deleted`));
    }
  }

  /** Graceful stop, first step: no new mail, queued work stays queued, waiting callers are told. */
  beginStop(): void {
    this.stopping = true;
    this.waiters.abandonAll(new HermesError("runtime_offline", "the target gateway is stopping; the delivery stays queued there"));
  }

  /** Last step: cancels what still runs (it becomes ambiguous) once the turns were given their grace. */
  abortRunning(): void {
    this.stopController.abort();
  }
}
