import { describe, expect, it } from "vitest";
import { REASONS } from "./errors.js";
import {
  DELIVERY_REASONS,
  isDeliveryReason,
  isReceiptState,
  isTerminal,
  RECEIPT_REASONS,
  RECEIPT_STATES,
  REFUSAL_REASONS,
  TERMINAL_STATES,
  toReceiptReason,
} from "./receipts.js";

describe("receipt states", () => {
  it("are the seven documented states, in lifecycle order", () => {
    expect(RECEIPT_STATES).toEqual(["queued", "claimed", "settled", "failed", "cancelled", "expired", "ambiguous"]);
  });

  const table: [string, boolean, boolean][] = [
    ["queued", true, false],
    ["claimed", true, false],
    ["settled", true, true],
    ["failed", true, true],
    ["cancelled", true, true],
    ["expired", true, true],
    ["ambiguous", true, true],
    ["done", false, false],
    ["", false, false],
    ["Settled", false, false],
  ];
  it.each(table)("%s: a state %s, terminal %s", (state, known, terminal) => {
    expect(isReceiptState(state)).toBe(known);
    expect(isTerminal(state)).toBe(terminal);
  });

  it("every terminal state is a state", () => {
    for (const state of TERMINAL_STATES) expect(RECEIPT_STATES).toContain(state);
  });
});

describe("receipt reasons", () => {
  it("are the twelve delivery reasons plus the two refusals, each with an exit code", () => {
    expect(DELIVERY_REASONS).toHaveLength(12);
    expect(RECEIPT_REASONS).toEqual([...DELIVERY_REASONS, ...REFUSAL_REASONS]);
    for (const reason of RECEIPT_REASONS) expect(Object.hasOwn(REASONS, reason)).toBe(true);
  });

  const table: [string, string][] = [
    ["provider_rate_limit", "provider_rate_limit"],
    ["queued_expired", "queued_expired"],
    ["unknown_target", "unknown_target"],
    ["idempotency_conflict", "idempotency_conflict"],
    ["unavailable", "unknown"],
    ["a_reason_from_a_newer_build", "unknown"],
    ["", "unknown"],
  ];
  it.each(table)("a receipt read with reason %j carries %s", (sent, kept) => {
    expect(toReceiptReason(sent)).toBe(kept);
    expect(isDeliveryReason(sent)).toBe(sent === kept);
  });
});
