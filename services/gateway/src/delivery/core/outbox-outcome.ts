import { isoTime } from "@hermes/common/pure";
import { isTerminal } from "@hermes/contract";
import type { DeliveryRecord, Receipt } from "./receipt.js";

/**
 * The sender's outbox record taking over what the target side reported (the local ingress, or a
 * peer gateway's Deliver answer). The target applies the retry rule itself, so its terminal state
 * is final here: the outbox never retries a delivery the target has ended.
 *
 * Unlike `adoptRemote` (which compares attempts), the outbox may have made its own transport
 * attempts (a peer that was unreachable once), so attempt counts from the two sides are merged with
 * max, and any terminal report from the target ends an open outbox record.
 */
export function outboxFromTarget(record: DeliveryRecord, remote: Receipt, now: number): DeliveryRecord {
  if (remote.delivery_id !== record.delivery_id) {
    throw new RangeError(`receipt for ${remote.delivery_id} cannot update delivery ${record.delivery_id}`);
  }
  // An ended outbox record is history: a late or repeated report changes nothing.
  if (isTerminal(record.state)) return record;
  const attempts = Math.max(record.attempts, remote.attempts);
  if (remote.state === "queued") {
    return attempts === record.attempts ? record : { ...record, attempts, updated_at: isoTime(now) };
  }
  if (remote.state === "claimed") {
    if (record.state === "claimed" && attempts === record.attempts) return record;
    return { ...record, state: "claimed", attempts, updated_at: isoTime(now) };
  }
  return {
    ...record,
    state: remote.state,
    reason: remote.state === "settled" ? null : remote.reason,
    error: remote.state === "settled" ? null : remote.error,
    reply: remote.state === "settled" ? remote.reply : null,
    attempts,
    settled_at: remote.settled_at ?? isoTime(now),
    updated_at: isoTime(now),
    compact: false,
  };
}
