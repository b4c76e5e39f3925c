import { describe, expect, it } from "vitest";
import { describePlan, nemesisSettings, planNemesis, seededRandom } from "./nemesis.js";

const names = { gateways: ["gw-a", "gw-b", "gw-c"], etcd: ["etcd-0", "etcd-1", "etcd-2"] };

describe("nemesis plan", () => {
  it("is a pure function of the seed: the same seed replays the same faults, another seed gives others", () => {
    const a = planNemesis({ seed: 42, seconds: 60, ...names });
    expect(planNemesis({ seed: 42, seconds: 60, ...names })).toEqual(a);
    expect(planNemesis({ seed: 43, seconds: 60, ...names }).steps).not.toEqual(a.steps);
    expect(a.steps.length).toBeGreaterThan(3);
  });

  it("keeps every fault and its hold inside the run, one at a time, on existing targets", () => {
    for (let seed = 0; seed < 200; seed++) {
      const plan = planNemesis({ seed, seconds: 30, ...names });
      let previousEnd = 0;
      for (const s of plan.steps) {
        expect(s.atMs).toBeGreaterThanOrEqual(previousEnd);
        expect(s.atMs + s.holdMs).toBeLessThanOrEqual(30_000);
        expect(s.holdMs).toBeGreaterThanOrEqual(1_500);
        const pool = s.kind.endsWith("etcd-member") ? names.etcd : names.gateways;
        for (const t of s.targets) expect(pool).toContain(t);
        expect(s.targets).toHaveLength(s.kind === "cut-gateways" ? 2 : 1);
        expect(new Set(s.targets).size).toBe(s.targets.length);
        previousEnd = s.atMs + s.holdMs;
      }
    }
  });

  it("uses every kind of fault over many seeds, and no etcd faults without three members", () => {
    const kinds = new Set<string>();
    for (let seed = 0; seed < 50; seed++) for (const s of planNemesis({ seed, seconds: 30, ...names }).steps) kinds.add(s.kind);
    expect([...kinds].sort()).toEqual(
      ["cut-gateway-from-etcd", "cut-gateways", "kill-etcd-member", "kill-gateway", "pause-etcd-member", "pause-gateway"].sort(),
    );
    const noEtcd = planNemesis({ seed: 7, seconds: 120, gateways: names.gateways, etcd: ["etcd-0"] });
    expect(noEtcd.steps.some((s) => s.kind.endsWith("etcd-member"))).toBe(false);
  });

  it("prints the seed and how to replay it", () => {
    const plan = planNemesis({ seed: 9, seconds: 20, ...names });
    const text = describePlan(plan);
    expect(text.split("\n")[0]).toBe(
      `nemesis seed 9, 20 s, ${plan.steps.length} faults (replay: HERMES_NEMESIS_SEED=9 HERMES_NEMESIS_SECONDS=20)`,
    );
    expect(text).toMatch(/\+\d+\.\d s (kill|pause|cut)-/);
  });

  it("reads HERMES_NEMESIS_SEED and HERMES_NEMESIS_SECONDS, and refuses nonsense", () => {
    expect(nemesisSettings({ HERMES_NEMESIS_SEED: "123", HERMES_NEMESIS_SECONDS: "90" }, 25)).toEqual({
      seed: 123,
      seconds: 90,
      replayed: true,
    });
    const fresh = nemesisSettings({}, 25);
    expect(fresh.seconds).toBe(25);
    expect(fresh.replayed).toBe(false);
    expect(Number.isInteger(fresh.seed)).toBe(true);
    expect(() => nemesisSettings({ HERMES_NEMESIS_SEED: "-1" }, 25)).toThrow(/HERMES_NEMESIS_SEED/);
    expect(() => nemesisSettings({ HERMES_NEMESIS_SECONDS: "abc" }, 25)).toThrow(/HERMES_NEMESIS_SECONDS/);
    expect(() => planNemesis({ seed: 1.5, seconds: 10, ...names })).toThrow(/seed/);
  });

  it("draws uniformly in [0, 1)", () => {
    const r = seededRandom(1);
    const xs = Array.from({ length: 10_000 }, r);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(xs.reduce((a, b) => a + b, 0) / xs.length).toBeCloseTo(0.5, 1);
  });
});
