import { toHermesError } from "@hermes/common";
import type { DeliveryReason } from "@hermes/contract";
import { ProviderError } from "../../agents/core/provider.js";
import { deliveryReasonFor } from "../core/reasons.js";

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
 * Classifies whatever a delivery attempt threw (deliveryReasonFor: a provider error already carries
 * its classified reason, a platform error is mapped). A provider's raw body is appended when the
 * message alone would lose it, so a malformed answer stays diagnosable from the receipt.
 */
export function attemptFailure(err: unknown): AttemptFailure {
  const e = toHermesError(err);
  const reason = deliveryReasonFor(e.reason);
  let error = e.message;
  if (e instanceof ProviderError && e.raw && reason === "unknown") {
    const raw = e.raw.trim().slice(0, 300);
    if (raw.length > 0 && !error.includes(raw.slice(0, 40))) error = `${error}; the provider said: ${raw}`;
  }
  const cancelled = e.data["cancelled"] === true || (e instanceof ProviderError && e.cancelled);
  const effects = typeof e.data["tool_effects"] === "number" ? e.data["tool_effects"] : 0;
  return { reason, error, cancelled, effects };
}
