import { type Clock, HermesError, isoTime, type Logger, newId, toHermesError } from "@hermes/common";
import PQueue from "p-queue";
import type { Registry } from "prom-client";
import {
  assertDeliveryMessage,
  attributedMessage,
  checkIdempotency,
  type DeliveryEnvelope,
  newEnvelope,
  payloadFingerprint,
  queuedAck,
} from "../../core/delivery/envelope.js";
import { outboxFromTarget } from "../../core/delivery/outbox-outcome.js";
import {
  claim,
  completionFor,
  createRecord,
  type DeliveryRecord,
  endByDeletion,
  expireIfDue,
  fail,
  isTerminal,
  type Receipt,
  type ReceiptState,
  toReceipt,
} from "../../core/delivery/receipt.js";
import { type RemoteBot, type Roster, resolveTarget } from "../../core/delivery/targets.js";
import { botChatOrigin, routingKey } from "../../core/identity/routing-key.js";
import { type RosterEntry, relayTeammate } from "../../core/models/system-prompt.js";
import type { DeliveriesStore, ListedDelivery, OutboxRow } from "../../store/deliveries-store.js";
import type { ProfileDatabases } from "../../store/gateway-store.js";
import { TranscriptStore } from "../../store/sessions-store.js";
import type { ChatService, MessageAgentHost } from "../chat.js";
import type { DeliverySettings } from "../config.js";
import { peerDirectory } from "../peers/peer-directory.js";
import type { ProfileService } from "../profiles.js";
import type { SessionService } from "../sessions.js";
import { DeliveryMetrics } from "./delivery-metrics.js";
import { attemptFailure } from "./failure.js";
import { DeliveryIngress } from "./ingress.js";
import { TargetLanes } from "./lanes.js";
import { type DeliveryTransport, LocalTransport, NoRelayTransport, PeerTransport } from "./transports.js";
import { OutcomeWaiters } from "./waiters.js";

export interface DeliveryServiceDeps {
  store: DeliveriesStore;
  profileDbs: ProfileDatabases;
  profiles: ProfileService;
  sessions: SessionService;
  chat: ChatService;
  clock: Clock;
  logger: Logger;
  gatewayId: string;
  settings: DeliverySettings;
  registry?: Registry | undefined;
  /** This gateway's relay connection name, so `bob@<it>` means the local bob. */
  relayConnection?: string | undefined;
}

export interface SendOptions {
  ttl_seconds?: number | undefined;
  delivery_id?: string | undefined;
}

/** Bots on other gateways known through the relay (none until the relay client provides a roster). */
export interface RemoteRosterSource {
  bots(): readonly RemoteBot[];
}

const ROSTER_TTL_MS = 10_000;

interface RosterCache {
  at: number;
  roster: Roster;
  everyone: RosterEntry[];
  teammates: Map<string, RosterEntry[]>;
  /** Display names, for attribution. */
  names: Map<string, string>;
}

/**
 * Bot-to-bot delivery on this gateway: the sender's outbox (message_agent, SendMessage), the
 * transports by route kind, the target's ingress, completion notifications into the sender's Bot
 * Chat, TTL sweeping, restart recovery and the receipts the CLI shows.
 */
export class DeliveryService implements MessageAgentHost {
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
  private remoteRoster: RemoteRosterSource = { bots: () => [] };
  private rosterCache: RosterCache | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  /** Profiles being deleted right now: their own Bot Chat gets no completion notifications. */
  private readonly deleting = new Set<string>();
  private stopping = false;
  private readonly stopController = new AbortController();

  constructor(private readonly deps: DeliveryServiceDeps) {
    this.store = deps.store;
    this.ingressLanes = new TargetLanes(new PQueue({ concurrency: deps.settings.maxParallelTargets }));
    this.outboundLanes = new TargetLanes(new PQueue({ concurrency: deps.settings.maxParallelTargets }));
    this.metrics = new DeliveryMetrics(deps.registry, () => ({ ingress: this.ingressLanes.depth(), outbox: this.outboundLanes.depth() }));
    this.ingress = new DeliveryIngress({
      store: deps.store,
      profiles: deps.profiles,
      sessions: deps.sessions,
      chat: deps.chat,
      clock: deps.clock,
      logger: deps.logger,
      settings: deps.settings,
      metrics: this.metrics,
      lanes: this.ingressLanes,
    });
    this.local = new LocalTransport(this.ingress);
    const config = deps.chat.modelConfig;
    this.transports = {
      peer: new PeerTransport(peerDirectory(config), deps.settings.peerTimeoutMs),
      relay: new NoRelayTransport(),
    };
  }

  /** Plugs in the relay client (later issue): its transport and the roster of remote bots. */
  useRelay(transport: DeliveryTransport, roster: RemoteRosterSource): void {
    this.transports.relay = transport;
    this.remoteRoster = roster;
    this.rosterChanged();
  }

  // ------------------------------------------------------------------------------------------
  // Rosters

  /** Profiles were created, renamed or deleted (or the relay roster changed): rebuild on next use. */
  rosterChanged(): void {
    this.rosterCache = undefined;
  }

  /**
   * Who can be messaged: local profiles (with former names and personas), peers, relay bots. Cached;
   * profile lifecycle hooks invalidate it at once, and it is rebuilt every ROSTER_TTL_MS anyway to
   * pick up hand edits of titles, descriptions and bot_peers.
   */
  private rosters(): RosterCache {
    const now = this.deps.clock.now();
    if (this.rosterCache && now - this.rosterCache.at < ROSTER_TTL_MS) return this.rosterCache;
    const names = this.deps.profiles.names();
    const aliases = new Map<string, string[]>();
    const rows = this.store.db.prepare("SELECT alias, profile_name FROM profile_aliases").all() as {
      alias: string;
      profile_name: string;
    }[];
    for (const r of rows) aliases.set(r.profile_name, [...(aliases.get(r.profile_name) ?? []), r.alias]);
    const config = this.deps.chat.modelConfig;
    const personas = new Map(
      names.map((n) => {
        try {
          return [n, config.forProfile(n).persona] as const;
        } catch {
          // A profile whose config does not validate still receives mail (its turns will say why).
          return [n, { display_name: n, handle: n, title: "", description: "", soul: "" }] as const;
        }
      }),
    );
    const peers = Object.keys(config.gatewayConfig().bot_peers ?? {}).sort();
    const remote = this.remoteRoster.bots();
    const roster: Roster = {
      local: names.map((n) => ({ profile: n, aliases: aliases.get(n) ?? [], title: personas.get(n)?.title ?? "" })),
      remote,
      peers: peers.map((name) => ({ name })),
      ...(this.deps.relayConnection ? { local_connection: this.deps.relayConnection } : {}),
    };
    // Everyone's teammates but the bot itself, built once per rebuild and shared (the per-bot list
    // is this one without the bot, made on first use).
    const everyone: RosterEntry[] = [
      ...names.map((n) => ({ target: n, title: personas.get(n)!.title, description: personas.get(n)!.description })),
      ...remote.map(relayTeammate),
      ...peers.map((peer) => ({ target: `${peer}/<profile>`, where: `peer gateway ${peer}; ${peer} alone means its default bot` })),
    ];
    const displayNames = new Map(names.map((n) => [n, personas.get(n)!.display_name]));
    this.rosterCache = { at: now, roster, everyone, teammates: new Map(), names: displayNames };
    return this.rosterCache;
  }

  /** The teammate roster in a bot's canonical Bot Chat system prompt. */
  roster(profile: string): RosterEntry[] {
    const cache = this.rosters();
    let list = cache.teammates.get(profile);
    if (!list) {
      list = cache.everyone.filter((e) => e.target !== profile);
      cache.teammates.set(profile, list);
    }
    return list;
  }

  // ------------------------------------------------------------------------------------------
  // Sending (the outbox)

  /**
   * message_agent: validates the target (typed unknown_target listing the valid teammates) and the
   * message (≤ 16,000 characters, verbatim), commits the outbox row and only then acks
   * `{status: "queued", delivery_id}`; delivery continues in the background.
   */
  send(fromProfile: string, target: string, message: string, options: SendOptions = {}): { status: "queued"; delivery_id: string } {
    if (this.stopping) throw new HermesError("runtime_offline", "the gateway is stopping; send again when it is back");
    const from = this.deps.profiles.resolve(fromProfile);
    this.deps.profiles.assertIdentitySettled(from);
    assertDeliveryMessage(message);
    const route = resolveTarget(target, this.rosters().roster, { self: from });
    const now = this.deps.clock.now();
    const envelope = newEnvelope(
      {
        from_profile: from,
        from_gateway: this.deps.gatewayId,
        target: route.target,
        message,
        ttl_seconds: options.ttl_seconds || this.deps.settings.ttlSeconds,
        delivery_id: options.delivery_id || undefined,
      },
      { now, newId: () => newId("dlv") },
    );
    const fingerprint = payloadFingerprint(envelope);
    const existing = this.store.outbox(envelope.delivery_id);
    if (existing) {
      checkIdempotency({ delivery_id: existing.delivery_id, fingerprint: existing.fingerprint }, envelope);
      return queuedAck(envelope);
    }
    const row: OutboxRow = {
      ...createRecord(envelope, now),
      from_profile: from,
      from_gateway: this.deps.gatewayId,
      // The sender's Bot Chat exists since the profile was created; only its key is needed here.
      sender_session_key: routingKey(botChatOrigin(from)),
      route,
      target_profile: route.kind === "local" ? route.profile : null,
      message,
      fingerprint,
      notified_at: null,
    };
    // One commit for the outbox row and, for a local target, its ingress row; then the lanes.
    const start = this.store.db
      .transaction(() => {
        this.store.insertOutbox(row);
        return row.route.kind === "local" ? this.admitLocal(row) : () => this.dispatch(row);
      })
      .immediate();
    this.deps.logger.info({ delivery_id: row.delivery_id, from, target: route.target, route: route.kind }, "delivery queued");
    start();
    return queuedAck(envelope);
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
    return this.rosters().names.get(profile) ?? profile;
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

  /** A rename moved a profile: mail queued for it keeps its place, in the lane under the new name. */
  profileRenamed(oldName: string, newName: string): void {
    this.ingressLanes.rename(oldName, newName);
    this.rosterChanged();
  }

  /** Graceful stop, first step (before the RPC servers close): nothing new is accepted; queued mail stays queued. */
  beginStop(): void {
    this.stopping = true;
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
