import { type ErrorReason, toHermesError } from "@hermes/common";
import { ProviderError } from "../../agents/core/provider.js";
import { type DeliveryReason, isDeliveryReason } from "../core/reasons.js";

/** What a failed delivery attempt records: the delivery reason as a field and the text to show with it. */
export interface AttemptFailure {
  reason: DeliveryReason;
  error: string;
  /** The turn was cancelled (by us or the caller) before it ended: its outcome is unknown. */
  cancelled: boolean;
  /** Tool calls the failed turn had already executed (messages sent). */
  effects: number;
}

/**
 * Platform errors that are not provider failures, mapped onto the delivery reasons a calling bot can
 * branch on. Reasons a receipt carries as they are — the twelve delivery reasons, and the refusals
 * `unknown_target` / `idempotency_conflict` a later hop (relay, peer, target gateway) may end a
 * delivery with — need no entry. Anything else is `unknown`, with the original text kept.
 */
const PLATFORM_REASONS: Partial<Record<ErrorReason, DeliveryReason>> = {
  // No warm-agent slot freed up in time: the target is too busy to start the turn (never retried).
  slot_wait_timeout: "target_busy",
  // A config.yaml that does not validate cannot run a turn until someone fixes it.
  invalid_config: "missing_config",
  // The target's gateway (or a peer) was not there to run it.
  unavailable: "runtime_offline",
  timeout: "delivery_timeout",
  // A peer that refuses our key: access, not a transient failure.
  unauthenticated: "provider_auth_or_access",
};

/**
 * Classifies whatever a delivery attempt threw. Provider errors already carry their reason
 * (classified from status and the provider's words); their raw body is appended when the message
 * alone would lose it, so a malformed answer stays diagnosable from the receipt.
 */
export function attemptFailure(err: unknown): AttemptFailure {
  const e = toHermesError(err);
  const reason = isDeliveryReason(e.reason) ? e.reason : (PLATFORM_REASONS[e.reason] ?? "unknown");
  let error = e.message;
  if (e instanceof ProviderError && e.raw && reason === "unknown") {
    const raw = e.raw.trim().slice(0, 300);
    if (raw.length > 0 && !error.includes(raw.slice(0, 40))) error = `${error}; the provider said: ${raw}`;
  }
  const cancelled = e.data["cancelled"] === true || (e instanceof ProviderError && e.cancelled);
  const effects = typeof e.data["tool_effects"] === "number" ? e.data["tool_effects"] : 0;
  return { reason, error, cancelled, effects };
}
