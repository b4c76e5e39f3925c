import { HermesError } from "@hermes/common/pure";
import type { DeliveryReason } from "@hermes/contract";

/** A delivery turn runs at most twice: the first attempt and one retry. */
export const MAX_DELIVERY_ATTEMPTS = 2;

/**
 * Reasons a second attempt can actually fix. Transient ones re-run the same Bot Chat session
 * unchanged; context_overflow re-runs it after compacting the transcript, so the retry fits where
 * the first attempt did not. Auth, quota, configuration and model failures are left out on purpose:
 * a second attempt cannot fix them and only burns quota, so the sender hears about them at once.
 */
const RETRYABLE: Readonly<Partial<Record<DeliveryReason, { compact: boolean }>>> = {
  runtime_offline: { compact: false },
  delivery_timeout: { compact: false },
  provider_rate_limit: { compact: false },
  provider_server_error: { compact: false },
  context_overflow: { compact: true },
};

/**
 * A retry always resumes the same session: there is no "fresh session" option, by design, so a
 * retried turn keeps the Bot Chat history and context intact.
 */
export type RetryDecision = { retry: false } | { retry: true; compact: boolean };

export interface RetryQuestion {
  reason: DeliveryReason;
  /** Attempts already made, including the one that just failed (1 after the first failure). */
  attempts: number;
  /**
   * True when the outcome of the failed attempt is unknown (the process crashed or the turn was
   * cancelled mid-way). Such a turn may have had effects, so it is never replayed automatically.
   */
  ambiguous?: boolean;
}

export function isRetryableReason(reason: DeliveryReason): boolean {
  return RETRYABLE[reason] !== undefined;
}

/** The single-retry rule (docs/PROTOCOL.md "Errors") as a pure decision. */
export function decideRetry(question: RetryQuestion): RetryDecision {
  const { reason, attempts } = question;
  if (!Number.isInteger(attempts) || attempts < 1) {
    throw new HermesError("invalid_params", `attempts must be a whole number ≥ 1 (the attempts already made), got ${String(attempts)}`, {
      data: { attempts },
    });
  }
  if (question.ambiguous === true) return { retry: false };
  if (attempts >= MAX_DELIVERY_ATTEMPTS) return { retry: false };
  const rule = RETRYABLE[reason];
  return rule === undefined ? { retry: false } : { retry: true, compact: rule.compact };
}
