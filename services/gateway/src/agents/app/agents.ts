import { createHash } from "node:crypto";
import { type Clock, HermesError, type Logger } from "@hermes/common";
import { Counter, Gauge, type Registry } from "prom-client";
import { FallbackChain, type FallbackLink } from "../adapters/fallback.js";
import { OpenAIProvider } from "../adapters/openai.js";
import type { AgentSpec } from "../core/agent-cache.js";
import type { ResolvedModel } from "../core/channel-overrides.js";
import { LocalProvider } from "../core/local-provider.js";
import type { Provider, ToolSpec } from "../core/provider.js";
import { type PoolChange, type TickResult, WarmAgentPool } from "../core/warm-agent-pool.js";
import { DEFAULT_OPENAI_ENTRY, type ProfileModelConfig, type ProviderEntry } from "./model-config.js";

/** A prepared agent: one per session, reused across turns while its spec stays the same. */
export interface PreparedAgent {
  session_id: string;
  spec: AgentSpec;
  signature: string;
  chain: FallbackChain;
  /** The full per-turn system prompt: the bot's own prompt, then the ephemeral channel prompt. */
  system_prompt: string;
  tools: readonly ToolSpec[];
  built_at: number;
}

/** The environment variable holding a provider's key: `api_key_env`, else OPENAI_API_KEY for openai, else NAME_API_KEY. */
export function providerKeyEnv(name: string, entry: ProviderEntry): string {
  return entry.api_key_env ?? (name === "openai" ? "OPENAI_API_KEY" : `${name.toUpperCase().replace(/-/g, "_")}_API_KEY`);
}

/** The configured entry of a named OpenAI-compatible provider, or missing_config naming the key to add. */
export function providerEntry(config: ProfileModelConfig, name: string): ProviderEntry {
  const entry = config.providers[name] ?? (name === "openai" ? DEFAULT_OPENAI_ENTRY : undefined);
  if (!entry) {
    throw new HermesError(
      "missing_config",
      `provider ${JSON.stringify(name)} is not configured: add providers.${name}.base_url to ${config.config_file} (or use provider: local)`,
      { data: { provider: name } },
    );
  }
  return entry;
}

/** `name` or `name:model` in fallback_providers. */
export function parseFallback(item: string): { provider: string; model?: string | undefined } {
  const i = item.indexOf(":");
  return i < 0 ? { provider: item } : { provider: item.slice(0, i), model: item.slice(i + 1) || undefined };
}

/** A provider instance for a configured name; `local` is the embedded deterministic one. */
function makeProvider(config: ProfileModelConfig, name: string): Provider {
  if (name === "local") return new LocalProvider(config.persona);
  const entry = providerEntry(config, name);
  const keyEnv = providerKeyEnv(name, entry);
  return new OpenAIProvider({
    name,
    base_url: entry.base_url,
    api_key: config.secret(keyEnv),
    api_key_env: keyEnv,
    ...(entry.timeout_seconds !== undefined ? { timeout_ms: entry.timeout_seconds * 1000 } : {}),
  });
}

/**
 * Where each link of the chain points, folded into the agent spec: repointing a provider or
 * changing its key rebuilds the agent (the key only as a short hash).
 */
export function endpointIdentity(config: ProfileModelConfig, names: readonly string[]): string {
  return names
    .map((item) => {
      const { provider } = parseFallback(item);
      if (provider === "local") return "local";
      const entry = config.providers[provider] ?? (provider === "openai" ? DEFAULT_OPENAI_ENTRY : undefined);
      if (!entry) return `${provider}=?`;
      const keyEnv = providerKeyEnv(provider, entry);
      const key = config.secret(keyEnv) ?? "";
      return `${provider}=${entry.base_url}#${createHash("sha256").update(key).digest("hex").slice(0, 8)}#${entry.timeout_seconds ?? ""}`;
    })
    .join("|");
}

/** Builds the provider chain of a turn: the resolved primary, then `fallback_providers` in order. */
export function buildChain(config: ProfileModelConfig, resolved: ResolvedModel): FallbackChain {
  const links: FallbackLink[] = [{ provider: makeProvider(config, resolved.provider), model: resolved.model }];
  for (const item of config.fallback_providers) {
    const { provider, model } = parseFallback(item);
    if (provider === resolved.provider && model === undefined) continue;
    links.push({ provider: makeProvider(config, provider), ...(model !== undefined ? { model } : {}) });
  }
  return new FallbackChain(links);
}

export interface AgentCacheOptions {
  maxWarm: number;
  idleMs: number;
  slotWaitMs: number;
}

interface Waiter {
  resolve(agent: PreparedAgent): void;
  reject(err: unknown): void;
  build(): PreparedAgent;
}

/**
 * The I/O shell of the warm-agent pool (agents/core/warm-agent-pool.ts): holds the agents, builds
 * them on a `build` decision, turns grants and timeouts into resolved or rejected waits, and calls
 * `tick` when the pool asks (idle reaping, slot-wait deadlines).
 */
export class AgentCache {
  private readonly pool: WarmAgentPool<PreparedAgent>;
  private readonly waiters = new Map<number, Waiter>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  /** Agents built since start (tests and metrics: "N turns built the agent exactly once"). */
  builds = 0;
  private readonly buildCounter: Counter;
  private readonly evictions: Counter<"why">;
  private readonly slotTimeouts: Counter;

  constructor(
    options: AgentCacheOptions,
    private readonly clock: Clock,
    private readonly logger: Logger,
    registry?: Registry,
  ) {
    this.pool = new WarmAgentPool<PreparedAgent>({
      max_warm: options.maxWarm,
      idle_ms: options.idleMs,
      slot_wait_ms: options.slotWaitMs,
    });
    const registers = registry ? [registry] : [];
    this.buildCounter = new Counter({ name: "hermes_agent_builds_total", help: "Agents built (cache misses)", registers });
    this.evictions = new Counter({
      name: "hermes_agent_evictions_total",
      help: "Cached agents dropped, by why (idle, lru, provider_fallback, …)",
      labelNames: ["why"] as const,
      registers,
    });
    this.slotTimeouts = new Counter({
      name: "hermes_agent_slot_wait_timeouts_total",
      help: "Turns that gave up waiting for a free warm-agent slot",
      registers,
    });
    const pool = this.pool;
    new Gauge({
      name: "hermes_warm_agents",
      help: "Warm agents by state, and turns waiting for a slot",
      labelNames: ["state"] as const,
      registers,
      collect() {
        const s = pool.stats();
        this.set({ state: "busy" }, s.busy);
        this.set({ state: "idle" }, s.idle);
        this.set({ state: "waiting" }, s.waiting);
      },
    });
  }

  stats() {
    return this.pool.stats();
  }

  /**
   * The agent for a session's turn: the cached one when its signature matches, else a new one
   * built with `build` (in a free slot, or in the least recently used idle agent's slot), else a
   * wait for a slot that ends in slot_wait_timeout. Call `release` when the turn ends.
   */
  acquire(key: string, signature: string, build: () => PreparedAgent, signal?: AbortSignal): Promise<PreparedAgent> {
    const decision = this.pool.checkout(key, signature, this.clock.now());
    switch (decision.kind) {
      case "hit":
        return Promise.resolve(decision.agent);
      case "build": {
        this.dropped(decision.evicted, "replaced");
        try {
          return Promise.resolve(this.install(key, build));
        } catch (err) {
          this.apply(this.pool.abandon(key, this.clock.now()));
          return Promise.reject(err);
        }
      }
      case "busy":
        return Promise.reject(new HermesError("internal", `session ${key} already has a turn using its agent`));
      case "wait":
        return new Promise<PreparedAgent>((resolve, reject) => {
          const ticket = decision.ticket;
          const onAbort = () => {
            if (this.pool.cancelWait(ticket)) {
              this.waiters.delete(ticket);
              reject(new HermesError("unknown", "turn cancelled while waiting for a free agent slot", { data: { cancelled: true } }));
            }
          };
          signal?.addEventListener("abort", onAbort, { once: true });
          this.waiters.set(ticket, {
            resolve: (a) => {
              signal?.removeEventListener("abort", onAbort);
              resolve(a);
            },
            reject: (e) => {
              signal?.removeEventListener("abort", onAbort);
              reject(e);
            },
            build,
          });
          this.arm();
        });
    }
  }

  /** Ends a session's turn; `evict` drops its agent (the post-turn fallback check found a real fallback). */
  release(key: string, evict: false | { why: string; detail?: string }): void {
    const change = this.pool.checkin(key, this.clock.now(), { evict: evict !== false });
    if (evict !== false) {
      this.evictions.inc({ why: evict.why });
      this.logger.info({ session_id: key, why: evict.why, detail: evict.detail }, "cached agent evicted after the turn");
    }
    this.apply(change);
  }

  /** Drops a session's agent now or when its turn ends (profile deleted or renamed). */
  evict(key: string): void {
    this.apply(this.pool.evict(key, this.clock.now()), "evicted");
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const [ticket, w] of this.waiters) {
      this.pool.cancelWait(ticket);
      w.reject(new HermesError("runtime_offline", "the gateway is stopping"));
    }
    this.waiters.clear();
  }

  private install(key: string, build: () => PreparedAgent): PreparedAgent {
    const agent = build();
    this.pool.install(key, agent);
    this.builds++;
    this.buildCounter.inc();
    return agent;
  }

  private dropped(agents: PreparedAgent[], why: string): void {
    if (agents.length > 0) this.evictions.inc({ why }, agents.length);
  }

  private apply(change: PoolChange<PreparedAgent> | TickResult<PreparedAgent>, why = "lru"): void {
    this.dropped(change.evicted, why);
    if ("timeouts" in change) {
      for (const t of change.timeouts) {
        const w = this.waiters.get(t.ticket);
        this.waiters.delete(t.ticket);
        this.slotTimeouts.inc();
        w?.reject(t.error);
      }
    }
    for (const grant of change.grants) {
      const w = this.waiters.get(grant.ticket);
      this.waiters.delete(grant.ticket);
      if (!w) {
        // The waiter is gone (cannot happen: cancelWait removes both); give the slot back.
        this.apply(
          grant.result.kind === "build" ? this.pool.abandon(grant.key, this.clock.now()) : this.pool.checkin(grant.key, this.clock.now()),
        );
        continue;
      }
      if (grant.result.kind === "hit") {
        w.resolve(grant.result.agent);
        continue;
      }
      this.dropped(grant.result.evicted, "lru");
      try {
        w.resolve(this.install(grant.key, w.build));
      } catch (err) {
        w.reject(err);
        this.apply(this.pool.abandon(grant.key, this.clock.now()));
      }
    }
    this.arm();
  }

  /** Schedules the next tick at the pool's next deadline (idle expiry or slot wait). */
  private arm(): void {
    const at = this.pool.nextWakeAt();
    if (at === undefined) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
      return;
    }
    if (this.timer && at >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        const result = this.pool.tick(this.clock.now());
        this.apply(result, "idle");
      },
      Math.max(0, at - this.clock.now()),
    );
    this.timer.unref();
  }
}
