import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { type Checkout, WarmAgentPool } from "./warm-agent-pool.js";

type Agent = { id: string };
const agent = (id: string): Agent => ({ id });

/** Runs a full build: checkout must say build, then install. */
function build(pool: WarmAgentPool<Agent>, key: string, now: number, sig = "s1"): Checkout<Agent> {
  const c = pool.checkout(key, sig, now);
  expect(c.kind).toBe("build");
  pool.install(key, agent(key));
  return c;
}

describe("WarmAgentPool", () => {
  it("reuses a warm agent with the same signature", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 2 });
    build(pool, "a", 0);
    pool.checkin("a", 10);
    expect(pool.checkout("a", "s1", 20)).toEqual({ kind: "hit", agent: { id: "a" } });
    expect(pool.stats()).toEqual({ warm: 1, busy: 1, idle: 0, waiting: 0, max_warm: 2 });
  });

  it("rebuilds in the same slot when the signature changed", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 1 });
    build(pool, "a", 0);
    pool.checkin("a", 1);
    expect(pool.checkout("a", "s2", 2)).toEqual({ kind: "build", evicted: [{ id: "a" }] });
    expect(pool.stats().warm).toBe(1);
  });

  it("a session already in a turn is busy", () => {
    const pool = new WarmAgentPool<Agent>();
    build(pool, "a", 0);
    expect(pool.checkout("a", "s1", 1)).toEqual({ kind: "busy" });
  });

  it("evicts the least recently used idle agent when full", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 2 });
    build(pool, "a", 0);
    build(pool, "b", 1);
    pool.checkin("a", 5);
    pool.checkin("b", 3);
    expect(pool.keys()).toEqual(["b", "a"]);
    expect(pool.checkout("c", "s1", 6)).toEqual({ kind: "build", evicted: [{ id: "b" }] });
    pool.install("c", agent("c"));
    pool.checkin("c", 7);
    expect(pool.checkout("a", "s1", 8).kind).toBe("hit");
  });

  it("a hit refreshes recency", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 2 });
    build(pool, "a", 0);
    pool.checkin("a", 1);
    build(pool, "b", 2);
    pool.checkin("b", 3);
    pool.checkout("a", "s1", 4);
    pool.checkin("a", 5);
    expect(pool.checkout("c", "s1", 6)).toEqual({ kind: "build", evicted: [{ id: "b" }] });
  });

  it("waits when every slot is in a turn and grants the freed slot first come, first served", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 1, slot_wait_ms: 30_000 });
    build(pool, "a", 0);
    const w1 = pool.checkout("b", "s1", 100);
    const w2 = pool.checkout("c", "s1", 200);
    expect(w1).toEqual({ kind: "wait", ticket: 1, deadline: 30_100 });
    expect(w2).toMatchObject({ kind: "wait", ticket: 2 });
    expect(pool.stats().waiting).toBe(2);
    // a finishes and stays warm: its idle agent is evicted to seat the oldest waiter.
    const change = pool.checkin("a", 1000);
    expect(change.grants).toEqual([{ ticket: 1, key: "b", result: { kind: "build", evicted: [{ id: "a" }] } }]);
    expect(change.evicted).toEqual([]);
    pool.install("b", agent("b"));
    const next = pool.checkin("b", 2000, { evict: true });
    expect(next.evicted).toEqual([{ id: "b" }]);
    expect(next.grants).toEqual([{ ticket: 2, key: "c", result: { kind: "build", evicted: [] } }]);
    expect(pool.stats().waiting).toBe(0);
  });

  it("a waiter for a key that is already warm gets a hit", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 1 });
    build(pool, "a", 0);
    const w = pool.checkout("b", "s1", 1);
    expect(w.kind).toBe("wait");
    // While b waits, a's turn ends; b is seated (evicting a); b ends and stays warm.
    pool.checkin("a", 2);
    pool.install("b", agent("b"));
    pool.checkin("b", 3);
    expect(pool.checkout("b", "s1", 4)).toEqual({ kind: "hit", agent: { id: "b" } });
  });

  it("a waiter times out with slot_wait_timeout after the wait limit", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 1, slot_wait_ms: 30_000 });
    build(pool, "a", 0);
    const w = pool.checkout("b", "s1", 1_000);
    expect(pool.nextWakeAt()).toBe(31_000);
    expect(pool.tick(30_999).timeouts).toEqual([]);
    const { timeouts } = pool.tick(31_000);
    expect(timeouts).toHaveLength(1);
    expect(timeouts[0]!.ticket).toBe(w.kind === "wait" ? w.ticket : -1);
    const err = timeouts[0]!.error;
    expect(err).toBeInstanceOf(HermesError);
    expect(err.reason).toBe("slot_wait_timeout");
    expect(err.message).toContain("30 s");
    expect(err.message).toContain("all 1 warm agents are in a turn");
    expect(err.data).toEqual({ key: "b", max_warm: 1, waited_ms: 30_000 });
    expect(pool.stats().waiting).toBe(0);
    // The freed slot later goes to nobody in particular: no stale grant for the timed-out ticket.
    expect(pool.checkin("a", 40_000).grants).toEqual([]);
  });

  it("cancelWait removes a waiter", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 1 });
    build(pool, "a", 0);
    const w = pool.checkout("b", "s1", 1);
    const ticket = w.kind === "wait" ? w.ticket : -1;
    expect(pool.cancelWait(ticket)).toBe(true);
    expect(pool.cancelWait(ticket)).toBe(false);
    expect(pool.checkin("a", 2).grants).toEqual([]);
  });

  it("reaps agents idle for the idle time, never busy ones", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 3, idle_ms: 600_000 });
    build(pool, "a", 0);
    pool.checkin("a", 1_000);
    build(pool, "b", 2_000);
    expect(pool.nextWakeAt()).toBe(601_000);
    expect(pool.tick(600_999).evicted).toEqual([]);
    const { evicted } = pool.tick(601_000);
    expect(evicted).toEqual([{ id: "a" }]);
    expect(pool.stats()).toMatchObject({ warm: 1, busy: 1 });
    expect(pool.tick(10_000_000).evicted).toEqual([]);
    expect(pool.nextWakeAt()).toBeUndefined();
  });

  it("Infinity idle time keeps idle agents until their slot is needed", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 1, idle_ms: Number.POSITIVE_INFINITY });
    build(pool, "a", 0);
    pool.checkin("a", 1);
    expect(pool.tick(1e12).evicted).toEqual([]);
    expect(pool.nextWakeAt()).toBeUndefined();
  });

  it("a failed build releases its slot to a waiter", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 1 });
    expect(pool.checkout("a", "s1", 0).kind).toBe("build");
    pool.checkout("b", "s1", 1);
    const change = pool.abandon("a", 2);
    expect(change.grants).toEqual([{ ticket: 1, key: "b", result: { kind: "build", evicted: [] } }]);
  });

  it("evict: idle at once, busy when its turn ends", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 2 });
    build(pool, "a", 0);
    pool.checkin("a", 1);
    expect(pool.evict("a", 2).evicted).toEqual([{ id: "a" }]);
    build(pool, "b", 3);
    expect(pool.evict("b", 4).evicted).toEqual([]);
    expect(pool.checkin("b", 5).evicted).toEqual([{ id: "b" }]);
    expect(pool.stats().warm).toBe(0);
    expect(pool.evict("nobody", 6)).toEqual({ grants: [], evicted: [] });
  });

  it("never holds more agents than slots under a random workload", () => {
    const pool = new WarmAgentPool<Agent>({ max_warm: 3, idle_ms: 50, slot_wait_ms: 20 });
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const running = new Set<string>();
    for (let now = 0; now < 5_000; now++) {
      const key = `k${rnd(8)}`;
      const op = rnd(4);
      if (op === 0 && !running.has(key)) {
        const c = pool.checkout(key, `s${rnd(2)}`, now);
        if (c.kind === "build") pool.install(key, agent(key));
        if (c.kind === "build" || c.kind === "hit") running.add(key);
        if (c.kind === "wait") pool.cancelWait(c.ticket);
      } else if (op === 1 && running.has(key)) {
        running.delete(key);
        const change = pool.checkin(key, now, { evict: rnd(5) === 0 });
        expect(change.grants).toEqual([]);
      } else if (op === 2) {
        pool.tick(now);
      }
      const s = pool.stats();
      expect(s.warm).toBeLessThanOrEqual(3);
      expect(s.busy).toBe(running.size);
    }
  });

  it("refuses nonsense options", () => {
    expect(() => new WarmAgentPool({ max_warm: 0 })).toThrow(/1 to 64/);
    expect(() => new WarmAgentPool({ max_warm: 65 })).toThrow(HermesError);
    expect(() => new WarmAgentPool({ idle_ms: 0 })).toThrow(HermesError);
    expect(() => new WarmAgentPool({ slot_wait_ms: -1 })).toThrow(HermesError);
  });

  it("install without a pending build is an internal error, not corruption", () => {
    const pool = new WarmAgentPool<Agent>();
    expect(() => pool.install("x", agent("x"))).toThrow(HermesError);
  });
});
