import { HermesError } from "@hermes/common";
import { describe, expect, it } from "vitest";
import { ProviderError } from "../../agents/core/provider.js";
import { attemptFailure } from "./failure.js";

describe("attemptFailure", () => {
  it("keeps a provider error's own reason and text", () => {
    const e = new ProviderError("provider_quota_limit", "openai HTTP 429: You exceeded your current quota", {
      provider: "openai",
      http_status: 429,
    });
    expect(attemptFailure(e)).toEqual({ reason: "provider_quota_limit", error: e.message, cancelled: false, effects: 0 });
  });

  it("appends the raw body to an unknown provider failure so the provider's text is kept", () => {
    const e = new ProviderError("unknown", "openai answered with an unexpected shape (choices: no choices)", {
      provider: "openai",
      raw: '{"id":"x","choices":[]}',
    });
    expect(attemptFailure(e).error).toBe(`${e.message}; the provider said: {"id":"x","choices":[]}`);
  });

  it.each([
    ["slot_wait_timeout", "target_busy"],
    ["invalid_config", "missing_config"],
    ["unavailable", "runtime_offline"],
    ["timeout", "delivery_timeout"],
    ["unauthenticated", "provider_auth_or_access"],
    ["not_found", "unknown"],
    ["internal", "unknown"],
  ] as const)("maps the platform error %s to %s", (from, to) => {
    expect(attemptFailure(new HermesError(from, "x")).reason).toBe(to);
  });

  it.each(["unknown_target", "idempotency_conflict"] as const)("keeps the refusal %s typed, with its text", (reason) => {
    const e = new HermesError(reason, "the relay said so", { data: { connection: "b" } });
    expect(attemptFailure(e)).toEqual({ reason, error: "the relay said so", cancelled: false, effects: 0 });
  });

  it("reports cancellation and the side effects a failed turn already had", () => {
    expect(attemptFailure(new ProviderError("unknown", "cancelled", { provider: "p", cancelled: true })).cancelled).toBe(true);
    expect(attemptFailure(new HermesError("provider_server_error", "x", { data: { tool_effects: 2 } })).effects).toBe(2);
    expect(attemptFailure(new Error("boom"))).toMatchObject({ reason: "unknown", error: "boom" });
  });
});
