import { describe, expect, it } from "vitest";
import { envValue, parseMilliseconds } from "./env.js";

describe("envValue", () => {
  it("is undefined for an unset or blank variable, else the value as written", () => {
    const env = { EMPTY: "", BLANK: " \t", SET: " x ", ZERO: "0" };
    expect(envValue(env, "UNSET")).toBeUndefined();
    expect(envValue(env, "EMPTY")).toBeUndefined();
    expect(envValue(env, "BLANK")).toBeUndefined();
    expect(envValue(env, "SET")).toBe(" x ");
    expect(envValue(env, "ZERO")).toBe("0");
  });
});

describe("parseMilliseconds", () => {
  it("takes whole milliseconds from 0 to the bound, with blanks around them", () => {
    expect(parseMilliseconds("0", "X", 10)).toBe(0);
    expect(parseMilliseconds(" 10 ", "X", 10)).toBe(10);
    for (const bad of ["", "11", "-1", "1.5", "1e1", "0x1", "ten", "١٢"]) {
      expect(() => parseMilliseconds(bad, "X", 10)).toThrow(
        expect.objectContaining({
          reason: "invalid_config",
          message: `X=${JSON.stringify(bad)} is not a whole number of milliseconds from 0 to 10`,
        }),
      );
    }
  });
});
