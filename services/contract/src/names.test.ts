import { describe, expect, it } from "vitest";
import { HermesError } from "./errors.js";
import {
  assertConnectionName,
  assertId,
  assertProfileName,
  GATEWAY_ID_RULE,
  ID_RULE,
  isValidGatewayId,
  isValidId,
  isValidName,
  isValidProfileName,
  NAME_RULE,
  PROFILE_NAME_RULE,
} from "./names.js";

/** Runs an assertion: "accepted", or the reason of the HermesError it threw. */
function outcome(assert: () => unknown): string {
  try {
    assert();
    return "accepted";
  } catch (err) {
    return err instanceof HermesError ? err.reason : `not a HermesError: ${String(err)}`;
  }
}

// text, then: profile name, connection name or handle, gateway id, id.
const table: [string, boolean, boolean, boolean, boolean][] = [
  ["alice", true, true, true, true],
  ["bob-2_x", true, true, true, true],
  ["vps.example", false, true, true, true],
  ["Alice", false, false, true, true],
  ["gw-A.1", false, false, true, true],
  ["dlv_01:a@b", false, false, false, true],
  ["a".repeat(64), true, true, true, true],
  ["a".repeat(65), false, false, false, true],
  ["a".repeat(128), false, false, false, true],
  ["a".repeat(129), false, false, false, false],
  ["", false, false, false, false],
  ["-lead", false, false, false, false],
  [".hidden", false, false, false, false],
  ["../etc", false, false, false, false],
  ["a/b", false, false, false, false],
  ["a b", false, false, false, false],
  ["ｇｗ２", false, false, false, false],
];

describe("names and ids", () => {
  it.each(table)("%j: profile %s, connection %s, gateway id %s, id %s", (text, profile, connection, gateway, id) => {
    expect(isValidProfileName(text)).toBe(profile);
    expect(isValidName(text)).toBe(connection);
    expect(isValidGatewayId(text)).toBe(gateway);
    expect(isValidId(text)).toBe(id);
    expect(outcome(() => assertProfileName(text))).toBe(profile ? "accepted" : "invalid_name");
    expect(outcome(() => assertConnectionName(text))).toBe(connection ? "accepted" : "invalid_name");
    expect(outcome(() => assertId(text, "room id"))).toBe(id ? "accepted" : "invalid_params");
  });

  it("a gateway id is only ever text", () => {
    for (const value of [undefined, null, 7, {}, ["gw"]]) expect(isValidGatewayId(value)).toBe(false);
  });

  it("refusals state the rule, so the message says what to do", () => {
    expect(() => assertProfileName("My Bot")).toThrow(
      expect.objectContaining({ message: expect.stringContaining(PROFILE_NAME_RULE), data: { name: "My Bot", rule: PROFILE_NAME_RULE } }),
    );
    for (const rule of [PROFILE_NAME_RULE, NAME_RULE, GATEWAY_ID_RULE, ID_RULE]) expect(() => new RegExp(rule)).not.toThrow();
  });
});
