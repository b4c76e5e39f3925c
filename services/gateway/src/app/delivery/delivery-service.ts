import { type Clock, HermesError, isoTime, type Logger, toHermesError } from "@hermes/common";
import PQueue from "p-queue";
import type { Registry } from "prom-client";
import { attributedMessage, type DeliveryEnvelope } from "../../core/delivery/envelope.js";
import { outboxFromTarget } from "../../core/delivery/outbox-outcome.js";
import {
  claim,
  completionFor,
  type DeliveryRecord,
  endByDeletion,
  expireIfDue,
  fail,
  isTerminal,
  type Receipt,
  type ReceiptState,
  toReceipt,
} from "../../core/delivery/receipt.js";
import type { RosterEntry } from "../../core/models/system-prompt.js";
import type { DeliveriesStore, ListedDelivery, OutboxRow } from "../../store/deliveries-store.js";
import type { ProfileDatabases } from "../../store/gateway-store.js";
import { TranscriptStore } from "../../store/sessions-store.js";
import type { ChatService } from "../chat.js";
import type { DeliverySettings } from "../config.js";
import type { PeerDirectory } from "../peers/peer-directory.js";
import type { ProfileService } from "../profiles.js";
import type { SessionService } from "../sessions.js";
import { DeliveryMetrics } from "./delivery-metrics.js";
import { attemptFailure } from "./failure.js";
import type { DeliveryIngress } from "./ingress.js";
import { TargetLanes } from "./lanes.js";
import type { Outbox, SendOptions } from "./outbox.js";
import type { DeliveryRoster } from "./roster.js";
import { type DeliveryTransport, LocalTransport, NoRelayTransport, PeerTransport } from "./transports.js";
import { OutcomeWaiters } from "./waiters.js";

export interface DeliveryServiceDeps {
  store: DeliveriesStore;
  profileDbs: ProfileDatabases;
  profiles: ProfileService;
  sessions: SessionService;
  chat: ChatService;
  /** Where sends are committed; the service moves each row it queues. */
  outbox: Outbox;
  roster: DeliveryRoster;
  /** The target side, for mail to local bots (and the receipts of mail run here). */
  ingress: DeliveryIngress;
  lanes: DeliveryLanes;
  peers: PeerDirectory;
  /** `<handle>@<connection>` mail, when this gateway has a relay; without one such mail fails runtime_offline. */
  relay?: DeliveryTransport | undefined;
  clock: Clock;
  logger: Logger;
  settings: DeliverySettings;
}

/** The lanes of deliveries in flight (the ingress's turns here, the sends to other gateways) and their metrics. */
export interface DeliveryLanes {
  ingress: TargetLanes;
  outbound: TargetLanes;
  metrics: DeliveryMetrics;
}

/** Both lanes behind the same size of cap (`delivery.max_parallel_targets`), counted on `registry`. */
export function deliveryLanes(settings: DeliverySettings, registry: Registry | undefined): DeliveryLanes {
  const ingress = new TargetLanes(new PQueue({ concurrency: settings.maxParallelTargets }));
  const outbound = new TargetLanes(new PQueue({ concurrency: settings.maxParallelTargets }));
  const metrics = new DeliveryMetrics(registry, () => ({ ingress: ingress.depth(), outbox: outbound.depth() }));
  return { ingress, outbound, metrics };
}

/**
 * Bot-to-bot delivery on this gateway, after the outbox commit: the transports by route kind,
 * the local target's ingress, completion notifications into the sender's Bot Chat, TTL sweeping,
 * restart recovery and the receipts the CLI shows.
 */
export class DeliveryService {
  readonly store: DeliveriesStore;
  readonly ingress: DeliveryIngress;
  readonly metrics: DeliveryMetrics;
  /** Turns of deliveries run here, per target profile, behind the global cap. */
  readonly ingressLanes: TargetLanes;
  /** Sends to other gateways, per target, behind the same size of cap. */
  private readonly outboundLanes: TargetLanes;
  private readonly waiters = new OutcomeWaiters();
  private readonly notifiedPending: string[] = [];
  private readonly transports: Record<Exclude<OutboxRow["route"]["kind"], "local">, DeliveryTransport>;
  private readonly local: LocalTransport;
  private sweeper: NodeJS.Timeout | undefined;
  /** Profiles being deleted right now: their own Bot Chat gets no completion notifications. */
  private readonly deleting = new Set<string>();
  private stopping = false;
  private readonly stopController = new AbortController();

  constructor(private readonly deps: DeliveryServiceDeps) {
    this.store = deps.store;
    this.ingress = deps.ingress;
    this.ingressLanes = deps.lanes.ingress;
    this.outboundLanes = deps.lanes.outbound;
    this.metrics = deps.lanes.metrics;
    this.local = new LocalTransport(this.ingress);
    this.transports = {
      peer: new PeerTransport(deps.peers, deps.settings.peerTimeoutMs),
      relay: deps.relay ?? new NoRelayTransport(),
    };
    // Inside the outbox's commit: a local target's ingress row commits with it; the rest runs after.
    deps.outbox.events.on("queued", (row, commit) =>
      commit.afterCommit(row.route.kind === "local" ? this.admitLocal(row) : () => this.dispatch(row)),
    );
    deps.profiles.events.on("stopping", (name) => this.profileStopping(name));
  }

  /** Profiles were created, renamed or deleted (or the relay roster changed): rebuild on next use. */
  rosterChanged(): void {
    this.deps.roster.invalidate();
  }

  /** The teammate roster in a bot's canonical Bot Chat system prompt. */
  roster(profile: string): RosterEntry[] {
    return this.deps.roster.teammates(profile);
  }

  /** message_agent and SendMessage: see Outbox.send. */
  send(fromProfile: string, target: string, message: string, options: SendOptions = {}): { status: "queued"; delivery_id: string } {
    return this.deps.outbox.send(fromProfile, target, message, options);
  }

  private envelopeOf(row: OutboxRow): DeliveryEnvelope {
    return {
      delivery_id: row.delivery_id,
      from_profile: row.from_profile,
      from_gateway: row.from_gateway,
      target: row.target,
      message: row.message,
      created_at: row.created_at,
      ttl_seconds: row.ttl_seconds,
    };
  }

  /** A bot's display name for attribution (from the roster cache: a rename of the label shows within seconds). */
  private senderName(profile: string): string {
    return this.deps.roster.displayName(profile);
  }

  /**
   * Stores the ingress row of a local delivery (inside the caller's transaction) and returns what
   * to run after the commit: queueing it in the target's lane. The target's progress and end are
   * mirrored on the outbox row synchronously, in the ingress's own commits.
   */
  private admitLocal(row: OutboxRow): () => void {
    if (row.route.kind !== "local") throw new HermesError("internal", "not a local route");
    let admitted: ReturnType<DeliveryIngress["admit"]>;
    let mirroredEnd = false;
    try {
      admitted = this.ingress.admit(this.envelopeOf(row), {
        target_profile: row.route.profile,
        sender_name: this.senderName(row.from_profile),
        source: "local",
        onProgress: (r) => {
          mirroredEnd ||= isTerminal(r.state);
          this.fromTarget(row.delivery_id, r);
        },
      });
    } catch (err) {
      return () => this.localFailed(row.delivery_id, err);
    }
    return () => {
      admitted.outcome.then(
        // The end was normally mirrored already, in the ingress's commit; this covers an answer without progress.
        (r) => mirroredEnd || this.fromTarget(row.delivery_id, r),
        (err) => this.localFailed(row.delivery_id, err),
      );
      admitted.schedule();
    };
  }

  /** Hands an open outbox row to its transport: local through the ingress (which fixes the order), remote through its lane. */
  private dispatch(row: OutboxRow): void {
    if (row.route.kind === "local") {
      this.local
        .deliver(row.route, this.envelopeOf(row), {
          sender_name: this.senderName(row.from_profile),
          onProgress: (r) => this.fromTarget(row.delivery_id, r),
        })
        .then(
          (r) => this.fromTarget(row.delivery_id, r),
          (err) => this.localFailed(row.delivery_id, err),
        );
      return;
    }
    this.outboundLanes.add(row.route.target, row.delivery_id, () => this.sendRemote(row.delivery_id));
  }

  /** The outbound lane job of one remote delivery: attempts until it has ended (one transport retry at most). */
  private async sendRemote(id: string): Promise<void> {
    for (;;) {
      let again: boolean;
      try {
        again = await this.outboundLanes.inSlot(() => this.remoteAttempt(id));
      } catch {
        return; // stopping: the row stays open and is sent again after the restart
      }
      if (!again || this.stopping) return;
      if (this.deps.settings.retryDelayMs > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.deps.settings.retryDelayMs);
          this.stopController.signal.addEventListener(
            "abort",
            () => {
              clearTimeout(timer);
              resolve();
            },
            { once: true },
          );
        });
      }
      if (this.stopping) return;
    }
  }

  /** One transport attempt; true when the single retry is due. */
  private async remoteAttempt(id: string): Promise<boolean> {
    const row = this.store.outbox(id);
    if (!row || isTerminal(row.state)) return false;
    const now = this.deps.clock.now();
    // An open row left "claimed" by a restart is simply sent again: the target dedupes by id.
    const claimed = row.state === "queued" ? claim(row, now) : row;
    if (claimed.state !== "claimed") {
      this.finish(row, claimed);
      return false;
    }
    if (claimed !== row) this.store.saveOutbox(claimed);
    const transport = this.transports[row.route.kind as "peer" | "relay"];
    try {
      const receipt = await transport.deliver(row.route, this.envelopeOf(row), {
        sender_name: this.senderName(row.from_profile),
        signal: this.stopController.signal,
      });
      this.fromTarget(id, receipt);
      return false;
    } catch (err) {
      if (this.stopping) return false;
      const failure = attemptFailure(err);
      const current = this.store.outbox(id);
      if (current?.state !== "claimed") return false;
      const next = fail(current, { reason: failure.reason, error: failure.error }, this.deps.clock.now());
      if (next.state === "queued") {
        this.store.saveOutbox(next);
        this.metrics.recordRetry("outbox", failure.reason);
        this.deps.logger.warn(
          { delivery_id: id, reason: failure.reason, error: failure.error },
          "delivery to another gateway failed; retrying once",
        );
        return true;
      }
      // The row as it is now: a rename while the transport ran rekeyed the sender's Bot Chat.
      this.finish(current, next);
      return false;
    }
  }

  /** The target reported progress or the end: mirror it on the outbox row. */
  private fromTarget(id: string, receipt: Receipt): void {
    const row = this.store.outbox(id);
    if (!row) return;
    const next = outboxFromTarget(row, receipt, this.deps.clock.now());
    if (next === row) return;
    if (isTerminal(next.state)) this.finish(row, next);
    else this.store.saveOutbox(next);
  }

  /** The local ingress refused or dropped the mail (never because we are stopping: then the row waits for the restart). */
  private localFailed(id: string, err: unknown): void {
    if (this.stopping) return;
    const row = this.store.outbox(id);
    if (!row || isTerminal(row.state)) return;
    const failure = attemptFailure(err);
    const now = this.deps.clock.now();
    const claimed = row.state === "queued" ? claim(row, now) : row;
    this.finish(
      row,
      claimed.state === "claimed" ? fail(claimed, { reason: failure.reason, error: failure.error, final: true }, now) : claimed,
    );
  }

  /** An outbox row ended: store it, count it, wake waiters, notify the sender's Bot Chat. */
  private finish(row: OutboxRow, record: DeliveryRecord): void {
    this.store.saveOutbox(record);
    const now = this.deps.clock.now();
    this.metrics.recordEnd("outbox", record, now);
    const ended: OutboxRow = { ...row, ...record };
    this.deps.logger.info(
      { delivery_id: row.delivery_id, target: row.target, state: record.state, reason: record.reason, attempts: record.attempts },
      `delivery ${record.state} (sender side)`,
    );
    this.waiters.ended(toReceipt(ended));
    this.notify(ended);
  }

  /**
   * The completion notification in the sender's Bot Chat: the reply, or `Delivery to <x>
   * failed [reason: <code>]: <error>`. Written through the sender's session lane, so it lands after
   * the turn that sent the message; a crash before it is written is repaired at start.
   */
  private notify(row: OutboxRow, recovering = false): void {
    const text = completionFor(row);
    if (text === undefined) return;
    const session = this.deleting.has(row.from_profile) ? undefined : this.deps.sessions.store.byKey(row.sender_session_key);
    if (!session) {
      this.store.markNotified(row.delivery_id, isoTime(this.deps.clock.now()));
      return;
    }
    const modelText =
      row.state === "settled"
        ? attributedMessage({ name: row.target_profile ? this.senderName(row.target_profile) : row.target, handle: row.target }, text)
        : text;
    const write = async () => {
      const transcript = new TranscriptStore(this.deps.profileDbs.get(session.profile_name));
      // After a crash between the two writes the notification may already be there.
      const already =
        recovering &&
        transcript.list(session.session_id, 200).some((m) => m.role === "notification" && m.meta["delivery_id"] === row.delivery_id);
      if (!already) {
        transcript.append(session.session_id, [
          {
            role: "notification",
            content: text,
            meta: { delivery_id: row.delivery_id, target: row.target, state: row.state, reason: row.reason, model_text: modelText },
            created_at: isoTime(this.deps.clock.now()),
          },
        ]);
      }
      this.markNotified(row.delivery_id);
    };
    try {
      this.deps.chat.exclusive(session.session_id, write).catch((err) => this.notifyFailed(row, err));
    } catch (err) {
      this.notifyFailed(row, err);
    }
  }

  /**
   * Notified marks are written in batches (one commit per tick): a crash before the mark only means
   * the start-up repair looks for the notification, finds it in the transcript and writes nothing.
   */
  private markNotified(deliveryId: string): void {
    this.notifiedPending.push(deliveryId);
    if (this.notifiedPending.length > 1) return;
    setImmediate(() => this.flushNotified());
  }

  private flushNotified(): void {
    const ids = this.notifiedPending.splice(0);
    if (ids.length === 0) return;
    const at = isoTime(this.deps.clock.now());
    try {
      this.store.db.transaction(() => {
        for (const id of ids) this.store.markNotified(id, at);
      })();
    } catch (err) {
      this.deps.logger.warn({ err, count: ids.length }, "recording written notifications failed; the next start checks them");
    }
  }

  private notifyFailed(row: OutboxRow, err: unknown): void {
    if (this.stopping) return; // written at the next start
    this.deps.logger.warn({ err: toHermesError(err), delivery_id: row.delivery_id }, "writing the completion notification failed");
  }

  // ------------------------------------------------------------------------------------------
  // Receipts

  /** The receipt: the sender's view when the delivery was sent from here, else the target's. */
  get(deliveryId: string): Receipt {
    const outbox = this.store.outbox(deliveryId);
    if (outbox) return toReceipt(outbox);
    const ingress = this.ingress.receipt(deliveryId);
    if (ingress) return ingress;
    throw new HermesError("not_found", `no delivery ${deliveryId} on this gateway; list them with: hermes deliveries list`, {
      data: { delivery_id: deliveryId },
    });
  }

  list(filter: { profile?: string | undefined; state?: string | undefined; limit?: number | undefined }): ListedDelivery[] {
    const state = filter.state || undefined;
    const states = ["queued", "claimed", "settled", "failed", "cancelled", "expired", "ambiguous"];
    if (state !== undefined && !states.includes(state)) {
      throw new HermesError("invalid_params", `unknown state ${JSON.stringify(state)}; states: ${states.join(", ")}`);
    }
    const profile = filter.profile ? this.deps.profiles.resolve(filter.profile) : undefined;
    return this.store.list({ profile, state: state as ReceiptState | undefined, limit: filter.limit });
  }

  /** Resolves when the delivery has ended (at once when it has). */
  wait(deliveryId: string, signal?: AbortSignal): Promise<Receipt> {
    const outbox = this.store.outbox(deliveryId);
    if (outbox) return isTerminal(outbox.state) ? Promise.resolve(toReceipt(outbox)) : this.waiters.wait(deliveryId, undefined, signal);
    const viaIngress = this.ingress.wait(deliveryId, signal);
    if (viaIngress) return viaIngress;
    return Promise.reject(new HermesError("not_found", `no delivery ${deliveryId} on this gateway`));
  }

  // ------------------------------------------------------------------------------------------
  // Lifecycle

  /**
   * Start-up recovery: ingress first (mid-turn deliveries become ambiguous, queued ones queue again),
   * then every open outbox row is dispatched again (the target dedupes by id), then notifications a
   * crash left unwritten. Then the TTL sweeper.
   */
  start(): void {
    const ingress = this.ingress.recover();
    const open = this.store.openOutbox();
    for (const row of open) this.dispatch(row);
    for (const row of this.store.unnotifiedOutbox()) this.notify(row, true);
    if (ingress.ambiguous + ingress.requeued + open.length > 0) {
      this.deps.logger.info({ ...ingress, outbox_redispatched: open.length }, "deliveries recovered after restart");
    }
    this.sweeper = setInterval(() => this.sweep(), this.deps.settings.sweepMs);
    this.sweeper.unref();
  }

  /** Expires mail whose first attempt has not started within its TTL (queued_expired), on both sides. */
  sweep(): void {
    try {
      this.ingress.sweep();
      const now = this.deps.clock.now();
      for (const row of this.store.unclaimedQueued().outbox) {
        const next = expireIfDue(row, now);
        if (next !== row) this.finish(row, next);
      }
    } catch (err) {
      this.deps.logger.warn({ err }, "delivery TTL sweep failed");
    }
  }

  /**
   * A profile is being deleted: every open delivery it is a party of ends failed/`unknown_target`
   * with an error naming the deletion, queued or running, both directions. Mail to it ends on the
   * ingress, which answers every sender the normal way (a local sender's outbox mirrors it, a
   * peer's Deliver call and the relay get the receipt); mail it sent ends here (its turn at a
   * local target is stopped). Its own Bot Chat gets no notifications: it is about to go.
   */
  profileStopping(profile: string): void {
    const open = this.store.openOutbox().filter((r) => r.from_profile === profile || r.target_profile === profile);
    const sentByIt = new Set(open.filter((r) => r.from_profile === profile).map((r) => r.delivery_id));
    this.deleting.add(profile);
    try {
      this.ingress.endForDeletion(profile, sentByIt);
      const now = this.deps.clock.now();
      for (const row of open) {
        const current = this.store.outbox(row.delivery_id);
        if (!current || isTerminal(current.state)) continue;
        const side = current.target_profile === profile ? "target" : "sender";
        this.finish(current, endByDeletion(current, { profile, side }, now));
      }
    } finally {
      this.deleting.delete(profile);
    }
    this.rosterChanged();
  }

  /** Graceful stop, first step (before the RPC servers close): nothing new is accepted; queued mail stays queued. */
  beginStop(): void {
    this.stopping = true;
    this.deps.outbox.beginStop();
    if (this.sweeper) clearInterval(this.sweeper);
    this.ingress.beginStop();
    this.ingressLanes.close();
    this.outboundLanes.close();
    this.waiters.abandonAll(new HermesError("runtime_offline", "the gateway is stopping; the delivery continues after the restart"));
  }

  /** Last step (after running turns were given their grace and cancelled): wait for the lanes, close clients. */
  async stop(): Promise<void> {
    this.beginStop();
    this.ingress.abortRunning();
    this.stopController.abort();
    await Promise.all([this.ingressLanes.idle(), this.outboundLanes.idle()]);
    this.flushNotified();
    for (const t of Object.values(this.transports)) t.close?.();
  }
}
