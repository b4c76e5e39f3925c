import type { DeliveryReason } from "@hermes/contract";
import { type Provider, ProviderError, type TurnRequest, type TurnResult } from "../core/provider.js";

/** One link of `provider` + `fallback_providers`, tried in order. */
export interface FallbackLink {
  provider: Provider;
  /** The model name to ask this provider for; defaults to the request's model. */
  model?: string | undefined;
}

export interface FailedAttempt {
  provider: string;
  model: string;
  reason: DeliveryReason;
  message: string;
  http_status?: number | undefined;
}

export interface FallbackOutcome {
  result: TurnResult;
  served_by: { provider: string; model: string; index: number };
  /** The agent's provider-fallback flag: true when anyone but the primary served the turn. */
  fallback_active: boolean;
  /** The failures before the provider that served (empty when the primary did). */
  failures: FailedAttempt[];
}

/**
 * Failures that go straight to the caller instead of down the fallback list:
 *
 * - `context_overflow`: the transcript is too long. The delivery retry rule compacts it and retries
 *   in the same session; a fallback model with a different window would either fail too or
 *   silently answer from another model, hiding the real fix.
 * - a caller-cancelled turn (`cancelled`): nobody wants an answer any more.
 *
 * Everything else (auth, quota, rate limit, server error, timeout, missing config, unknown model,
 * malformed answers) falls through: another provider may well serve the turn, and the failures are
 * reported in `failures` so the primary's problem stays visible.
 */
export const REASONS_THE_CALLER_MUST_SEE: ReadonlySet<DeliveryReason> = new Set(["context_overflow"]);

function asProviderError(err: unknown, provider: string): ProviderError {
  if (err instanceof ProviderError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ProviderError("unknown", `${provider} failed unexpectedly: ${message}`, { provider, cause: err });
}

/**
 * Runs one turn against the primary, then each fallback in order. When every link fails, the
 * primary's error is thrown (its reason is what the operator must fix), with every failure listed
 * in `data.fallback_failures`.
 */
export async function completeWithFallback(chain: readonly FallbackLink[], request: TurnRequest): Promise<FallbackOutcome> {
  if (chain.length === 0) {
    throw new ProviderError(
      "missing_config",
      "no provider configured: set `provider:` (and `providers:`) in config.yaml, or use the local provider",
      {
        provider: "none",
      },
    );
  }
  const failures: FailedAttempt[] = [];
  let primaryError: ProviderError | undefined;
  for (const [index, link] of chain.entries()) {
    const model = link.model ?? request.model;
    try {
      const result = await link.provider.complete({ ...request, model });
      return { result, served_by: { provider: link.provider.name, model, index }, fallback_active: index > 0, failures };
    } catch (err) {
      const error = asProviderError(err, link.provider.name);
      if (error.cancelled || request.signal?.aborted) throw error;
      if (REASONS_THE_CALLER_MUST_SEE.has(error.reason)) throw error;
      primaryError ??= error;
      failures.push({
        provider: link.provider.name,
        model,
        reason: error.reason,
        message: error.message,
        ...(error.http_status !== undefined ? { http_status: error.http_status } : {}),
      });
    }
  }
  const error = primaryError!;
  error.data["fallback_failures"] = failures;
  throw error;
}

/** A configured chain as an object, for wiring: `new FallbackChain([primary, ...fallbacks]).complete(request)`. */
export class FallbackChain {
  constructor(readonly links: readonly FallbackLink[]) {}

  get primary(): string | undefined {
    return this.links[0]?.provider.name;
  }

  complete(request: TurnRequest): Promise<FallbackOutcome> {
    return completeWithFallback(this.links, request);
  }
}
