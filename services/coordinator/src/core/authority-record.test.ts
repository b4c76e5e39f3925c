import { describe, expect, it } from "vitest";
import { assessAuthorityRecord, encodeAuthorityRecord, parseAuthorityRecord } from "./authority-record.js";

const good = {
  format: 1,
  gateway_id: "gw-a",
  epoch: 3,
  isr: ["gw-a", "gw-b"],
  replicas: ["gw-a", "gw-b", "gw-c"],
  min_insync: 2,
  lease: "7587869214237040902",
};
const text = (patch: Record<string, unknown>) => JSON.stringify({ ...good, ...patch });

describe("parseAuthorityRecord", () => {
  it("round-trips a record", () => {
    const record = { gateway_id: "gw-a", epoch: 3, isr: ["gw-a", "gw-b"], replicas: ["gw-a", "gw-b"], min_insync: 2, lease: null };
    expect(parseAuthorityRecord(encodeAuthorityRecord(record))).toEqual({ ok: true, record });
  });

  const garbage: Array<[string, string, RegExp]> = [
    ["not JSON", "{epoch: 3", /not JSON/],
    ["a JSON array", "[1,2]", /not a JSON object/],
    ["null", "null", /not a JSON object/],
    ["another format", text({ format: 2 }), /format 2/],
    ["no format", JSON.stringify({ ...good, format: undefined }), /format undefined/],
    ["an extra field", text({ owner: "me" }), /unknown field\(s\) owner/],
    ["a bad gateway id", text({ gateway_id: "../etc" }), /gateway_id/],
    ["epoch 0", text({ epoch: 0 }), /epoch 0/],
    ["a fractional epoch", text({ epoch: 1.5 }), /epoch 1.5/],
    ["a string epoch", text({ epoch: "3" }), /epoch "3"/],
    [
      "an epoch past 2^53",
      '{"format":1,"gateway_id":"gw-a","epoch":9007199254740993,"isr":["gw-a"],"replicas":["gw-a"],"min_insync":1,"lease":null}',
      /epoch/,
    ],
    ["no replicas", text({ replicas: [] }), /replicas must list/],
    ["a duplicate replica", text({ replicas: ["gw-a", "gw-b", "gw-a"] }), /replicas lists a gateway twice/],
    ["an isr member that is no replica", text({ replicas: ["gw-a", "gw-c"] }), /not one of the replicas/],
    ["min_insync 0", text({ min_insync: 0 }), /min_insync 0/],
    ["min_insync above the replicas", text({ min_insync: 4 }), /min_insync 4/],
    ["an empty isr", text({ isr: [] }), /isr must list/],
    ["a duplicate isr member", text({ isr: ["gw-a", "gw-b", "gw-b"] }), /twice/],
    ["an isr without the authority first", text({ isr: ["gw-b", "gw-a"] }), /start with the authority/],
    ["a numeric lease", text({ lease: 7 }), /lease 7/],
    ["a lease with letters", text({ lease: "7a" }), /lease "7a"/],
  ];
  for (const [name, input, problem] of garbage) {
    it(`refuses ${name}`, () => {
      const parsed = parseAuthorityRecord(input);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.problem).toMatch(problem);
    });
  }
});

describe("assessAuthorityRecord", () => {
  const cases: Array<{
    name: string;
    known: { gateway_id: string; epoch: number } | null;
    text: string | null;
    kind: string;
    problem?: string;
  }> = [
    { name: "no record, nothing known", known: null, text: null, kind: "absent" },
    { name: "a record, nothing known", known: null, text: text({}), kind: "adopt" },
    { name: "a newer epoch", known: { gateway_id: "gw-b", epoch: 2 }, text: text({}), kind: "adopt" },
    { name: "the same epoch and holder (an ISR change)", known: { gateway_id: "gw-a", epoch: 3 }, text: text({}), kind: "adopt" },
    {
      name: "a lower epoch (hand-edited)",
      known: { gateway_id: "gw-b", epoch: 4 },
      text: text({}),
      kind: "refuse",
      problem: "epoch_regression",
    },
    {
      name: "another holder for a known epoch",
      known: { gateway_id: "gw-b", epoch: 3 },
      text: text({}),
      kind: "refuse",
      problem: "epoch_conflict",
    },
    { name: "garbage", known: { gateway_id: "gw-a", epoch: 3 }, text: "garbage", kind: "refuse", problem: "malformed" },
    { name: "a deleted record", known: { gateway_id: "gw-a", epoch: 3 }, text: null, kind: "refuse", problem: "deleted" },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const assessed = assessAuthorityRecord(c.known, c.text);
      expect(assessed.kind).toBe(c.kind);
      if (assessed.kind === "refuse") expect(assessed.problem).toBe(c.problem);
    });
  }
});
