import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_LAG, type IsrPlanInput, planIsr, replicaInSync } from "./isr.js";
import { admitSend, type QuorumInput, quorumCommit } from "./quorum.js";

describe("replicaInSync (max_lag 1,000 events / 10 s)", () => {
  const cases: Array<[number | null, number, boolean]> = [
    [0, 0, true],
    [-1, 0, true],
    [0, 60_000, true],
    [1000, 10_000, true],
    [1001, 0, false],
    [5, 10_001, false],
    [null, 10_000, true],
    [null, 10_001, false],
  ];
  for (const [events, lackingForMs, want] of cases) {
    it(`${events} events behind, lacking for ${lackingForMs} ms → ${want ? "in sync" : "out"}`, () => {
      expect(replicaInSync({ events, lackingForMs }, DEFAULT_MAX_LAG)).toBe(want);
    });
  }
});

describe("planIsr", () => {
  const base: IsrPlanInput = {
    authority: "A",
    replicas: ["B", "C"],
    recorded: ["A", "B", "C"],
    inSync: new Set(["B", "C"]),
    durable: new Map([
      ["B", 10],
      ["C", 10],
    ]),
    committed: 10,
  };
  const cases: Array<{ name: string; input: Partial<IsrPlanInput>; want: string[] | "keep" }> = [
    { name: "all in sync: keep", input: {}, want: "keep" },
    { name: "a lagging member leaves", input: { inSync: new Set(["B"]) }, want: ["A", "B"] },
    { name: "all leave but the authority", input: { inSync: new Set() }, want: ["A"] },
    { name: "an in-sync replica holding every ack joins", input: { recorded: ["A", "B"] }, want: ["A", "B", "C"] },
    {
      name: "an in-sync replica missing an ack does not join",
      input: { recorded: ["A", "B"], durable: new Map([["C", 9]]) },
      want: "keep",
    },
    { name: "a silent replica does not join", input: { recorded: ["A"], durable: new Map() }, want: "keep" },
    { name: "a member no longer configured leaves", input: { replicas: ["B"] }, want: ["A", "B"] },
    {
      name: "the authority is put first and the rest sorted",
      input: { recorded: ["A", "C"], replicas: ["C", "B"] },
      want: ["A", "B", "C"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const plan = planIsr({ ...base, ...c.input });
      if (c.want === "keep") expect(plan).toEqual({ kind: "keep" });
      else expect(plan).toMatchObject({ kind: "change", isr: c.want });
    });
  }
});

describe("quorumCommit", () => {
  const durable = new Map([
    ["B", 8],
    ["C", 5],
  ]);
  const base: QuorumInput = {
    authority: "A",
    authorityDurableSeq: 10,
    recorded: ["A", "B", "C"],
    pending: null,
    minInsync: 2,
    durable,
    previous: 0,
  };
  const cases: Array<{ name: string; input: Partial<QuorumInput>; committed: number; enough: boolean }> = [
    { name: "the lowest ISR member bounds the ack", input: {}, committed: 5, enough: true },
    { name: "the authority's own durable seq bounds it too", input: { authorityDurableSeq: 4 }, committed: 4, enough: true },
    {
      name: "a member leaving still counts until recorded",
      input: { recorded: ["A", "B", "C"], pending: ["A", "B"] },
      committed: 5,
      enough: true,
    },
    { name: "once recorded it does not", input: { recorded: ["A", "B"] }, committed: 8, enough: true },
    {
      name: "a member joining counts from its planning",
      input: { recorded: ["A", "B"], pending: ["A", "B", "C"] },
      committed: 5,
      enough: true,
    },
    { name: "below min_insync nothing advances", input: { recorded: ["A"], previous: 3 }, committed: 3, enough: false },
    { name: "min_insync 1: the authority alone acks", input: { recorded: ["A"], minInsync: 1 }, committed: 10, enough: true },
    { name: "never backwards", input: { previous: 7 }, committed: 7, enough: true },
    { name: "a silent member holds acks at 0", input: { durable: new Map([["B", 8]]) }, committed: 0, enough: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(quorumCommit({ ...base, ...c.input })).toMatchObject({ committed: c.committed, enough: c.enough });
    });
  }
});

describe("admitSend", () => {
  it("refuses without a valid lease, then below min_insync", () => {
    expect(admitSend({ leaseValid: false, recordedIsrSize: 3, minInsync: 2 })).toMatchObject({ code: "lease_lost", reason: "lease_lost" });
    expect(admitSend({ leaseValid: true, recordedIsrSize: 1, minInsync: 2 })).toMatchObject({
      code: "not_enough_replicas",
      reason: "not_enough_replicas",
      data: { isr_size: 1, min_insync: 2 },
    });
    expect(admitSend({ leaseValid: true, recordedIsrSize: 2, minInsync: 2 })).toEqual({ kind: "admit" });
  });
});
