import { describe, expect, it } from "vitest";
import { type ClaimInput, changeIsr, decideClaim, initialRecord, releaseRecord } from "./authority.js";
import type { AuthorityRecord } from "./authority-record.js";

const record: AuthorityRecord = {
  gateway_id: "A",
  epoch: 4,
  isr: ["A", "B", "C"],
  replicas: ["A", "B", "C", "D"],
  min_insync: 2,
  lease: "1",
};

describe("decideClaim", () => {
  const base: ClaimInput = { self: "B", selfLease: "2", mode: "automatic", record, recordLeaseAlive: false, localMaxEpoch: 4 };
  const cases: Array<{ name: string; input: Partial<ClaimInput>; want: string; epoch?: number; isr?: string[]; unclean?: boolean }> = [
    { name: "an ISR member claims once the lease expired", input: {}, want: "claim", epoch: 5, isr: ["B", "C"], unclean: false },
    { name: "never while the lease lives", input: { recordLeaseAlive: true }, want: "lease_valid" },
    { name: "a promote neither", input: { recordLeaseAlive: true, mode: "promote" }, want: "lease_valid" },
    { name: "an unclean promote neither", input: { recordLeaseAlive: true, mode: "promote_unclean" }, want: "lease_valid" },
    {
      name: "a released record is claimable at once",
      input: { recordLeaseAlive: true, record: { ...record, lease: null } },
      want: "claim",
      epoch: 5,
    },
    { name: "the epoch goes above the local maximum", input: { localMaxEpoch: 9 }, want: "claim", epoch: 10 },
    { name: "and above the record's", input: { localMaxEpoch: 1 }, want: "claim", epoch: 5 },
    { name: "a non-ISR member does not claim automatically", input: { self: "D" }, want: "not_in_isr" },
    { name: "nor by a plain promote", input: { self: "D", mode: "promote" }, want: "not_in_isr" },
    {
      name: "an unclean promote lets it",
      input: { self: "D", mode: "promote_unclean" },
      want: "claim",
      epoch: 5,
      isr: ["D", "B", "C"],
      unclean: true,
    },
    { name: "the old authority, restarted, reclaims", input: { self: "A", selfLease: "9" }, want: "claim", epoch: 5, isr: ["A", "B", "C"] },
    {
      name: "a holder under its live lease already leads",
      input: { self: "A", selfLease: "1", recordLeaseAlive: true },
      want: "already_authority",
    },
    { name: "no record: not automatically", input: { record: null }, want: "no_record" },
    { name: "no record: not by a plain promote", input: { record: null, mode: "promote" }, want: "no_record" },
    {
      name: "no record: an unclean promote writes one",
      input: { record: null, mode: "promote_unclean" },
      want: "claim",
      epoch: 5,
      isr: ["B"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const decision = decideClaim({ ...base, ...c.input });
      if (decision.kind === "refuse") {
        expect(decision.code).toBe(c.want);
        return;
      }
      expect(c.want).toBe("claim");
      expect(decision.record.gateway_id).toBe(c.input.self ?? "B");
      expect(decision.record.lease).toBe(c.input.selfLease ?? "2");
      if (c.epoch !== undefined) expect(decision.record.epoch).toBe(c.epoch);
      if (c.isr !== undefined) expect(decision.record.isr).toEqual(c.isr);
      if (c.unclean !== undefined) expect(decision.unclean).toBe(c.unclean);
    });
  }
});

describe("holder changes", () => {
  it("the holder changes the ISR and releases; nobody else does", () => {
    expect(changeIsr(record, "A", "1", ["B"])).toEqual({ kind: "write", record: { ...record, isr: ["A", "B"] } });
    expect(releaseRecord(record, "A", "1")).toEqual({ kind: "write", record: { ...record, lease: null } });
    expect(changeIsr(record, "A", "2", ["B"])).toMatchObject({ kind: "refuse", code: "not_holder", reason: "not_authority" });
    expect(releaseRecord(record, "B", "1")).toMatchObject({ kind: "refuse", code: "not_holder" });
  });

  it("a room's first record names its creator alone", () => {
    expect(initialRecord("A", "1", 1)).toEqual({ gateway_id: "A", epoch: 1, isr: ["A"], replicas: ["A"], min_insync: 1, lease: "1" });
    expect(initialRecord("A", "1", 1, { replicas: ["C", "B"], min_insync: 2 })).toMatchObject({ replicas: ["A", "B", "C"], min_insync: 2 });
  });
});
