import { describe, expect, it } from "vitest";
import { type ApiFailure, classifyBotApiError, decideSendRetry, redactToken, SEND_MAX_ATTEMPTS } from "./api-failure.js";

describe("Bot API error answers", () => {
  it.each([
    [
      { error_code: 401, description: "Unauthorized" },
      { kind: "unauthorized", message: "401: Unauthorized" },
    ],
    [
      { error_code: 404, description: "Not Found" },
      { kind: "unauthorized", message: "404: Not Found" },
    ],
    [
      { error_code: 409, description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running" },
      { kind: "conflict" },
    ],
    [
      { error_code: 429, description: "Too Many Requests: retry after 7", retry_after: 7 },
      { kind: "rate_limited", retry_after_seconds: 7, message: "429: Too Many Requests: retry after 7" },
    ],
    [{ error_code: 429, description: "Too Many Requests" }, { kind: "rate_limited" }],
    [
      { error_code: 500, description: "Internal Server Error" },
      { kind: "server_error", status: 500 },
    ],
    [
      { error_code: 502, description: "Bad Gateway" },
      { kind: "server_error", status: 502 },
    ],
    [
      { error_code: 400, description: "Bad Request: message is too long" },
      { kind: "bad_request", status: 400 },
    ],
    [
      { error_code: 403, description: "Forbidden: bot was blocked by the user" },
      { kind: "bad_request", status: 403 },
    ],
    [{ description: "odd" }, { kind: "protocol", message: "an error answer without error_code (odd)" }],
    [{ error_code: "429" }, { kind: "protocol" }],
    [{}, { kind: "protocol", message: "an error answer without error_code (no description)" }],
  ] as const)("%j", (facts, expected) => {
    expect(classifyBotApiError(facts)).toMatchObject(expected);
  });

  it("a retry_after that is no sane number is dropped (the back-off applies instead)", () => {
    for (const retry_after of [0, -3, Number.NaN, "5", 10 ** 9]) {
      expect(classifyBotApiError({ error_code: 429, retry_after })).not.toHaveProperty("retry_after_seconds");
    }
  });
});

describe("token redaction", () => {
  const token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
  it.each([
    [
      `request to http://127.0.0.1:4444/bot${token}/getUpdates failed, reason: socket hang up`,
      "request to http://127.0.0.1:4444/bot<redacted>/getUpdates failed, reason: socket hang up",
    ],
    [
      `invalid json response body at https://api.telegram.org/bot${token}/sendMessage reason: Unexpected token <`,
      "invalid json response body at https://api.telegram.org/bot<redacted>/sendMessage reason: Unexpected token <",
    ],
    [`token ${token} leaked`, "token <redacted> leaked"],
    ["nothing secret here", "nothing secret here"],
  ])("%s", (text, expected) => {
    expect(redactToken(text, token)).toBe(expected);
  });

  it("also catches a token it was not told about (another bot's, in a path or bare)", () => {
    const other = "987654321:ZZZdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
    expect(redactToken(`GET /bot${other}/getMe and ${other}`, token)).toBe("GET /bot<redacted>/getMe and <redacted>");
  });
});

describe("send retries", () => {
  const random = () => 0.5;
  const fail = (f: ApiFailure, attempt = 1, entities = false) => decideSendRetry(f, attempt, entities, random);

  it("honours retry_after, and drops a reply Telegram wants delayed more than five minutes", () => {
    expect(fail({ kind: "rate_limited", message: "", retry_after_seconds: 3 })).toEqual({
      retry: true,
      delay_ms: 3000,
      without_entities: false,
    });
    expect(fail({ kind: "rate_limited", message: "", retry_after_seconds: 301 })).toEqual({ retry: false });
    expect(fail({ kind: "rate_limited", message: "" })).toEqual({ retry: true, delay_ms: 1000, without_entities: false });
  });

  it("backs off on 5xx and network errors, growing, up to the attempt limit", () => {
    expect(fail({ kind: "server_error", message: "", status: 502 }, 1)).toMatchObject({ retry: true, delay_ms: 1000 });
    expect(fail({ kind: "network", message: "" }, 3)).toMatchObject({ retry: true, delay_ms: 4000 });
    expect(fail({ kind: "network", message: "" }, SEND_MAX_ATTEMPTS)).toEqual({ retry: false });
  });

  it("a 400 about entities is retried at once as plain text; other 4xx and 401/409 are not retried", () => {
    const entities: ApiFailure = {
      kind: "bad_request",
      message: "400: Bad Request: can't parse entities: unsupported start tag",
      status: 400,
    };
    expect(fail(entities, 1, true)).toEqual({ retry: true, delay_ms: 0, without_entities: true });
    expect(fail(entities, 1, false)).toEqual({ retry: false });
    expect(fail({ kind: "bad_request", message: "403: Forbidden: bot was blocked by the user", status: 403 }, 1, true)).toEqual({
      retry: false,
    });
    expect(fail({ kind: "unauthorized", message: "" })).toEqual({ retry: false });
    expect(fail({ kind: "conflict", message: "" })).toEqual({ retry: false });
  });
});
