import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import { checkLabel } from "./labels.js";

describe("checkLabel", () => {
  it.each([
    ["Zusammenfassung ☀️", "Zusammenfassung ☀️"],
    ["  Research 🤖 ", "Research 🤖"],
    ["e\u0301t\u00e9", "\u00e9t\u00e9"],
    ["👩‍💻 Dev", "👩‍💻 Dev"],
    ["مرحبا", "مرحبا"],
  ])("accepts non-ASCII text %j (NFC, trimmed; joiners in emoji kept)", (input, stored) => {
    expect(checkLabel(input, "name", 64)).toBe(stored);
  });

  it.each([
    "a\nb",
    "a\u0000b",
    "tab\there",
    "a\u2028b",
    // Text-direction overrides and isolates make a listing show other text than is stored.
    "\u202Eevil.exe",
    "safe\u2066name\u2069",
    "x\u200Fy",
  ])("refuses %j naming the field", (input) => {
    const err = thrownHermesError(() => checkLabel(input, "name", 64));
    expect(err.reason).toBe("invalid_params");
    expect(err.data.field).toBe("name");
    expect(err.message).toMatch(/^name: contains a line break, a control character or a text-direction mark; it must be text of 1-64/);
  });
});
