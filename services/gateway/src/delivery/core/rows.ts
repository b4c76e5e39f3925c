import type { DeliveryEnvelope } from "@hermes/contract/envelope";
import { botChatOrigin, routingKey } from "../../identity/core/routing-key.js";
import { attributedMessage, payloadFingerprint } from "./envelope.js";
import { createRecord, type DeliveryRecord } from "./receipt.js";
import type { Route } from "./targets.js";

/** The sender's side of a delivery (the outbox): the receipt plus where it goes and who gets the notification. */
export interface OutboxRow extends DeliveryRecord {
  from_profile: string;
  from_gateway: string;
  /** The sender's canonical Bot Chat, where the completion notification goes. */
  sender_session_key: string;
  route: Route;
  /** The local target profile (local routes only). */
  target_profile: string | null;
  message: string;
  fingerprint: string;
  notified_at: string | null;
}

export type IngressSource = "local" | "peer" | "relay";

/** The target's side of a delivery (the ingress). `from` is `<profile>@<gateway>` as the sender stated it. */
export interface IngressRow extends DeliveryRecord {
  sender_name: string;
  target_profile: string;
  session_key: string;
  source: IngressSource;
  message: string;
  fingerprint: string;
  claimed_at: string | null;
}

/** The key of a profile's canonical Bot Chat, where deliveries run and notifications land. */
export function botChatKey(profile: string): string {
  return routingKey(botChatOrigin(profile));
}

/** A new outbox row (queued) for an envelope this gateway's `from_profile` sends along `route`. */
export function newOutboxRow(envelope: DeliveryEnvelope, route: Route, now: number): OutboxRow {
  return {
    ...createRecord(envelope, now),
    from_profile: envelope.from_profile,
    from_gateway: envelope.from_gateway,
    // The sender's Bot Chat exists since the profile was created; only its key is needed here.
    sender_session_key: botChatKey(envelope.from_profile),
    route,
    target_profile: route.kind === "local" ? route.profile : null,
    message: envelope.message,
    fingerprint: payloadFingerprint(envelope),
    notified_at: null,
  };
}

/** A new ingress row (queued) for mail to the local `target_profile`, run in its Bot Chat. */
export function newIngressRow(
  envelope: DeliveryEnvelope,
  target: { target_profile: string; sender_name?: string | undefined; source: IngressSource },
  now: number,
): IngressRow {
  return {
    ...createRecord(envelope, now),
    sender_name: target.sender_name?.trim() || envelope.from_profile,
    target_profile: target.target_profile,
    session_key: botChatKey(target.target_profile),
    source: target.source,
    message: envelope.message,
    fingerprint: payloadFingerprint(envelope),
    claimed_at: null,
  };
}

/** The envelope an outbox row was sent with (what a transport carries, again on every attempt). */
export function envelopeOf(row: OutboxRow): DeliveryEnvelope {
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

/**
 * The text the target's turn receives: the attribution prefix from the sender's display name and
 * handle (`alice` for local mail, `alice@<gateway>` from another gateway), then the message verbatim.
 */
export function turnText(row: IngressRow): string {
  const handle = row.source === "local" ? row.from.slice(0, row.from.lastIndexOf("@")) : row.from;
  return attributedMessage({ name: row.sender_name, handle }, row.message);
}
