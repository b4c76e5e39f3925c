import { describe, expect, it } from "vitest";
import { Ledger } from "./ledger.js";
import { assertQuorumClean, type GatewayLog, prefixProblems, quorumSummary, secondsToFirstAck, verifyQuorum } from "./quorum-ledger.js";

const ev = (seq: number, eventId: string, epoch = 1) => ({ seq, eventId, epoch, hash: `h-${eventId}` });
const log = (gateway: string, ...events: ReturnType<typeof ev>[]): GatewayLog => ({ gateway, events });

/** A clock the test moves by hand (ms). */
function clock() {
  let t = 0;
  return { now: () => t, set: (ms: number) => (t = ms) };
}

describe("quorum ledger", () => {
  it("is clean when every ack is in the final authority's log where it was acked, one acker per epoch", () => {
    const c = clock();
    const l = new Ledger("t", c.now);
    c.set(100);
    l.acked(l.begin({ eventId: "a", room: "r", via: "gw-a" }), { seq: 2, epoch: 1 });
    l.indeterminate(l.begin({ eventId: "b", room: "r", via: "gw-a" }), "UNAVAILABLE");
    c.set(5_000);
    l.acked(l.begin({ eventId: "c", room: "r", via: "gw-b" }), { seq: 4, epoch: 2 });
    const final = log("gw-b", ev(1, "created"), ev(2, "a"), ev(3, "claim", 2), ev(4, "c", 2));
    const v = verifyQuorum(l, {
      room: "r",
      authority: "gw-b",
      logs: [final, log("gw-c", ev(1, "created"), ev(2, "a"), ev(3, "claim", 2)), log("gw-a", ev(1, "created"), ev(2, "a"))],
      divergent: [{ eventId: "b" }],
    });
    expect(v.ok).toBe(true);
    expect(v.epochs).toEqual([
      { epoch: 1, gateways: [{ gateway: "gw-a", acks: 1 }] },
      { epoch: 2, gateways: [{ gateway: "gw-b", acks: 1 }] },
    ]);
    expect(quorumSummary(v, { failoverSeconds: secondsToFirstAck(l, 1_000, { aboveEpoch: 1 }) })).toBe(
      "3 sends, 2 acked, 0 lost; failover in 4.0 s; epochs 1 gw-a (1 acks), 2 gw-b (1 acks); 1 preserved unacknowledged",
    );
    expect(quorumSummary(v, { worstSeconds: 6.25, faults: 7 })).toMatch(/; a send acknowledged ≤ 6\.3 s after each of 7 faults;/);
    const printed: string[] = [];
    assertQuorumClean("t", v, { noFailover: "the authority kept its lease" }, (line) => printed.push(line));
    expect(printed[0]).toMatch(/^\[ledger t\] 3 sends, 2 acked, 0 lost; no failover \(the authority kept its lease\);/);
  });

  it("counts an acked send that is only in a divergent branch as lost, and one at another seq as misplaced", () => {
    const l = new Ledger("t");
    l.acked(l.begin({ eventId: "kept-aside", room: "r", via: "gw-a" }), { seq: 2, epoch: 1 });
    l.acked(l.begin({ eventId: "moved", room: "r", via: "gw-a" }), { seq: 3, epoch: 1 });
    const v = verifyQuorum(l, {
      room: "r",
      authority: "gw-b",
      logs: [log("gw-b", ev(1, "created"), ev(2, "moved"))],
      divergent: [{ eventId: "kept-aside" }],
    });
    expect(v.ok).toBe(false);
    expect(v.lost.map((r) => r.eventId)).toEqual(["kept-aside"]);
    expect(v.ackedInDivergent.map((r) => r.eventId)).toEqual(["kept-aside"]);
    expect(v.misplaced.map((m) => [m.record.eventId, m.found.seq])).toEqual([["moved", 2]]);
    expect(() => assertQuorumClean("t", v, { failoverSeconds: null }, () => {})).toThrow(
      /LOST: #1 kept-aside[\s\S]*MISPLACED: #2 moved via=gw-a ack=1\/3 is at 1\/2[\s\S]*ACKED BUT IN A DIVERGENT BRANCH/,
    );
  });

  it("flags two gateways acknowledging in the same epoch", () => {
    const l = new Ledger("t");
    l.acked(l.begin({ eventId: "x", room: "r", via: "gw-a" }), { seq: 2, epoch: 3 });
    l.acked(l.begin({ eventId: "y", room: "r", via: "gw-b" }), { seq: 3, epoch: 3 });
    const v = verifyQuorum(l, {
      room: "r",
      authority: "gw-b",
      logs: [log("gw-b", ev(1, "c"), ev(2, "x", 3), ev(3, "y", 3))],
      divergent: [],
    });
    expect(v.epochConflicts).toEqual([
      {
        epoch: 3,
        gateways: [
          { gateway: "gw-a", acks: 1 },
          { gateway: "gw-b", acks: 1 },
        ],
      },
    ]);
    expect(() => assertQuorumClean("t", v, { failoverSeconds: null }, () => {})).toThrow(/TWO ACKERS IN EPOCH 3: gw-a \(1\), gw-b \(1\)/);
  });

  it("flags a refused send that became visible, a duplicate and a log that is not a prefix", () => {
    const l = new Ledger("t");
    l.refused(l.begin({ eventId: "no", room: "r", via: "gw-c" }), "not_authority");
    const v = verifyQuorum(l, {
      room: "r",
      authority: "gw-a",
      logs: [log("gw-a", ev(1, "c"), ev(2, "d"), ev(3, "d")), log("gw-c", ev(1, "c"), ev(2, "no"))],
      divergent: [],
    });
    expect(v.refusedButVisible.map((r) => r.eventId)).toEqual(["no"]);
    expect(v.duplicates).toEqual([{ gateway: "gw-a", eventId: "d", count: 2 }]);
    expect(v.prefixProblems).toEqual(["gw-c is not a prefix of gw-a: seq 2 is no (h-no) there, d (h-d) on gw-a"]);
  });

  it("prefix check: equal hashes are required, gaps are reported, shorter logs are fine", () => {
    expect(prefixProblems([log("a", ev(1, "x"), ev(2, "y")), log("b", ev(1, "x"))])).toEqual([]);
    const forged = log("b", { ...ev(1, "x"), hash: "other" });
    expect(prefixProblems([log("a", ev(1, "x"), ev(2, "y")), forged])[0]).toMatch(/b is not a prefix of a: seq 1 is x \(other\)/);
    expect(prefixProblems([log("a", ev(1, "x"), ev(3, "y"))])).toEqual(["a: seq 3 at position 2 (gap or reorder)"]);
  });

  it("times the first ack after a fault, optionally of a newer epoch only, and ignores other rooms", () => {
    const c = clock();
    const l = new Ledger("t", c.now);
    c.set(1_500);
    l.acked(l.begin({ eventId: "late-old", room: "r", via: "gw-a" }), { seq: 5, epoch: 1 });
    c.set(2_000);
    l.acked(l.begin({ eventId: "other-room", room: "q", via: "gw-b" }), { seq: 2, epoch: 2 });
    c.set(3_250);
    l.acked(l.begin({ eventId: "new", room: "r", via: "gw-b" }), { seq: 7, epoch: 2 });
    expect(secondsToFirstAck(l, 1_000, { room: "r" })).toBe(0.5);
    expect(secondsToFirstAck(l, 1_000, { room: "r", aboveEpoch: 1 })).toBe(2.25);
    expect(secondsToFirstAck(l, 4_000)).toBeNull();
  });
});
