import { type ErrorReason, HermesError } from "@hermes/common/pure";

/**
 * A typed "no" from the pure core. Core functions return refusals instead of throwing, so a batch can
 * carry one outcome per item and a store can persist state changes (quarantine, fence) that come with
 * a refusal. `refusalError` turns one into the error the adapters send.
 */
export interface Refusal {
  reason: ErrorReason;
  /** Says what happened and what to do next. */
  message: string;
  /** Machine-readable detail, e.g. `authority` (where to redirect), `latest_seq`, `limit`. */
  data: Record<string, unknown>;
}

export function refusal(reason: ErrorReason, message: string, data: Record<string, unknown> = {}): Refusal {
  return { reason, message, data };
}

export function refusalError(refused: Refusal): HermesError {
  return new HermesError(refused.reason, refused.message, { data: refused.data });
}
