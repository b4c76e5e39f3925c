import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import { checkRoutineName, jobLabel, parseJobLabel, routineNameKey } from "./routine-name.js";

describe("job names: [bot:<profile>] <name>", () => {
  it.each([
    ["[bot:alice] Morning summary", "alice", "Morning summary"],
    ["  [bot:default]   Inbox  ", "default", "Inbox"],
    ["[bot:r2-d2] [weekly] Report: ünïcode ✓", "r2-d2", "[weekly] Report: ünïcode ✓"],
  ])("parses %j", (label, profile, name) => {
    const ref = parseJobLabel(label);
    expect(ref).toEqual({ profile, name });
    expect(parseJobLabel(jobLabel(ref))).toEqual(ref);
  });

  it.each([
    ["Morning summary", "invalid_params", "is not a routine; routines are named '[bot:<profile>] <name>'"],
    ["[bot:alice]", "invalid_params", "is not a routine"],
    ["[bot:alice]Morning", "invalid_params", "is not a routine"],
    ["[bot:Alice] Inbox", "invalid_name", "invalid profile name"],
    ["[bot:../x] Inbox", "invalid_name", "invalid profile name"],
    [`[bot:alice] ${"n".repeat(65)}`, "invalid_params", "name: is 65 characters"],
    [42, "invalid_params", "job: number 42 is not a routine"],
  ])("refuses %j", (label, reason, message) => {
    const err = thrownHermesError(() => parseJobLabel(label));
    expect(err.reason).toBe(reason);
    expect(err.message).toContain(message);
  });

  it("names are 1-64 characters on one line and compared without case", () => {
    expect(checkRoutineName("  Daily digest ")).toBe("Daily digest");
    expect(thrownHermesError(() => checkRoutineName("")).message).toContain("name: is empty");
    expect(thrownHermesError(() => checkRoutineName("a\tb")).message).toContain("control character");
    expect(routineNameKey("Morning Summary")).toBe(routineNameKey("morning summary"));
  });
});
