import { describe, expect, it } from "vitest";
import { type LaneItem, LaneScheduler } from "./lanes.js";

const open = () => true;

describe("LaneScheduler", () => {
  it("runs one item per lane at a time, in seq order, and the next only after finish", () => {
    const s = new LaneScheduler(8);
    s.enqueue({ lane: "c\0bob", id: "b2", seq: 2 });
    s.enqueue({ lane: "c\0bob", id: "b1", seq: 1 });
    s.enqueue({ lane: "c\0bob", id: "b3", seq: 3 });
    expect(s.take(open).map((x) => x.id)).toEqual(["b1"]);
    expect(s.take(open)).toEqual([]);
    s.finish("b1");
    expect(s.take(open).map((x) => x.id)).toEqual(["b2"]);
    s.finish("b2");
    expect(s.take(open).map((x) => x.id)).toEqual(["b3"]);
    s.finish("b3");
    expect(s.depth()).toEqual({ queued: 0, running: 0 });
  });

  it("runs different lanes in parallel up to the cap, oldest head first", () => {
    const s = new LaneScheduler(2);
    s.enqueue({ lane: "x", id: "x1", seq: 5 });
    s.enqueue({ lane: "y", id: "y1", seq: 1 });
    s.enqueue({ lane: "z", id: "z1", seq: 3 });
    expect(s.take(open).map((x) => x.id)).toEqual(["y1", "z1"]);
    expect(s.depth()).toEqual({ queued: 1, running: 2 });
    expect(s.take(open)).toEqual([]);
    s.finish("z1");
    expect(s.take(open).map((x) => x.id)).toEqual(["x1"]);
  });

  it("skips lanes whose target is not open", () => {
    const s = new LaneScheduler(4);
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "b", id: "b1", seq: 2 });
    expect(s.take((lane) => lane === "b").map((x) => x.id)).toEqual(["b1"]);
    expect(s.take(open).map((x) => x.id)).toEqual(["a1"]);
  });

  it("finish with keep puts the item back at the head of its lane", () => {
    const s = new LaneScheduler(4);
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "a", id: "a2", seq: 2 });
    expect(s.take(open).map((x) => x.id)).toEqual(["a1"]);
    s.finish("a1", true);
    expect(s.isRunning("a1")).toBe(false);
    expect(s.take(open).map((x) => x.id)).toEqual(["a1"]);
  });

  it("ignores duplicates, removes queued items but not running ones, and reports membership", () => {
    const s = new LaneScheduler(1);
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "a", id: "a1", seq: 1 });
    s.enqueue({ lane: "a", id: "a2", seq: 2 });
    expect(s.depth()).toEqual({ queued: 2, running: 0 });
    s.take(open);
    s.remove("a1");
    expect(s.isRunning("a1")).toBe(true);
    s.remove("a2");
    expect(s.has("a2")).toBe(false);
    expect(s.runningIn((l) => l === "a")).toEqual(["a1"]);
    expect(s.idsIn((l) => l === "a")).toEqual(["a1"]);
    s.finish("a2");
    s.finish("a1");
    expect(s.has("a1")).toBe(false);
    expect(s.depth()).toEqual({ queued: 0, running: 0 });
  });

  it("queues an item with an older seq than the running one behind it: finishing the running one leaves it queued", () => {
    const s = new LaneScheduler(1);
    s.enqueue({ lane: "a", id: "a5", seq: 5 });
    expect(s.take(open).map((x) => x.id)).toEqual(["a5"]);
    s.enqueue({ lane: "a", id: "a3", seq: 3 });
    s.enqueue({ lane: "a", id: "a4", seq: 4 });
    s.finish("a5");
    expect(s.has("a5")).toBe(false);
    expect(s.idsIn(() => true)).toEqual(["a3", "a4"]);
    expect(s.take(open).map((x) => x.id)).toEqual(["a3"]);
  });

  it("refuses a cap below one", () => {
    expect(() => new LaneScheduler(0)).toThrow(RangeError);
  });
});

/**
 * The scheduler as it was first written (every lane looked at on each take), with its one fix (an
 * item queues behind the running one): the model the real one must match.
 */
class ScanningLanes {
  readonly lanes = new Map<string, LaneItem[]>();
  readonly busy = new Map<string, string>();
  readonly where = new Map<string, string>();
  constructor(private readonly max: number) {}
  enqueue(item: LaneItem) {
    if (this.where.has(item.id)) return;
    const q = this.lanes.get(item.lane) ?? [];
    let i = q.length;
    while (i > (this.busy.has(item.lane) ? 1 : 0) && q[i - 1]!.seq > item.seq) i--;
    q.splice(i, 0, item);
    this.lanes.set(item.lane, q);
    this.where.set(item.id, item.lane);
  }
  remove(id: string) {
    const lane = this.where.get(id);
    if (lane === undefined || this.busy.get(lane) === id) return;
    const q = this.lanes.get(lane)!;
    q.splice(
      q.findIndex((x) => x.id === id),
      1,
    );
    if (q.length === 0) this.lanes.delete(lane);
    this.where.delete(id);
  }
  take(isOpen: (lane: string) => boolean) {
    const free = this.max - this.busy.size;
    if (free <= 0) return [];
    const heads = [...this.lanes].filter(([l, q]) => !this.busy.has(l) && q.length > 0 && isOpen(l)).map(([, q]) => q[0]!);
    const started = heads.sort((a, b) => a.seq - b.seq).slice(0, free);
    for (const x of started) this.busy.set(x.lane, x.id);
    return started;
  }
  finish(id: string, keep: boolean) {
    const lane = this.where.get(id);
    if (lane === undefined || this.busy.get(lane) !== id) return;
    this.busy.delete(lane);
    if (keep) return;
    const q = this.lanes.get(lane)!;
    q.shift();
    if (q.length === 0) this.lanes.delete(lane);
    this.where.delete(id);
  }
  rename(from: string, to: string) {
    const q = this.lanes.get(from);
    if (q === undefined || this.lanes.has(to)) return;
    this.lanes.delete(from);
    this.lanes.set(to, q);
    for (const x of q) {
      x.lane = to;
      this.where.set(x.id, to);
    }
    const running = this.busy.get(from);
    if (running !== undefined) {
      this.busy.delete(from);
      this.busy.set(to, running);
    }
  }
}

/** A small deterministic generator (mulberry32), so a failing sequence can be replayed. */
function random(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("LaneScheduler against the scanning model", () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])("takes the same items as a scan of every lane, for any mix of operations (seed %i)", (seed) => {
    const rnd = random(seed);
    const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(rnd() * xs.length)];
    const names = ["a", "b", "c", "d", "e", "f"];
    const cap = 1 + Math.floor(rnd() * 3);
    const real = new LaneScheduler(cap);
    const model = new ScanningLanes(cap);
    const ids: string[] = [];
    const seqs = new Set<number>();
    for (let step = 0; step < 2000; step++) {
      const r = rnd();
      if (r < 0.35) {
        // Unique seqs, in any order (the relay enqueues stored rows as it finds them).
        let seq = Math.floor(rnd() * 1_000_000);
        while (seqs.has(seq)) seq++;
        seqs.add(seq);
        const id = `i${step}`;
        ids.push(id);
        const lane = pick(names)!;
        real.enqueue({ lane, id, seq });
        model.enqueue({ lane, id, seq });
      } else if (r < 0.45) {
        const id = pick(ids);
        if (id === undefined) continue;
        real.remove(id);
        model.remove(id);
      } else if (r < 0.75) {
        const closed = new Set(names.filter(() => rnd() < 0.3));
        const isOpen = (lane: string) => !closed.has(lane);
        expect(real.take(isOpen).map((x) => x.id)).toEqual(model.take(isOpen).map((x) => x.id));
      } else if (r < 0.95) {
        const id = pick([...model.busy.values()]);
        if (id === undefined) continue;
        const keep = rnd() < 0.2;
        real.finish(id, keep);
        model.finish(id, keep);
      } else {
        const from = pick(names)!;
        const to = pick(names)!;
        real.rename(from, to);
        model.rename(from, to);
      }
      const all = () => true;
      expect(real.idsIn(all).sort()).toEqual([...model.where.keys()].sort());
      expect(real.runningIn(all).sort()).toEqual([...model.busy.values()].sort());
      const probe = pick(ids);
      if (probe !== undefined) expect(real.isRunning(probe)).toBe(model.busy.get(model.where.get(probe) ?? "") === probe);
    }
    expect(real.depth()).toEqual({
      queued: [...model.lanes.values()].reduce((n, q) => n + q.length, 0) - model.busy.size,
      running: model.busy.size,
    });
  });

  it("looks at no more lanes than it starts when every lane is open", () => {
    const s = new LaneScheduler(1);
    for (let i = 0; i < 10_000; i++) s.enqueue({ lane: `l${i}`, id: `i${i}`, seq: i });
    let looked = 0;
    const everyLaneOpen = () => {
      looked++;
      return true;
    };
    expect(s.take(everyLaneOpen).map((x) => x.id)).toEqual(["i0"]);
    expect(looked).toBe(1);
    s.finish("i0");
    looked = 0;
    expect(s.take(everyLaneOpen).map((x) => x.id)).toEqual(["i1"]);
    expect(looked).toBe(1);
  });
});
