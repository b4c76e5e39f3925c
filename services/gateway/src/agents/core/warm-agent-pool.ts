import { HermesError } from "@hermes/common/pure";

/**
 * Warm-agent policy as a pure state object: the I/O shell supplies the time (`now`, in ms) and acts
 * on what each call returns (build an agent, dispose evicted ones, wake or fail waiters, call
 * `tick` at `nextWakeAt()`).
 *
 * Every cached agent, idle or in a turn, holds one of `max_warm` slots. When all are taken, the
 * least recently used idle agent gives up its slot; when every agent is in a turn, the caller waits
 * (first come, first served) until a slot frees, or fails with `slot_wait_timeout` after
 * `slot_wait_ms`. Agents idle for `idle_ms` are reaped.
 */
export interface WarmPoolOptions {
  /** Slots; upstream's default is 3 warm backends. */
  max_warm: number;
  /** Idle time after which an agent is dropped; Infinity keeps idle agents until their slot is needed. */
  idle_ms: number;
  /** How long a turn waits for a free slot before failing with slot_wait_timeout. */
  slot_wait_ms: number;
}

export const DEFAULT_WARM_POOL: WarmPoolOptions = { max_warm: 3, idle_ms: 600_000, slot_wait_ms: 30_000 };
export const MAX_WARM_LIMIT = 64;

export type Checkout<A> =
  /** Reuse this agent; it is now in a turn until `checkin`. */
  | { kind: "hit"; agent: A }
  /** A slot is reserved for this key: build the agent, then `install` it (or `abandon` on failure). */
  | { kind: "build"; evicted: A[] }
  /** Every slot is in a turn: wait for a grant with this ticket (from checkin/evict/abandon/tick) or its timeout. */
  | { kind: "wait"; ticket: number; deadline: number }
  /** This key already has a turn running; turns of one session are serialised by the caller. */
  | { kind: "busy" };

export interface Grant<A> {
  ticket: number;
  key: string;
  result: Extract<Checkout<A>, { kind: "hit" } | { kind: "build" }>;
}

export interface WaitTimeout {
  ticket: number;
  key: string;
  error: HermesError;
}

export interface PoolChange<A> {
  /** Waiters that got a slot, oldest first. */
  grants: Grant<A>[];
  /** Agents dropped from the cache; the shell disposes them. */
  evicted: A[];
}

export interface TickResult<A> extends PoolChange<A> {
  timeouts: WaitTimeout[];
}

interface Entry<A> {
  signature: string;
  agent: A | undefined;
  busy: boolean;
  last_used: number;
  /** Drop this entry when its turn ends (evicted while busy). */
  evict_on_checkin: boolean;
}

interface Waiter {
  ticket: number;
  key: string;
  signature: string;
  since: number;
  deadline: number;
}

export class WarmAgentPool<A> {
  readonly options: WarmPoolOptions;
  private readonly entries = new Map<string, Entry<A>>();
  private readonly waiters: Waiter[] = [];
  private nextTicket = 1;

  constructor(options: Partial<WarmPoolOptions> = {}) {
    const merged = { ...DEFAULT_WARM_POOL, ...options };
    if (!Number.isInteger(merged.max_warm) || merged.max_warm < 1 || merged.max_warm > MAX_WARM_LIMIT) {
      throw new HermesError("invalid_config", `max warm agents must be a whole number from 1 to ${MAX_WARM_LIMIT}, got ${merged.max_warm}`);
    }
    if (!(merged.idle_ms > 0)) throw new HermesError("invalid_config", `idle time must be positive (or Infinity), got ${merged.idle_ms}`);
    if (!(merged.slot_wait_ms >= 0) || !Number.isFinite(merged.slot_wait_ms)) {
      throw new HermesError("invalid_config", `slot wait must be a finite number of ms ≥ 0, got ${merged.slot_wait_ms}`);
    }
    this.options = merged;
  }

  /** Starts a turn for `key` with an agent of `signature`. */
  checkout(key: string, signature: string, now: number): Checkout<A> {
    const result = this.tryAcquire(key, signature, now);
    if (result !== undefined) return result;
    const waiter: Waiter = { ticket: this.nextTicket++, key, signature, since: now, deadline: now + this.options.slot_wait_ms };
    this.waiters.push(waiter);
    return { kind: "wait", ticket: waiter.ticket, deadline: waiter.deadline };
  }

  /** Stores the agent built after a `build` checkout (the turn is still running). */
  install(key: string, agent: A): void {
    const entry = this.entries.get(key);
    if (!entry?.busy || entry.agent !== undefined) {
      throw new HermesError("internal", `no agent build is pending for ${JSON.stringify(key)}`);
    }
    entry.agent = agent;
  }

  /** The build failed: release the reserved slot. */
  abandon(key: string, now: number): PoolChange<A> {
    const entry = this.entries.get(key);
    if (entry?.busy && entry.agent === undefined) this.entries.delete(key);
    return { grants: this.drain(now), evicted: [] };
  }

  /**
   * Ends the turn. `evict: true` (e.g. the post-turn fallback check found a real fallback) drops the
   * agent; otherwise it stays warm and becomes the most recently used.
   */
  checkin(key: string, now: number, options: { evict?: boolean } = {}): PoolChange<A> {
    const entry = this.entries.get(key);
    const evicted: A[] = [];
    if (entry?.busy) {
      if (options.evict === true || entry.evict_on_checkin || entry.agent === undefined) {
        this.entries.delete(key);
        if (entry.agent !== undefined) evicted.push(entry.agent);
      } else {
        entry.busy = false;
        entry.last_used = now;
      }
    }
    return { grants: this.drain(now), evicted };
  }

  /** Drops a key's agent now (idle) or when its turn ends (busy), e.g. after a config change. */
  evict(key: string, now: number): PoolChange<A> {
    const entry = this.entries.get(key);
    const evicted: A[] = [];
    if (entry) {
      if (entry.busy) entry.evict_on_checkin = true;
      else {
        this.entries.delete(key);
        if (entry.agent !== undefined) evicted.push(entry.agent);
      }
    }
    return { grants: this.drain(now), evicted };
  }

  /** Stops waiting (the caller gave up); true when the ticket was still waiting. */
  cancelWait(ticket: number): boolean {
    const index = this.waiters.findIndex((w) => w.ticket === ticket);
    if (index < 0) return false;
    this.waiters.splice(index, 1);
    return true;
  }

  /** Reaps idle agents and times out waiters whose deadline has passed. */
  tick(now: number): TickResult<A> {
    const evicted: A[] = [];
    for (const [key, entry] of this.entries) {
      if (!entry.busy && now - entry.last_used >= this.options.idle_ms) {
        this.entries.delete(key);
        if (entry.agent !== undefined) evicted.push(entry.agent);
      }
    }
    const timeouts: WaitTimeout[] = [];
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i]!;
      if (w.deadline > now) continue;
      this.waiters.splice(i, 1);
      const waited = Math.round((now - w.since) / 1000);
      timeouts.unshift({
        ticket: w.ticket,
        key: w.key,
        error: new HermesError(
          "slot_wait_timeout",
          `agent for ${JSON.stringify(w.key)} timed out after ${waited} s waiting for a free slot: all ${this.options.max_warm} warm agents are in a turn. Raise the warm agent limit (memory permitting) or try again later.`,
          { data: { key: w.key, max_warm: this.options.max_warm, waited_ms: now - w.since } },
        ),
      });
    }
    return { grants: this.drain(now), evicted, timeouts };
  }

  /** When the shell should call `tick` next (earliest idle expiry or wait deadline), if ever. */
  nextWakeAt(): number | undefined {
    let next = Number.POSITIVE_INFINITY;
    for (const entry of this.entries.values()) if (!entry.busy) next = Math.min(next, entry.last_used + this.options.idle_ms);
    for (const w of this.waiters) next = Math.min(next, w.deadline);
    return Number.isFinite(next) ? next : undefined;
  }

  stats(): { warm: number; busy: number; idle: number; waiting: number; max_warm: number } {
    let busy = 0;
    for (const entry of this.entries.values()) if (entry.busy) busy++;
    return { warm: this.entries.size, busy, idle: this.entries.size - busy, waiting: this.waiters.length, max_warm: this.options.max_warm };
  }

  /** The keys holding slots, least recently used idle ones first, then busy ones (for status output). */
  keys(): string[] {
    return [...this.entries.entries()]
      .sort(([, a], [, b]) => Number(a.busy) - Number(b.busy) || a.last_used - b.last_used)
      .map(([key]) => key);
  }

  private tryAcquire(key: string, signature: string, now: number): Extract<Checkout<A>, { kind: "hit" | "build" | "busy" }> | undefined {
    const existing = this.entries.get(key);
    if (existing) {
      if (existing.busy) return { kind: "busy" };
      if (existing.signature === signature && existing.agent !== undefined) {
        existing.busy = true;
        existing.last_used = now;
        return { kind: "hit", agent: existing.agent };
      }
      // Built from different inputs: rebuild in the same slot.
      this.entries.delete(key);
      this.reserve(key, signature, now);
      return { kind: "build", evicted: existing.agent === undefined ? [] : [existing.agent] };
    }
    if (this.entries.size < this.options.max_warm) {
      this.reserve(key, signature, now);
      return { kind: "build", evicted: [] };
    }
    const victim = this.leastRecentlyUsedIdle();
    if (victim === undefined) return undefined;
    const [victimKey, victimEntry] = victim;
    this.entries.delete(victimKey);
    this.reserve(key, signature, now);
    return { kind: "build", evicted: victimEntry.agent === undefined ? [] : [victimEntry.agent] };
  }

  private reserve(key: string, signature: string, now: number): void {
    this.entries.set(key, { signature, agent: undefined, busy: true, last_used: now, evict_on_checkin: false });
  }

  private leastRecentlyUsedIdle(): [string, Entry<A>] | undefined {
    let best: [string, Entry<A>] | undefined;
    for (const pair of this.entries) {
      if (pair[1].busy) continue;
      if (best === undefined || pair[1].last_used < best[1].last_used) best = pair;
    }
    return best;
  }

  /** Hands free slots to waiters, oldest first; a waiter whose session is mid-turn keeps waiting. */
  private drain(now: number): Grant<A>[] {
    const grants: Grant<A>[] = [];
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i]!;
      const result = this.tryAcquire(w.key, w.signature, now);
      if (result === undefined) break;
      if (result.kind === "busy") {
        i++;
        continue;
      }
      this.waiters.splice(i, 1);
      grants.push({ ticket: w.ticket, key: w.key, result });
    }
    return grants;
  }
}
