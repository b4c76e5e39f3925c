import { createHash } from "node:crypto";
import { type ModelResolutionInput, type ResolvedModel, resolveModel } from "./channel-overrides.js";

/**
 * Everything a prepared agent was built from. Two turns whose specs have the same signature can
 * reuse one cached agent; any difference means a rebuild. The ephemeral channel prompt is part of
 * it (byte for byte), which gives one cached agent per channel, as upstream does.
 */
export interface AgentSpec {
  profile: string;
  model: string;
  provider: string;
  /** The endpoint identity of the provider (e.g. its base_url), so repointing a provider rebuilds. */
  provider_endpoint?: string | undefined;
  fallback_providers: readonly string[];
  /** The bot's own system prompt: persona, SOUL, teammate roster. */
  system_prompt: string;
  ephemeral_system_prompt?: string | undefined;
  /** Tool names offered (order does not matter). */
  tools: readonly string[];
}

/** A stable fingerprint of an AgentSpec (sha256 hex of a canonical encoding). */
export function agentSignature(spec: AgentSpec): string {
  const canonical = JSON.stringify([
    "agent/v1",
    spec.profile,
    spec.model,
    spec.provider,
    spec.provider_endpoint ?? null,
    [...spec.fallback_providers],
    spec.system_prompt,
    spec.ephemeral_system_prompt ?? null,
    [...new Set(spec.tools)].sort(),
  ]);
  return createHash("sha256").update(canonical, "utf8").digest("hex");
}

/**
 * A model name normalised for comparison under a provider: whitespace and case do not count, and a
 * leading `<provider>/` is dropped, so `openai/gpt-4o` on openai equals `gpt-4o` on openai.
 */
export function normalizeModelName(model: string, provider: string): string {
  const m = model.trim().toLowerCase();
  const prefix = `${provider.trim().toLowerCase()}/`;
  return m.startsWith(prefix) ? m.slice(prefix.length) : m;
}

/** What the cached agent reports after a turn. */
export interface AgentTurnFacts {
  /** The model the agent ran the turn with. */
  model: string;
  /** The provider that served the turn. */
  provider: string;
  /** Set only when the provider fallback list actually took over for this turn. */
  fallback_active: boolean;
}

export type FallbackVerdict =
  | { evict: false }
  | { evict: true; why: "provider_fallback" | "provider_mismatch" | "model_mismatch" | "no_baseline"; detail: string };

/**
 * Post-turn fallback check: should the cached agent be dropped after a successful turn?
 *
 * 1. The provider-fallback flag first. Only a real fallback sets it, and a name comparison cannot
 *    see a fallback that serves the configured model name from another endpoint.
 * 2. Otherwise compare with a baseline resolved in exactly the order the agent was built (the
 *    session `/model` override used for this turn, then the channel override, then the global
 *    config), normalised to the baseline's primary provider.
 *
 * Comparing with the global model alone (the upstream bug fixed by PR #133948) would evict the agent
 * of every chat with a channel override after every turn, silently rebuilding it and invalidating
 * the provider's prompt cache each time.
 */
export function postTurnFallbackCheck(agent: AgentTurnFacts, turn: ModelResolutionInput): FallbackVerdict {
  if (agent.fallback_active) {
    return { evict: true, why: "provider_fallback", detail: `the turn was served by fallback provider ${agent.provider}` };
  }
  let baseline: ResolvedModel;
  try {
    baseline = resolveModel(turn);
  } catch (err) {
    // The config changed under the agent (e.g. its model was removed): rebuild on the next turn.
    return { evict: true, why: "no_baseline", detail: err instanceof Error ? err.message : String(err) };
  }
  if (agent.provider.trim().toLowerCase() !== baseline.provider.trim().toLowerCase()) {
    return {
      evict: true,
      why: "provider_mismatch",
      detail: `agent ran on ${agent.provider}, but this chat resolves to ${baseline.provider} (from ${baseline.provider_source})`,
    };
  }
  if (normalizeModelName(agent.model, baseline.provider) !== normalizeModelName(baseline.model, baseline.provider)) {
    return {
      evict: true,
      why: "model_mismatch",
      detail: `agent ran ${agent.model}, but this chat resolves to ${baseline.model} (from ${baseline.model_source})`,
    };
  }
  return { evict: false };
}
