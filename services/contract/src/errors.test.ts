import { describe, expect, it } from "vitest";
import { HermesError, isErrorReason, REASONS } from "./errors.js";

describe("the reasons table", () => {
  it("gives every reason an exit code of 1 (runtime, peer, transport) or 2 (usage, refusal)", () => {
    for (const [reason, { exit }] of Object.entries(REASONS)) {
      expect([1, 2], reason).toContain(exit);
      expect(reason).toMatch(/^[a-z]+(_[a-z]+)*$/);
    }
  });

  const table: [unknown, boolean][] = [
    ["invalid_params", true],
    ["queued_expired", true],
    ["toString", false],
    ["constructor", false],
    ["Invalid_Params", false],
    [42, false],
    [undefined, false],
  ];
  it.each(table)("%j is a reason: %s", (value, known) => {
    expect(isErrorReason(value)).toBe(known);
  });

  it("a HermesError carries its reason, exit code and data as its wire form", () => {
    const e = new HermesError("payload_too_large", "too big", { data: { limit: 3 } });
    expect(e).toBeInstanceOf(Error);
    expect(e.exitCode).toBe(2);
    expect(new HermesError("unavailable", "x").exitCode).toBe(1);
    expect(JSON.parse(JSON.stringify(e))).toEqual({ reason: "payload_too_large", message: "too big", data: { limit: 3 } });
  });
});
