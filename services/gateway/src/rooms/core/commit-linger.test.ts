import { describe, expect, it } from "vitest";
import { CommitLinger, DEFAULT_LINGER, type LingerPolicy, MIN_GAIN } from "./commit-linger.js";

const POLICY: LingerPolicy = { maxMs: 4, enoughAppends: 64, probeEveryMs: 250 };

/** A linger that has seen appends `gapMs` apart, ending at `endMs`. */
function after(gapMs: number, count: number, endMs = count * gapMs): CommitLinger {
  const linger = new CommitLinger(POLICY);
  for (let i = count - 1; i >= 0; i--) linger.arrived(endMs - i * gapMs);
  return linger;
}

describe("CommitLinger.waitMs", () => {
  it.each([
    { case: "steady arrivals 1 ms apart, one queued", gapMs: 1, queued: 1, wait: 4 },
    { case: "steady arrivals 3 ms apart", gapMs: 3, queued: 1, wait: 4 },
    { case: "arrivals 4 ms apart: none expected within the window", gapMs: 4, queued: 1, wait: 0 },
    { case: "a room written once a second", gapMs: 1000, queued: 1, wait: 0 },
    { case: "a batch of 63 waits", gapMs: 0.1, queued: 63, wait: 4 },
    { case: "a batch of 64 already shares its commit", gapMs: 0.1, queued: 64, wait: 0 },
  ])("$case → $wait ms", ({ gapMs, queued, wait }) => {
    expect(after(gapMs, 50).waitMs(queued, 1000)).toBe(wait);
  });

  it("never waits before two appends have arrived, nor with maxMs 0", () => {
    const first = new CommitLinger(POLICY);
    first.arrived(0);
    expect(first.waitMs(1, 0)).toBe(0);
    const off = new CommitLinger({ ...POLICY, maxMs: 0 });
    for (let t = 0; t < 50; t++) off.arrived(t);
    expect(off.waitMs(1, 50)).toBe(0);
  });

  it("comes back to waiting within a few dozen steady arrivals after an idle hour", () => {
    const linger = after(1, 50);
    linger.arrived(3_600_000);
    expect(linger.waitMs(1, 3_600_000)).toBe(0);
    let t = 3_600_000;
    let arrivals = 0;
    while (linger.waitMs(1, t) === 0) {
      linger.arrived(++t);
      arrivals++;
    }
    expect(arrivals).toBeLessThan(40);
  });
});

describe("CommitLinger scenarios", () => {
  it("an open-loop sender (1,000/s) keeps waiting: every wait gains appends", () => {
    const linger = new CommitLinger(POLICY);
    let waits = 0;
    let flushes = 0;
    let queued = 0;
    let waitingUntil = -1;
    let queuedAtWait = 0;
    for (let t = 0; t < 1000; t++) {
      linger.arrived(t);
      queued++;
      if (waitingUntil < 0) {
        const wait = linger.waitMs(queued, t);
        if (wait === 0) {
          flushes++;
          queued = 0;
        } else {
          waits++;
          waitingUntil = t + wait;
          queuedAtWait = queued;
        }
      } else if (t >= waitingUntil) {
        linger.waited(queued - queuedAtWait);
        flushes++;
        queued = 0;
        waitingUntil = -1;
      }
    }
    expect(linger.means.gain).toBeGreaterThan(MIN_GAIN);
    expect(waits).toBeGreaterThan(150);
    // About four appends per commit instead of one.
    expect(flushes).toBeLessThan(300);
  });

  it("a closed-loop sender (next append after the ack) stops waiting after one wait, and tries again only every probeEveryMs", () => {
    const linger = new CommitLinger(POLICY);
    const waitsAt: number[] = [];
    let t = 0;
    for (let i = 0; i < 2000; i++) {
      linger.arrived(t);
      const wait = linger.waitMs(1, t);
      if (wait > 0) {
        waitsAt.push(t);
        linger.waited(0);
      }
      t += wait + 0.5; // the commit takes 0.5 ms; the next append comes with its ack
    }
    // 2,000 appends over ~1 s of which only the probes waited.
    expect(waitsAt.length).toBeLessThanOrEqual(Math.ceil(t / POLICY.probeEveryMs) + 1);
    for (let i = 1; i < waitsAt.length; i++) expect(waitsAt[i]! - waitsAt[i - 1]!).toBeGreaterThanOrEqual(POLICY.probeEveryMs);
  });

  it("waiting resumes once a probe gains appends again", () => {
    const linger = after(1, 50);
    expect(linger.waitMs(1, 50)).toBe(4);
    linger.waited(0);
    expect(linger.waitMs(1, 51)).toBe(0);
    expect(linger.waitMs(1, 50 + POLICY.probeEveryMs)).toBe(4);
    linger.waited(4);
    expect(linger.waitMs(1, 51 + POLICY.probeEveryMs)).toBe(4);
  });

  it("the default waits at most 4 ms and flushes 64 at once", () => {
    expect(DEFAULT_LINGER).toEqual({ maxMs: 4, enoughAppends: 64, probeEveryMs: 250 });
  });
});
