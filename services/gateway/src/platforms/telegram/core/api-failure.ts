import { type BackoffOptions, backoffDelayMs } from "@hermes/common/pure";

/**
 * A failed Bot API call, typed by what the caller does about it: wait `retry_after` (429), step
 * aside for another poller (409), stop and tell the operator (401/404), back off (5xx, network,
 * an answer that is not the Bot API's), or give up on this one request (other 4xx).
 */
export type ApiFailure =
  | { kind: "rate_limited"; message: string; retry_after_seconds?: number | undefined }
  | { kind: "conflict"; message: string }
  | { kind: "unauthorized"; message: string }
  | { kind: "server_error"; message: string; status: number }
  | { kind: "network"; message: string }
  | { kind: "protocol"; message: string }
  | { kind: "bad_request"; message: string; status: number };

export type ApiFailureKind = ApiFailure["kind"];

/** What a Bot API error answer says (`{ok: false, error_code, description, parameters}`), untrusted. */
export interface BotApiErrorFacts {
  error_code?: unknown;
  description?: unknown;
  retry_after?: unknown;
}

/** Longest wait a 429 may ask for before the number is treated as garbage (setTimeout overflows near 24.8 days). */
const MAX_RETRY_AFTER_SECONDS = 24 * 3600;

export function classifyBotApiError(facts: BotApiErrorFacts): ApiFailure {
  const status = typeof facts.error_code === "number" && Number.isInteger(facts.error_code) ? facts.error_code : undefined;
  const description = typeof facts.description === "string" && facts.description.length > 0 ? facts.description : "no description";
  const message = `${status ?? "?"}: ${description}`;
  if (status === undefined) return { kind: "protocol", message: `an error answer without error_code (${description})` };
  if (status === 401 || status === 404) return { kind: "unauthorized", message };
  if (status === 409) return { kind: "conflict", message };
  if (status === 429) {
    const after = facts.retry_after;
    const valid = typeof after === "number" && Number.isFinite(after) && after > 0 && after <= MAX_RETRY_AFTER_SECONDS;
    return { kind: "rate_limited", message, ...(valid ? { retry_after_seconds: after } : {}) };
  }
  if (status >= 500 && status <= 599) return { kind: "server_error", message, status };
  return { kind: "bad_request", message, status };
}

const REDACTED = "<redacted>";

/**
 * Removes a bot token from text meant for logs, status or error messages. HTTP client errors quote
 * the request URL, and the Bot API puts the token in the path (`/bot<token>/getUpdates`), so both
 * the known token and anything shaped like one or sitting in a `/bot…/` path segment are replaced.
 */
export function redactToken(text: string, token?: string): string {
  let out = token && token.length > 0 ? text.split(token).join(REDACTED) : text;
  out = out.replace(/\/bot[^/\s?#]+/g, `/bot${REDACTED}`);
  return out.replace(/\b[0-9]{5,20}:[A-Za-z0-9_-]{30,}/g, REDACTED);
}

/** The back-off of a failed send (5xx, network); 429s wait what Telegram says. */
export const SEND_BACKOFF: BackoffOptions = { initialMs: 1000, maxMs: 30_000, multiplier: 2, jitter: 0.2 };
/** Attempts of one message, the first included. */
export const SEND_MAX_ATTEMPTS = 4;
/** A reply that Telegram wants delayed longer than this is dropped rather than sent out of context. */
export const SEND_MAX_RETRY_AFTER_SECONDS = 300;

export type SendRetry = { retry: false } | { retry: true; delay_ms: number; without_entities: boolean };

/**
 * Whether to send one message again after `failure` on attempt number `attempt` (1 for the first).
 * Network errors are retried although the message may have arrived: in a chat a rare duplicate
 * beats a lost answer. A 400 about entities is retried once as plain text, so a formatting slip
 * never loses the reply.
 */
export function decideSendRetry(failure: ApiFailure, attempt: number, hasEntities: boolean, random: () => number): SendRetry {
  if (attempt >= SEND_MAX_ATTEMPTS) return { retry: false };
  switch (failure.kind) {
    case "rate_limited": {
      const seconds = failure.retry_after_seconds;
      if (seconds !== undefined && seconds > SEND_MAX_RETRY_AFTER_SECONDS) return { retry: false };
      const delay = seconds !== undefined ? seconds * 1000 : backoffDelayMs(attempt - 1, { ...SEND_BACKOFF, random });
      return { retry: true, delay_ms: delay, without_entities: false };
    }
    case "server_error":
    case "network":
      return { retry: true, delay_ms: backoffDelayMs(attempt - 1, { ...SEND_BACKOFF, random }), without_entities: false };
    case "bad_request":
      return hasEntities && /entit/i.test(failure.message) ? { retry: true, delay_ms: 0, without_entities: true } : { retry: false };
    default:
      return { retry: false };
  }
}
