import { describe, expect, it } from "vitest";
import { checkReplicationParams, defaultMinInsync } from "./replication-policy.js";

describe("checkReplicationParams", () => {
  it("a local room: absent, null or mode local", () => {
    for (const raw of [undefined, null, {}, { mode: "local" }, { mode: "" }, { mode: "local", replicas: [], min_insync: 0 }]) {
      expect(checkReplicationParams(raw, "gw-a", true)).toEqual({ ok: true, value: null });
    }
  });

  it("quorum: the creator joins the set, sorted; min_insync defaults to a majority", () => {
    expect(checkReplicationParams({ mode: "quorum", replicas: ["gw-c", "gw-b"] }, "gw-a", true)).toEqual({
      ok: true,
      value: { mode: "quorum", replicas: ["gw-a", "gw-b", "gw-c"], min_insync: 2 },
    });
    expect(checkReplicationParams({ mode: "quorum", replicas: ["gw-a", "gw-b"], min_insync: 1 }, "gw-a", true)).toEqual({
      ok: true,
      value: { mode: "quorum", replicas: ["gw-a", "gw-b"], min_insync: 1 },
    });
    expect([1, 2, 3, 4, 5].map(defaultMinInsync)).toEqual([1, 2, 2, 3, 3]);
  });

  it("quorum without a coordinator is invalid_params with data.code coordinator_required", () => {
    expect(checkReplicationParams({ mode: "quorum", replicas: ["gw-b"] }, "gw-a", false)).toMatchObject({
      ok: false,
      refusal: { reason: "invalid_params", data: { field: "replication.mode", code: "coordinator_required" } },
    });
  });

  const bad: Array<[string, unknown, string]> = [
    ["not an object", "quorum", "replication"],
    ["an unknown mode", { mode: "sync" }, "replication.mode"],
    ["replicas without quorum", { mode: "local", replicas: ["gw-b"] }, "replication.mode"],
    ["an unknown field", { mode: "quorum", replicas: ["gw-b"], acks: "all" }, "replication.acks"],
    ["no replicas", { mode: "quorum" }, "replication.replicas"],
    ["only itself", { mode: "quorum", replicas: ["gw-a"] }, "replication.replicas"],
    ["a bad id", { mode: "quorum", replicas: ["../x"] }, "replication.replicas"],
    ["a duplicate", { mode: "quorum", replicas: ["gw-b", "gw-b"] }, "replication.replicas"],
    ["too many", { mode: "quorum", replicas: Array.from({ length: 16 }, (_, i) => `gw-${i}`) }, "replication.replicas"],
    ["min_insync above the set", { mode: "quorum", replicas: ["gw-b"], min_insync: 3 }, "replication.min_insync"],
    ["a fractional min_insync", { mode: "quorum", replicas: ["gw-b"], min_insync: 1.5 }, "replication.min_insync"],
  ];
  for (const [name, raw, field] of bad) {
    it(`refuses ${name}`, () => {
      expect(checkReplicationParams(raw, "gw-a", true)).toMatchObject({
        ok: false,
        refusal: { reason: "invalid_params", data: { field } },
      });
    });
  }
});
