import { type ErrorReason, HermesError } from "@hermes/common/pure";

/**
 * A typed "no" from the pure core: what was refused (`code`, stable and specific to this package),
 * the error reason an adapter sends for it, and a message that says what to do next.
 */
export interface Refusal<Code extends string = string> {
  kind: "refuse";
  code: Code;
  reason: ErrorReason;
  message: string;
  data: Record<string, unknown>;
}

export function refuse<Code extends string>(
  code: Code,
  reason: ErrorReason,
  message: string,
  data: Record<string, unknown> = {},
): Refusal<Code> {
  return { kind: "refuse", code, reason, message, data };
}

export function refusalError(refused: Refusal): HermesError {
  return new HermesError(refused.reason, refused.message, { data: { ...refused.data, code: refused.code } });
}
