import { describe, expect, it } from "vitest";
import { Ledger } from "./ledger.js";

const ack = (seq: number, epoch = 1) => ({ seq, epoch });

describe("Ledger", () => {
  it("is clean when every acknowledged send is in a main log exactly once", () => {
    const l = new Ledger("t");
    l.acked(l.begin({ eventId: "e1", room: "r", via: "a" }), ack(1));
    l.acked(l.begin({ eventId: "e2", room: "r", via: "a" }), ack(2));
    l.indeterminate(l.begin({ eventId: "e3", room: "r", via: "a" }), "timeout");
    const v = l.verify({
      main: [
        { eventId: "e1", room: "r" },
        { eventId: "e2", room: "r" },
      ],
    });
    expect(v.ok).toBe(true);
    expect(Ledger.summary(v)).toBe("3 sends, 2 acknowledged, 0 lost, 0 preserved in divergent branches");
    expect(v.indeterminate).toBe(1);
    expect(v.indeterminateVisible).toBe(0);
  });

  it("counts acknowledged events found only in a divergent branch as preserved, not lost", () => {
    const l = new Ledger("t");
    l.acked(l.begin({ eventId: "e1", room: "r", via: "a" }), ack(1));
    l.acked(l.begin({ eventId: "e2", room: "r", via: "old" }), ack(2));
    const v = l.verify({ main: [{ eventId: "e1", room: "r" }], divergent: [{ eventId: "e2", room: "r" }] });
    expect(v.ok).toBe(true);
    expect(v.preserved).toBe(1);
    expect(Ledger.summary(v)).toBe("2 sends, 2 acknowledged, 0 lost, 1 preserved in divergent branches");
  });

  it("reports a lost acknowledged send, a duplicate and a refused send that became visible", () => {
    const l = new Ledger("t");
    l.acked(l.begin({ eventId: "lost", room: "r", via: "a" }), ack(1));
    l.acked(l.begin({ eventId: "dup", room: "r", via: "a" }), ack(2));
    l.refused(l.begin({ eventId: "g1a", room: "r", via: "a" }), "fenced_epoch");
    const v = l.verify({
      main: [
        { eventId: "dup", room: "r" },
        { eventId: "dup", room: "r" },
        { eventId: "g1a", room: "r" },
      ],
    });
    expect(v.ok).toBe(false);
    expect(v.lost.map((r) => r.eventId)).toEqual(["lost"]);
    expect(v.duplicates).toEqual([{ room: "r", eventId: "dup", count: 2 }]);
    expect(v.refusedButVisible.map((r) => r.eventId)).toEqual(["g1a"]);
    expect(() => l.assertClean(v, () => {})).toThrow(/LOST: #1 lost[\s\S]*DUPLICATE: dup[\s\S]*REFUSED BUT VISIBLE: #3 g1a/);
  });

  it("does not confuse the same event id in different rooms", () => {
    const l = new Ledger("t");
    l.acked(l.begin({ eventId: "e", room: "r1", via: "a" }), ack(1));
    const v = l.verify({ main: [{ eventId: "e", room: "r2" }] });
    expect(v.lost).toHaveLength(1);
  });

  it("record() classifies results, typed refusals and indeterminate failures", async () => {
    const l = new Ledger("t");
    const opts = {
      ack: (r: { seq: number }) => ack(r.seq),
      refusal: (e: unknown) => (e instanceof Error && e.message.startsWith("fenced") ? "fenced_epoch" : undefined),
    };
    const ok = await l.record({ eventId: "a", room: "r", via: "g" }, async () => ({ seq: 7 }), opts);
    const refused = await l.record({ eventId: "b", room: "r", via: "g" }, () => Promise.reject(new Error("fenced: epoch 2 < 3")), opts);
    const unknown = await l.record({ eventId: "c", room: "r", via: "g" }, () => Promise.reject(new Error("DEADLINE_EXCEEDED")), opts);
    expect([ok.outcome, refused.outcome, unknown.outcome]).toEqual(["acked", "refused", "indeterminate"]);
    expect(ok.ack).toEqual({ seq: 7, epoch: 1 });
    expect(refused.reason).toBe("fenced_epoch");
  });

  it("refuses a reused event id, a double settlement, and flags unresolved sends", () => {
    const l = new Ledger("t");
    const r = l.begin({ eventId: "e", room: "r", via: "a" });
    expect(() => l.begin({ eventId: "e", room: "r", via: "b" })).toThrow(/used twice/);
    l.begin({ eventId: "pending", room: "r", via: "a" });
    l.acked(r, ack(1));
    expect(() => l.refused(r, "x")).toThrow(/already acked/);
    const v = l.verify({ main: [{ eventId: "e", room: "r" }] });
    expect(v.ok).toBe(false);
    expect(v.unresolved.map((x) => x.eventId)).toEqual(["pending"]);
  });
});
