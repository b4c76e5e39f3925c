import { HermesError } from "@hermes/common/pure";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LeaseClock, leasePolicy, safeDeadline } from "./lease.js";

describe("safeDeadline", () => {
  const cases: Array<{ sentAt: number; ttlMs: number; margin: number; want: number }> = [
    { sentAt: 0, ttlMs: 2000, margin: 0.2, want: 1600 },
    { sentAt: 1000, ttlMs: 10_000, margin: 0.2, want: 9000 },
    { sentAt: 500, ttlMs: 2000, margin: 0.5, want: 1500 },
    { sentAt: 123.5, ttlMs: 1000, margin: 0.1, want: 1023.5 },
  ];
  for (const c of cases) {
    it(`sent at ${c.sentAt}, TTL ${c.ttlMs}, margin ${c.margin} → ${c.want}`, () => {
      expect(safeDeadline(c.sentAt, c.ttlMs, c.margin)).toBeCloseTo(c.want, 9);
    });
  }
});

describe("leasePolicy", () => {
  const bad: Array<[number, number]> = [
    [0, 0.2],
    [1.5, 0.2],
    [3601, 0.2],
    [2, 0],
    [2, 0.01],
    [2, 0.6],
    [2, Number.NaN],
  ];
  for (const [ttl, margin] of bad) {
    it(`refuses TTL ${ttl} s with margin ${margin}`, () => {
      expect(() => leasePolicy(ttl, margin)).toThrow(HermesError);
    });
  }
  it("takes whole seconds and a fraction", () => {
    expect(leasePolicy(10)).toEqual({ ttlMs: 10_000, safetyMargin: 0.2 });
    expect(leasePolicy(2, 0.3)).toEqual({ ttlMs: 2000, safetyMargin: 0.3 });
  });
});

describe("LeaseClock", () => {
  afterEach(() => vi.restoreAllMocks());

  function clock() {
    let t = 10_000;
    const lease = new LeaseClock(leasePolicy(2), () => t);
    return { lease, at: (ms: number) => (t = ms) };
  }

  it("counts validity from the send time, not the answer time", () => {
    const { lease, at } = clock();
    const ticket = lease.requestSent();
    at(10_900);
    lease.granted(ticket, "7", 2);
    expect(lease.status()).toMatchObject({ phase: "valid", leaseId: "7", validUntil: 11_600, remainingMs: 700 });
    expect(lease.nextAttemptAt()).toBe(10_666);
  });

  it("self-fences at the deadline when renewals fail, and recovers on a renewal of the same lease", () => {
    const { lease, at } = clock();
    lease.granted(lease.requestSent(), "7", 2);
    at(10_700);
    lease.failed(lease.requestSent());
    expect(lease.nextAttemptAt()).toBe(10_900);
    expect(lease.failures).toBe(1);
    at(11_599);
    expect(lease.isValid()).toBe(true);
    at(11_600);
    expect(lease.status()).toMatchObject({ phase: "lost", leaseId: "7", remainingMs: 0 });
    const late = lease.requestSent();
    at(11_650);
    lease.granted(late, "7", 2);
    expect(lease.status()).toMatchObject({ phase: "valid", validUntil: 13_200 });
    expect(lease.failures).toBe(0);
  });

  it("drops the lease when etcd says it is gone, and ignores answers about other leases", () => {
    const { lease } = clock();
    lease.granted(lease.requestSent(), "7", 2);
    lease.gone("8");
    expect(lease.status().leaseId).toBe("7");
    lease.granted({ leaseId: "8", sentAt: 10_000 }, "8", 2);
    expect(lease.status().leaseId).toBe("7");
    lease.granted(lease.requestSent(), "7", 0);
    expect(lease.status()).toEqual({ phase: "unleased", leaseId: null, validUntil: null, remainingMs: 0 });
  });

  it("does not read the wall clock: a jump of Date.now changes nothing", () => {
    const { lease, at } = clock();
    lease.granted(lease.requestSent(), "7", 2);
    at(11_000);
    const before = lease.status();
    vi.spyOn(Date, "now").mockReturnValue(Date.UTC(2099, 0, 1));
    expect(lease.status()).toEqual(before);
    vi.spyOn(Date, "now").mockReturnValue(0);
    expect(lease.status()).toEqual(before);
    expect(before.phase).toBe("valid");
  });
});
