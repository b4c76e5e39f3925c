import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import { checkRoutineDefinition, type RoutineDefinitionInput } from "./definition.js";

const NOW = Date.parse("2026-05-04T10:00:00Z");
const good: RoutineDefinitionInput = {
  profile: "alice",
  name: "Morning summary",
  schedule: "0 8 * * *",
  tz: "Europe/Berlin",
  prompt: "Summarize my inbox.",
};

describe("checkRoutineDefinition", () => {
  it("fills in the misfire defaults", () => {
    const def = checkRoutineDefinition(good, ["Weekly report"], NOW);
    expect(def).toMatchObject({
      profile: "alice",
      name: "Morning summary",
      misfire: "skip",
      grace_seconds: 300,
      prompt: "Summarize my inbox.",
    });
    expect(def.schedule.expression).toBe("0 8 * * *");
    expect(def.schedule.tz).toBe("Europe/Berlin");
    expect(def.schedule.nextAfter(NOW)).toBe(Date.parse("2026-05-05T06:00:00Z"));
  });

  it("takes a policy and a grace", () => {
    expect(checkRoutineDefinition({ ...good, misfire: "run-once", grace_seconds: 30 }, [], NOW)).toMatchObject({
      misfire: "run-once",
      grace_seconds: 30,
    });
  });

  it.each([
    [
      "a duplicate name (any case)",
      { name: "morning SUMMARY", existing: ["Morning summary"] },
      "already_exists",
      "name: [bot:alice] Morning summary already exists",
    ],
    ["a bad profile", { profile: "Alice" }, "invalid_name", "invalid profile name"],
    ["a blank name", { name: " " }, "invalid_params", "name: is empty"],
    ["a bad schedule", { schedule: "* * *" }, "invalid_params", "schedule: "],
    ["a bad zone", { tz: "Berlin" }, "invalid_params", "tz: "],
    ["a bad policy", { misfire: "catch-up" }, "invalid_params", "misfire: must be one of skip, run-once"],
    ["a bad grace", { grace_seconds: 0 }, "invalid_params", "grace: must be a whole number"],
    ["an empty prompt", { prompt: "" }, "invalid_params", "prompt: is empty"],
    ["a prompt over the limit", { prompt: "p".repeat(16_001) }, "payload_too_large", "prompt: is 16,001 characters"],
  ])("refuses %s", (_what, change, reason, message) => {
    const err = thrownHermesError(() =>
      checkRoutineDefinition(
        { ...good, ...change },
        ["Morning summary"].filter(() => "name" in change),
        NOW,
      ),
    );
    expect(err.reason).toBe(reason);
    expect(err.exitCode).toBe(2);
    expect(err.message).toContain(message);
  });
});
