import { type ErrorReason, REASONS } from "@hermes/common/pure";
import { DELIVERY_REASONS, type DeliveryReason, isDeliveryReason, RECEIPT_REASONS, REFUSAL_REASONS } from "@hermes/contract";
import { describe, expect, it } from "vitest";
import { classifyProviderError, deliveryReasonFor, type ProviderErrorFacts, type ProviderFailureReason } from "./reasons.js";

type Row = [label: string, facts: ProviderErrorFacts, expected: ProviderFailureReason];

const rows: Row[] = [
  // auth or access
  ["HTTP 401 status alone", { http_status: 401, message: "" }, "provider_auth_or_access"],
  ["HTTP 403 status alone", { http_status: 403, message: "Forbidden" }, "provider_auth_or_access"],
  [
    "OpenAI invalid key body",
    { http_status: 401, code: "invalid_api_key", type: "invalid_request_error", message: "Incorrect API key provided: sk-abc." },
    "provider_auth_or_access",
  ],
  [
    "Anthropic authentication_error type, no status",
    { type: "authentication_error", message: "invalid x-api-key" },
    "provider_auth_or_access",
  ],
  ["permission_error type", { type: "permission_error", message: "Your key lacks access to this model" }, "provider_auth_or_access"],
  ["status in prose form", { message: "Request failed: error code: 401 - unauthorized" }, "provider_auth_or_access"],
  ["HTTP/1.1 403 in text", { message: "upstream said HTTP/1.1 403" }, "provider_auth_or_access"],
  ["expired api key text", { message: "The API key has expired" }, "provider_auth_or_access"],
  ["auth beats a 5xx status (first match wins)", { http_status: 500, message: "Invalid API key" }, "provider_auth_or_access"],
  ["access_terminated code", { code: "access_terminated", message: "account deactivated" }, "provider_auth_or_access"],

  // quota
  ["HTTP 402 status alone", { http_status: 402, message: "" }, "provider_quota_limit"],
  [
    "OpenAI 429 insufficient_quota is quota, not rate limit",
    {
      http_status: 429,
      code: "insufficient_quota",
      message: "You exceeded your current quota, please check your plan and billing details.",
    },
    "provider_quota_limit",
  ],
  [
    "OpenRouter numeric code 402",
    { code: 402, message: "Insufficient credits. Add more using https://openrouter.ai/credits" },
    "provider_quota_limit",
  ],
  ["numeric code given as a string", { code: "402", message: "" }, "provider_quota_limit"],
  ["out of funds", { message: "Your account is out of funds." }, "provider_quota_limit"],
  [
    "credit balance too low",
    { http_status: 400, message: "Your credit balance is too low to access the Anthropic API." },
    "provider_quota_limit",
  ],
  ["insufficient balance", { message: "Insufficient balance" }, "provider_quota_limit"],
  ["quota beats rate limit text", { message: "Quota exceeded: rate limit for requests per day" }, "provider_quota_limit"],

  // rate limit
  ["HTTP 429 status alone", { http_status: 429, message: "" }, "provider_rate_limit"],
  [
    "rate_limit_exceeded code",
    { code: "rate_limit_exceeded", message: "Rate limit reached for gpt-4o in organization org-x on tokens per min" },
    "provider_rate_limit",
  ],
  ["too many requests prose", { message: "Too Many Requests" }, "provider_rate_limit"],
  ["rate-limited spelling", { message: "you are being rate-limited" }, "provider_rate_limit"],
  ["throttled", { message: "Request throttled, slow down" }, "provider_rate_limit"],
  ["status 429 in text", { message: "status code 429 from upstream" }, "provider_rate_limit"],

  // server error
  ["HTTP 500", { http_status: 500, message: "Internal error" }, "provider_server_error"],
  ["HTTP 502", { http_status: 502, message: "" }, "provider_server_error"],
  ["HTTP 503", { http_status: 503, message: "Service Unavailable" }, "provider_server_error"],
  ["HTTP 504", { http_status: 504, message: "" }, "provider_server_error"],
  ["Anthropic 529 overloaded", { http_status: 529, type: "overloaded_error", message: "Overloaded" }, "provider_server_error"],
  ["overloaded text, no status", { message: "The engine is currently overloaded, please try again later" }, "provider_server_error"],
  [
    "server_error type",
    { type: "server_error", message: "The server had an error while processing your request." },
    "provider_server_error",
  ],
  ["bad gateway prose", { message: "502 Bad Gateway" }, "provider_server_error"],
  ["status=503 in text", { message: "upstream status=503" }, "provider_server_error"],
  ["5xx beats context length text", { http_status: 500, message: "context length exceeded" }, "provider_server_error"],

  // context overflow
  [
    "OpenAI context_length_exceeded",
    {
      http_status: 400,
      code: "context_length_exceeded",
      type: "invalid_request_error",
      message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
    },
    "context_overflow",
  ],
  ["Anthropic prompt too long", { http_status: 400, message: "prompt is too long: 210000 tokens > 200000 maximum" }, "context_overflow"],
  ["context window wording", { message: "Input exceeds the model's context window" }, "context_overflow"],
  ["exceeds the maximum context", { message: "request exceeds the maximum context of 8k" }, "context_overflow"],
  ["reduce the length", { message: "Please reduce the length of the messages." }, "context_overflow"],
  ["context overflow before model text", { message: "model gpt-4o: maximum context length is 8192 tokens" }, "context_overflow"],

  // missing config
  ["no provider configured", { message: "No LLM provider configured for profile alice" }, "missing_config"],
  ["no api key configured", { message: "no API key configured: set OPENAI_API_KEY" }, "missing_config"],
  ["api key not set", { message: "API key is not set" }, "missing_config"],
  ["no access token", { message: "No access token found; log in first" }, "missing_config"],
  ["missing_config code", { code: "missing_config", message: "" }, "missing_config"],

  // model unavailable
  [
    "OpenAI 404 model_not_found",
    { http_status: 404, code: "model_not_found", message: "The model `gpt-9` does not exist or you do not have access to it." },
    "model_unavailable",
  ],
  ["model ... not found prose", { message: "model 'llama-9b' not found, try pulling it first" }, "model_unavailable"],
  ["unknown model", { http_status: 400, message: "Unknown model: fake-large-2" }, "model_unavailable"],
  ["invalid model", { message: "invalid model ID" }, "model_unavailable"],
  ["OpenRouter no endpoints", { http_status: 404, message: "No endpoints found for meta/llama-99." }, "model_unavailable"],

  // unknown, including prose that merely mentions the words
  ["empty everything", { message: "" }, "unknown"],
  ["generic 400", { http_status: 400, message: "Invalid request: messages must be an array" }, "unknown"],
  ["bare 404 without a model is not model_unavailable", { http_status: 404, message: "Not Found" }, "unknown"],
  ["a number that is not a status", { message: "processed 500 items and 429 tokens in 401 ms" }, "unknown"],
  ["status-like digits inside a longer number", { message: "error code: 4290" }, "unknown"],
  ["author is not auth", { message: "author field missing from request" }, "unknown"],
  ["quotation is not quota", { message: "unbalanced quotation marks in input" }, "unknown"],
  ["load balancer is not a balance", { message: "load balancer reset the stream" }, "unknown"],
  ["rebalance is not a balance", { message: "shard rebalance in progress" }, "unknown"],
  ["prose mentioning a model that exists", { message: "the model returned an empty tool call" }, "unknown"],
  ["server prose without error", { message: "server closed the stream early" }, "unknown"],
  ["contextual prose without a limit", { message: "missing context in message 3" }, "unknown"],
  ["network failure text", { message: "fetch failed: socket hang up" }, "unknown"],
  ["status outside 1xx-5xx in numeric code", { code: 42, message: "" }, "unknown"],
];

describe("classifyProviderError", () => {
  it.each(rows)("%s", (_label, facts, expected) => {
    expect(classifyProviderError(facts)).toBe(expected);
  });

  it("is case-insensitive", () => {
    expect(classifyProviderError({ message: "RATE LIMIT REACHED" })).toBe("provider_rate_limit");
    expect(classifyProviderError({ message: "Context_Length_Exceeded" })).toBe("context_overflow");
    expect(classifyProviderError({ message: "MODEL_NOT_FOUND" })).toBe("model_unavailable");
  });

  it("classifies every 5xx status as a server error", () => {
    for (let status = 500; status <= 599; status++) {
      expect(classifyProviderError({ http_status: status, message: "x" })).toBe("provider_server_error");
    }
  });

  it("never throws on odd input", () => {
    expect(classifyProviderError({ message: "x", code: null, type: null })).toBe("unknown");
    expect(classifyProviderError({ http_status: Number.NaN, message: "\u0000\u0001" })).toBe("unknown");
  });
});

describe("DELIVERY_REASONS", () => {
  it("lists exactly the twelve delivery reasons, each in the shared REASONS table", () => {
    expect(DELIVERY_REASONS).toHaveLength(12);
    for (const reason of DELIVERY_REASONS) expect(Object.hasOwn(REASONS, reason)).toBe(true);
  });

  it("recognises only its own codes", () => {
    expect(isDeliveryReason("context_overflow")).toBe(true);
    expect(isDeliveryReason("invalid_params")).toBe(false);
    expect(isDeliveryReason(7)).toBe(false);
  });

  it("receipts also keep the two refusal reasons typed (not turn failures, but real ends of a delivery)", () => {
    expect(REFUSAL_REASONS).toEqual(["unknown_target", "idempotency_conflict"]);
    expect(RECEIPT_REASONS).toEqual([...DELIVERY_REASONS, ...REFUSAL_REASONS]);
    for (const reason of REFUSAL_REASONS) {
      expect(isDeliveryReason(reason)).toBe(true);
      expect(Object.hasOwn(REASONS, reason)).toBe(true);
      expect((DELIVERY_REASONS as readonly string[]).includes(reason)).toBe(false);
    }
  });
});

describe("classifyProviderError on arbitrary input", () => {
  it("always returns a provider reason and never throws", async () => {
    const fc = await import("fast-check");
    const providerReasons = new Set(DELIVERY_REASONS);
    fc.assert(
      fc.property(
        fc.record({
          http_status: fc.option(fc.integer({ min: -1000, max: 1000 }), { nil: undefined }),
          code: fc.option(fc.oneof(fc.string(), fc.integer()), { nil: undefined }),
          type: fc.option(fc.string(), { nil: undefined }),
          message: fc.string({ maxLength: 500 }),
        }),
        (facts) => {
          expect(providerReasons.has(classifyProviderError(facts))).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("deliveryReasonFor: an error's reason as the delivery reason its receipt carries", () => {
  // Every reason of the table, so a new reason needs a decision here: a reason a receipt carries
  // stays as it is, a platform error maps to what a calling bot can act on, the rest is unknown.
  const expected: Record<ErrorReason, DeliveryReason> = {
    invalid_params: "unknown",
    invalid_config: "missing_config",
    invalid_name: "unknown",
    payload_too_large: "unknown",
    not_found: "unknown",
    already_exists: "unknown",
    unauthenticated: "provider_auth_or_access",
    refused: "unknown",
    unavailable: "runtime_offline",
    timeout: "delivery_timeout",
    internal: "unknown",
    method_not_found: "unknown",
    database_busy: "unknown",
    database_corrupt: "unknown",
    unsupported_schema: "unknown",
    disk_full: "unknown",
    profile_deleted: "unknown",
    identity_collision: "unknown",
    default_profile: "unknown",
    authority_conflict: "unknown",
    not_authority: "unknown",
    epoch_regression: "unknown",
    replica_gap: "unknown",
    lineage_mismatch: "unknown",
    hash_mismatch: "unknown",
    latest_seq_regression: "unknown",
    replica_quarantined: "unknown",
    room_retired: "unknown",
    room_disbanded: "unknown",
    idempotency_conflict: "idempotency_conflict",
    cursor_conflict: "unknown",
    confirm_required: "unknown",
    limit_exceeded: "unknown",
    discussion_stopped: "unknown",
    provider_auth_or_access: "provider_auth_or_access",
    provider_quota_limit: "provider_quota_limit",
    provider_rate_limit: "provider_rate_limit",
    provider_server_error: "provider_server_error",
    context_overflow: "context_overflow",
    missing_config: "missing_config",
    model_unavailable: "model_unavailable",
    runtime_offline: "runtime_offline",
    queued_expired: "queued_expired",
    delivery_timeout: "delivery_timeout",
    target_busy: "target_busy",
    unknown_target: "unknown_target",
    ambiguous_target: "unknown",
    slot_wait_timeout: "target_busy",
    unknown: "unknown",
    coordinator_unavailable: "unknown",
    not_enough_replicas: "unknown",
    lease_lost: "unknown",
  };
  it.each(Object.entries(expected))("%s → %s", (reason, delivery) => {
    expect(deliveryReasonFor(reason as ErrorReason)).toBe(delivery);
  });
});
