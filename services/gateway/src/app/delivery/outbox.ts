import { type Clock, HermesError, type Logger, newId } from "@hermes/common";
import { assertDeliveryMessage, checkIdempotency, newEnvelope, payloadFingerprint, queuedAck } from "../../core/delivery/envelope.js";
import { createRecord } from "../../core/delivery/receipt.js";
import { resolveTarget } from "../../core/delivery/targets.js";
import { botChatOrigin, routingKey } from "../../core/identity/routing-key.js";
import type { RosterEntry } from "../../core/models/system-prompt.js";
import type { DeliveriesStore, OutboxRow } from "../../store/deliveries-store.js";
import type { MessageAgentHost } from "../chat.js";
import type { DeliverySettings } from "../config.js";
import { Events } from "../events.js";
import type { ProfileService } from "../profiles.js";
import type { DeliveryRoster } from "./roster.js";

export interface OutboxDeps {
  store: DeliveriesStore;
  profiles: ProfileService;
  roster: DeliveryRoster;
  clock: Clock;
  logger: Logger;
  gatewayId: string;
  settings: DeliverySettings;
}

export interface SendOptions {
  ttl_seconds?: number | undefined;
  delivery_id?: string | undefined;
}

/** The commit a queued delivery is part of: listeners write their rows in it and run the rest after it. */
export interface QueuedCommit {
  afterCommit(run: () => void): void;
}

export interface OutboxEventMap {
  /**
   * A new outbox row, emitted inside its commit: rows a listener writes (a local target's ingress
   * row) commit together with it, and what it passes to `afterCommit` runs once it has committed.
   */
  queued: [row: OutboxRow, commit: QueuedCommit];
}

/**
 * The sender's side of a delivery up to the commit: `send` (message_agent, SendMessage) validates the
 * target and the message, commits the outbox row and acks `{status: "queued", delivery_id}`. What
 * happens next (transports, the local ingress, the sender's notification) is the delivery service's,
 * which subscribes to `queued`. Built before the turn engine, which offers message_agent through it;
 * the delivery service is built after the engine, whose turns it runs.
 */
export class Outbox implements MessageAgentHost {
  readonly events = new Events<OutboxEventMap>();
  private stopping = false;

  constructor(private readonly deps: OutboxDeps) {}

  /**
   * message_agent: validates the target (typed unknown_target listing the valid teammates) and the
   * message (≤ 16,000 characters, verbatim), commits the outbox row and only then acks
   * `{status: "queued", delivery_id}`; delivery continues in the background.
   */
  send(fromProfile: string, target: string, message: string, options: SendOptions = {}): { status: "queued"; delivery_id: string } {
    if (this.stopping) throw new HermesError("runtime_offline", "the gateway is stopping; send again when it is back");
    const { store, profiles, clock, gatewayId, settings } = this.deps;
    const from = profiles.resolve(fromProfile);
    profiles.assertIdentitySettled(from);
    assertDeliveryMessage(message);
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
    const fingerprint = payloadFingerprint(envelope);
    const existing = store.outbox(envelope.delivery_id);
    if (existing) {
      checkIdempotency({ delivery_id: existing.delivery_id, fingerprint: existing.fingerprint }, envelope);
      return queuedAck(envelope);
    }
    const row: OutboxRow = {
      ...createRecord(envelope, now),
      from_profile: from,
      from_gateway: gatewayId,
      // The sender's Bot Chat exists since the profile was created; only its key is needed here.
      sender_session_key: routingKey(botChatOrigin(from)),
      route,
      target_profile: route.kind === "local" ? route.profile : null,
      message,
      fingerprint,
      notified_at: null,
    };
    // One commit for the outbox row and, for a local target, its ingress row; then the lanes.
    const after: (() => void)[] = [];
    store.db
      .transaction(() => {
        store.insertOutbox(row);
        this.events.emit("queued", row, { afterCommit: (run) => after.push(run) });
      })
      .immediate();
    this.deps.logger.info({ delivery_id: row.delivery_id, from, target: route.target, route: route.kind }, "delivery queued");
    for (const run of after) run();
    return queuedAck(envelope);
  }

  /** The teammate roster of a bot's canonical Bot Chat. */
  roster(profile: string): RosterEntry[] {
    return this.deps.roster.teammates(profile);
  }

  /** Graceful stop: nothing new is accepted (what was queued stays queued). */
  beginStop(): void {
    this.stopping = true;
  }
}
