import { type Clock, HermesError, type Logger, newId, toHermesError } from "@hermes/common";
import { isReceiptState, isTerminal, RECEIPT_STATES } from "@hermes/contract";
import { parseEnvelope } from "@hermes/contract/envelope";
import type { Registry } from "prom-client";
import type { MessageAgentHost } from "../../agents/app/chat.js";
import type { RosterEntry } from "../../agents/core/system-prompt.js";
import type { DeliverySettings } from "../../home/app/config.js";
import { Events } from "../../home/app/events.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { SessionService } from "../../identity/app/sessions.js";
import { newEnvelope, queuedAck } from "../core/envelope.js";
import { type IngressEffect, type IngressEvent, IngressMachine, type LaneStats } from "../core/ingress-machine.js";
import { type LocalIngressState, type OutboxEffect, type OutboxEvent, OutboxMachine } from "../core/outbox-machine.js";
import { type DeliveryRecord, type Receipt, toReceipt } from "../core/receipt.js";
import { envelopeOf, type IngressSource, newIngressRow, newOutboxRow, type OutboxRow } from "../core/rows.js";
import { resolveTarget } from "../core/targets.js";
import type { DeliveriesStore, ListedDelivery } from "../store/deliveries-store.js";
import { DeliveryCommit, type DeliveryWrite, isDeliveryWrite } from "./delivery-commit.js";
import { DeliveryMetrics } from "./delivery-metrics.js";
import { attemptFailure } from "./failure.js";
import type { DeliveryRoster } from "./roster.js";
import { OutcomeWaiters } from "./waiters.js";

export interface SendOptions {
  ttl_seconds?: number | undefined;
  delivery_id?: string | undefined;
}

export interface AcceptOptions {
  /** The profile on this gateway the mail is for (a name or a former name). */
  target_profile: string;
  /** The sender's display name, for the attribution prefix (the profile name when absent). */
  sender_name?: string | undefined;
  source: IngressSource;
  signal?: AbortSignal | undefined;
}

/** What the delivery worker does for the machines: Bot Chat lanes and turns, transports, notifications. */
export type DeliveryWork =
  | Extract<IngressEffect, { kind: "open_session" | "run_turn" | "release_session" | "abort_turn" }>
  | Extract<OutboxEffect, { kind: "transmit" | "notify" }>;

/** What the worker reports back: how a session lane, a turn, a transport or a notification went. */
export type WorkReport =
  | { side: "ingress"; event: Extract<IngressEvent, { kind: "session_opened" | "session_refused" | "turn_ended" }> }
  | { side: "outbox"; event: Extract<OutboxEvent, { kind: "transport_answered" | "transport_failed" | "notified" }> };

export interface DeliveryServiceEvents {
  /** Work for the delivery worker, emitted once the commit it depends on is durable (a lane request at once). */
  work: [work: DeliveryWork];
}

export interface DeliveryServiceDeps {
  store: DeliveriesStore;
  profiles: ProfileService;
  sessions: SessionService;
  roster: DeliveryRoster;
  /** Persists the live routing index (a settled turn touches its session's entry, in the same commit). */
  flushRouting(): void;
  clock: Clock;
  logger: Logger;
  gatewayId: string;
  settings: DeliverySettings;
  registry?: Registry | undefined;
}

type Side = "outbox" | "ingress";

/**
 * Bot-to-bot delivery on this gateway: the thin loop around the two delivery machines
 * (delivery/core/outbox-machine.ts for mail sent from here, delivery/core/ingress-machine.ts for
 * mail run here). Every call and every report is an event; the effects of a step are applied in
 * order: row changes go into the group commit (DeliveryCommit), and everything else waits for it
 * — acks, answers to waiting callers, and the work the delivery worker does (turns, transports,
 * notifications). A local delivery's ingress effects are handed to the outbox machine in the same
 * step, so both rows of one delivery change in one commit.
 *
 * Built before the turn engine (whose message_agent sends through it) and the relay link (which
 * hands it relayed mail); the worker, built after both, subscribes to its `work`.
 */
export class DeliveryService implements MessageAgentHost {
  readonly store: DeliveriesStore;
  readonly metrics: DeliveryMetrics;
  readonly commit: DeliveryCommit;
  readonly events = new Events<DeliveryServiceEvents>();
  private readonly outbox: OutboxMachine;
  private readonly ingress: IngressMachine;
  /** Callers of `wait` for mail sent from here, and callers of `accept` / `wait` for mail run here. */
  private readonly senderWaiters = new OutcomeWaiters();
  private readonly targetWaiters = new OutcomeWaiters();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private sweeper: NodeJS.Timeout | undefined;
  /** Steps decided while an earlier step's effects are being applied. */
  private readonly queued: { side: Side; effects: (OutboxEffect | IngressEffect)[] }[] = [];
  private applying = false;
  /** The id `send` has just minted, while its step runs: no row can hold it yet, so none is looked up. */
  private minted: string | undefined;

  constructor(private readonly deps: DeliveryServiceDeps) {
    const { settings } = deps;
    this.store = deps.store;
    this.outbox = new OutboxMachine({ maxParallelTargets: settings.maxParallelTargets, retryDelayMs: settings.retryDelayMs });
    this.ingress = new IngressMachine(settings);
    this.metrics = new DeliveryMetrics(deps.registry, () => ({ ingress: this.ingress.depth(), outbox: this.outbox.depth() }));
    this.commit = new DeliveryCommit({
      store: deps.store,
      touchSession: (id) => deps.sessions.touch(id),
      flushRouting: deps.flushRouting,
      logger: deps.logger,
    });
    deps.profiles.events.on("stopping", (name) => this.profileStopping(name));
    deps.profiles.events.on("renamed", (from, to) => {
      this.step("outbox", { kind: "profile_renamed", from, to });
      this.step("ingress", { kind: "profile_renamed", from, to });
    });
  }

  /** Turns of deliveries running at once here (and the most seen), for tests and status. */
  get ingressLanes(): LaneStats {
    return this.ingress.stats;
  }

  // ------------------------------------------------------------------------------------------
  // The loop

  private step(side: "outbox", event: OutboxEvent): void;
  private step(side: "ingress", event: IngressEvent): void;
  private step(side: Side, event: OutboxEvent | IngressEvent): void {
    // Decided at once (a refusal throws to the caller); applied in decision order.
    this.apply(side, this.handle(side, event));
  }

  /**
   * Applies a step's effects. A step decided while another one's effects are applied (the worker
   * reporting a lane it was granted at once) is applied after it, into the same batch, so the batch's
   * writes stay in the order they were decided.
   */
  private apply(side: Side, effects: (OutboxEffect | IngressEffect)[]): void {
    this.queued.push({ side, effects });
    if (this.applying) return;
    this.applying = true;
    const writes: DeliveryWrite[] = [];
    const after: (() => void)[] = [];
    try {
      for (let next = this.queued.shift(); next !== undefined; next = this.queued.shift())
        this.visit(next.side, next.effects, writes, after);
    } finally {
      this.applying = false;
      this.commit.add(writes, after);
    }
  }

  private handle(side: Side, event: OutboxEvent | IngressEvent): (OutboxEffect | IngressEffect)[] {
    const now = this.deps.clock.now();
    return side === "outbox" ? this.outbox.handle(event as OutboxEvent, now) : this.ingress.handle(event as IngressEvent, now);
  }

  /** Sorts a step's effects into writes and what runs after the commit; hands local ingress changes to the outbox machine. */
  private visit(side: Side, effects: (OutboxEffect | IngressEffect)[], writes: DeliveryWrite[], after: (() => void)[]): void {
    for (const effect of effects) {
      if (isDeliveryWrite(effect)) {
        writes.push(effect);
        continue;
      }
      switch (effect.kind) {
        case "admit_local":
          this.visit("ingress", this.admitLocal(effect.row), writes, after);
          break;
        case "progress":
        case "ended":
          if (side === "ingress") {
            const receipt = effect.kind === "progress" ? effect.receipt : toReceipt(effect.row);
            if (this.outbox.isOpen(receipt.delivery_id)) {
              this.visit("outbox", this.handle("outbox", { kind: "target_reported", receipt }), writes, after);
            }
          }
          if (effect.kind === "ended") {
            const restart = "restart" in effect && effect.restart === true;
            after.push(() => this.ended(side, effect.row, restart));
          }
          break;
        case "answer":
          after.push(() => this.targetWaiters.ended(effect.receipt));
          break;
        case "retrying":
          after.push(() => {
            this.metrics.recordRetry(side, effect.reason);
            this.deps.logger.warn(
              { delivery_id: effect.id, reason: effect.reason, error: effect.error },
              side === "ingress"
                ? "delivery attempt failed; retrying once in the same session"
                : "delivery to another gateway failed; retrying once",
            );
          });
          break;
        case "retry_timer":
          after.push(() => this.armRetry(side, effect.id, effect.ms));
          break;
        case "abandon_waiters":
          after.push(() => (side === "outbox" ? this.senderWaiters : this.targetWaiters).abandonAll(effect.error));
          break;
        case "open_session":
          // Asking for a Bot Chat's lane shows nothing to anyone, so it does not wait for the commit: a
          // lane granted at once lets the claim ride in the same commit as the admission.
          this.events.emit("work", effect);
          break;
        default:
          after.push(() => this.events.emit("work", effect));
      }
    }
  }

  private ended(side: Side, row: DeliveryRecord, restart: boolean): void {
    this.metrics.recordEnd(side, row, this.deps.clock.now());
    const fields = { delivery_id: row.delivery_id, target: row.target, state: row.state, reason: row.reason, attempts: row.attempts };
    if (restart) this.deps.logger.warn(fields, "delivery was mid-turn at restart: ambiguous");
    else this.deps.logger.info(fields, side === "outbox" ? `delivery ${row.state} (sender side)` : `delivery ${row.state}`);
    (side === "outbox" ? this.senderWaiters : this.targetWaiters).ended(toReceipt(row));
  }

  private armRetry(side: Side, id: string, ms: number): void {
    const key = `${side}:${id}`;
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        if (side === "outbox") this.step("outbox", { kind: "retry_due", id });
        else this.step("ingress", { kind: "retry_due", id });
      }, ms),
    );
  }

  /** The worker's report of how its work went. */
  report(report: WorkReport): void {
    try {
      if (report.side === "outbox") this.step("outbox", report.event);
      else this.step("ingress", report.event);
    } catch (err) {
      this.deps.logger.error({ err: toHermesError(err), event: report.event.kind }, "a delivery report could not be applied");
    }
  }

  // ------------------------------------------------------------------------------------------
  // Entry points

  /** Profiles were created, renamed or deleted (or the relay roster changed): rebuild on next use. */
  rosterChanged(): void {
    this.deps.roster.invalidate();
  }

  /** The teammate roster in a bot's canonical Bot Chat system prompt. */
  roster(profile: string): RosterEntry[] {
    return this.deps.roster.teammates(profile);
  }

  /** Refuses new mail while the last commit failed (a full disk): nothing could be acknowledged. */
  private assertCommitting(): void {
    const failure = this.commit.failure;
    if (failure) throw failure;
  }

  /**
   * message_agent and SendMessage: validates the target (typed unknown_target listing the valid
   * teammates), then the envelope with its message (newEnvelope: ≤ 16,000 characters, verbatim),
   * and acks `{status: "queued", delivery_id}` once the outbox row (and, for a local target, its
   * ingress row) is committed; delivery goes on in the background. A repeat of a known id with the same payload is acked again.
   */
  async send(
    fromProfile: string,
    target: string,
    message: string,
    options: SendOptions = {},
  ): Promise<{ status: "queued"; delivery_id: string }> {
    this.assertCommitting();
    const { profiles, clock, gatewayId, settings } = this.deps;
    const from = profiles.resolve(fromProfile);
    profiles.assertIdentitySettled(from);
    const route = resolveTarget(target, this.deps.roster.targets(), { self: from });
    const now = clock.now();
    const envelope = newEnvelope(
      {
        from_profile: from,
        from_gateway: gatewayId,
        target: route.target,
        message,
        ttl_seconds: options.ttl_seconds || settings.ttlSeconds,
        delivery_id: options.delivery_id || undefined,
      },
      { now, newId: () => newId("dlv") },
    );
    const id = envelope.delivery_id;
    const stored = options.delivery_id && !this.outbox.isOpen(id) ? this.store.outbox(id) : undefined;
    this.minted = options.delivery_id ? undefined : id;
    try {
      this.step("outbox", { kind: "send", row: newOutboxRow(envelope, route, now), stored });
    } finally {
      this.minted = undefined;
    }
    await this.commit.durable();
    return queuedAck(envelope);
  }

  /**
   * The target side's one entry point for mail from elsewhere (a peer's Deliver, the relay):
   * resolves with the receipt once the delivery has ended here. Same id + same payload answers
   * with the stored result or waits for the running attempt; another payload is idempotency_conflict.
   */
  accept(value: unknown, options: AcceptOptions): Promise<Receipt> {
    try {
      this.assertCommitting();
      const envelope = parseEnvelope(value);
      const profile = this.targetProfile(options.target_profile);
      const id = envelope.delivery_id;
      const stored = this.ingress.isOpen(id) ? undefined : this.store.ingress(id);
      if (!stored && !this.ingress.isOpen(id)) this.deps.profiles.assertIdentitySettled(profile);
      const row = newIngressRow(
        envelope,
        { target_profile: profile, sender_name: options.sender_name, source: options.source },
        this.deps.clock.now(),
      );
      this.step("ingress", { kind: "admit", row, stored });
      return this.targetWaiters.wait(id, options.signal);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A local delivery's ingress row, in the step (and so the commit) of its outbox row; a refusal ends the outbox row. */
  private admitLocal(row: OutboxRow): (OutboxEffect | IngressEffect)[] {
    const now = this.deps.clock.now();
    try {
      const profile = this.targetProfile(row.target_profile ?? "");
      const known = row.delivery_id !== this.minted && !this.ingress.isOpen(row.delivery_id);
      const stored = known ? this.store.ingress(row.delivery_id) : undefined;
      if (!stored) this.deps.profiles.assertIdentitySettled(profile);
      const ingressRow = newIngressRow(
        envelopeOf(row),
        { target_profile: profile, sender_name: this.deps.roster.displayName(row.from_profile), source: "local" },
        now,
      );
      return this.ingress.handle({ kind: "admit", row: ingressRow, stored }, now);
    } catch (err) {
      const { reason, error } = attemptFailure(err);
      return this.outbox.handle({ kind: "local_refused", id: row.delivery_id, failure: { reason, error } }, now);
    }
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

  // ------------------------------------------------------------------------------------------
  // Receipts

  /** The receipt: the sender's view when the delivery was sent from here, else the target's. */
  get(deliveryId: string): Receipt {
    const row = this.store.outbox(deliveryId) ?? this.store.ingress(deliveryId);
    if (row) return toReceipt(row);
    throw new HermesError("not_found", `no delivery ${deliveryId} on this gateway; list them with: hermes deliveries list`, {
      data: { delivery_id: deliveryId },
    });
  }

  list(filter: { profile?: string | undefined; state?: string | undefined; limit?: number | undefined }): ListedDelivery[] {
    const state = filter.state || undefined;
    if (state !== undefined && !isReceiptState(state)) {
      throw new HermesError("invalid_params", `unknown state ${JSON.stringify(state)}; states: ${RECEIPT_STATES.join(", ")}`);
    }
    const profile = filter.profile ? this.deps.profiles.resolve(filter.profile) : undefined;
    return this.store.list({ profile, state, limit: filter.limit });
  }

  /** Resolves when the delivery has ended (at once when it has): the sender's end when it was sent from here. */
  wait(deliveryId: string, signal?: AbortSignal): Promise<Receipt> {
    if (this.outbox.isOpen(deliveryId)) return this.senderWaiters.wait(deliveryId, signal);
    const outbox = this.store.outbox(deliveryId);
    if (outbox) return isTerminal(outbox.state) ? Promise.resolve(toReceipt(outbox)) : this.senderWaiters.wait(deliveryId, signal);
    if (this.ingress.isOpen(deliveryId)) return this.targetWaiters.wait(deliveryId, signal);
    const ingress = this.store.ingress(deliveryId);
    if (ingress) return isTerminal(ingress.state) ? Promise.resolve(toReceipt(ingress)) : this.targetWaiters.wait(deliveryId, signal);
    return Promise.reject(new HermesError("not_found", `no delivery ${deliveryId} on this gateway`));
  }

  // ------------------------------------------------------------------------------------------
  // Lifecycle

  /**
   * Start-up recovery: every open outbox row goes on (remote ones are sent again, local ones follow
   * their ingress row), ended rows a crash left unnotified are notified; then the ingress (a
   * mid-turn delivery becomes ambiguous, queued ones queue again in order). Then the TTL sweeper.
   */
  start(): void {
    const open = this.store.openOutbox().map((row) => ({ row, ingress: this.localIngressState(row) }));
    const ingress = [...this.store.ingressIn("claimed"), ...this.store.ingressIn("queued")];
    this.step("outbox", { kind: "recover", open, unnotified: this.store.unnotifiedOutbox() });
    this.step("ingress", { kind: "recover", rows: ingress });
    if (open.length + ingress.length > 0) {
      const ambiguous = ingress.filter((r) => r.state === "claimed").length;
      this.deps.logger.info(
        { ambiguous, requeued: ingress.length - ambiguous, outbox_redispatched: open.length },
        "deliveries recovered after restart",
      );
    }
    this.sweeper = setInterval(() => this.sweep(), this.deps.settings.sweepMs);
    this.sweeper.unref();
  }

  private localIngressState(row: OutboxRow): LocalIngressState {
    if (row.route.kind !== "local") return undefined;
    const ingress = this.store.ingress(row.delivery_id);
    if (!ingress) return undefined;
    return isTerminal(ingress.state) ? toReceipt(ingress) : "open";
  }

  /** Expires mail whose first attempt has not started within its TTL (queued_expired), on both sides. */
  sweep(): void {
    try {
      this.step("ingress", { kind: "sweep" });
      this.step("outbox", { kind: "sweep" });
    } catch (err) {
      this.deps.logger.warn({ err: toHermesError(err) }, "delivery TTL sweep failed");
    }
  }

  /**
   * A profile is being deleted: every open delivery it is a party of ends failed/`unknown_target`
   * with an error naming the deletion, queued or running, both directions (its turns are stopped;
   * senders are notified, its own Bot Chat is not). Committed at once: its rows are purged next.
   */
  private profileStopping(profile: string): void {
    const sentByIt = this.outbox.openSentBy(profile);
    this.step("outbox", { kind: "profile_deleted", profile });
    this.step("ingress", { kind: "profile_deleted", profile, sent_by_it: sentByIt });
    this.commit.flush();
    this.rosterChanged();
  }

  /** Graceful stop, first step (before the RPC servers close): nothing new is accepted; queued mail stays queued. */
  beginStop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.step("outbox", { kind: "stop" });
    this.step("ingress", { kind: "stop" });
    this.commit.flush();
  }

  /** Last step (after the worker stopped): what is still to commit is committed. */
  stop(): void {
    this.commit.flush();
  }
}
