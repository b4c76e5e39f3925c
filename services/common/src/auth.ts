import { createHash, timingSafeEqual } from "node:crypto";
import { type ErrorReason, HermesError } from "./pure/errors.js";

/**
 * Constant-time comparison of two secrets. Both sides are hashed first so neither the length nor
 * the position of the first differing byte leaks through timing.
 */
export function secretsEqual(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The key from an `Authorization: Bearer <key>` value, or undefined. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (typeof value !== "string") return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(value);
  return match?.[1];
}

/** Accepts a request when it presents any of the configured keys. No keys configured: open. */
export class KeyRing {
  constructor(private readonly keys: readonly string[]) {}

  get required(): boolean {
    return this.keys.length > 0;
  }

  accepts(presented: string | undefined): boolean {
    if (!this.required) return true;
    if (presented === undefined) return false;
    let ok = false;
    // Compare against every key so the time does not depend on which one matched.
    for (const key of this.keys) ok = secretsEqual(presented, key) || ok;
    return ok;
  }
}

export const API_KEY_MIN_CHARS = 16;
export const API_KEY_MAX_CHARS = 4096;

/**
 * The one rule for an API key, wherever it comes from (`gateway.api_key`, `API_SERVER_KEY`, a peer's
 * key): 16-4096 visible ASCII characters, no quotes. A key travels as `authorization: Bearer KEY`,
 * where a space, a control character or non-ASCII text can never arrive intact, and it is kept in
 * .env files, where surrounding quotes are stripped. Returns what is wrong (never the key), or
 * undefined when it is fine.
 */
export function apiKeyProblem(key: string): string | undefined {
  if (/[\s\x00-\x1f\x7f]/.test(key)) {
    return "contains whitespace or a control character, so it could never match what a client sends (authorization: Bearer KEY); remove it";
  }
  if (/[^\x21-\x7e]/.test(key)) return "contains a non-ASCII character, which cannot travel in an authorization header; use ASCII only";
  if (/["'`]/.test(key)) return "contains a quote character; use letters, digits and punctuation other than quotes";
  if (key.length < API_KEY_MIN_CHARS) {
    return `is ${key.length} character${key.length === 1 ? "" : "s"} long; at least ${API_KEY_MIN_CHARS} are needed (e.g. openssl rand -hex 24)`;
  }
  if (key.length > API_KEY_MAX_CHARS) return `is ${key.length} characters long; at most ${API_KEY_MAX_CHARS} are allowed`;
  return undefined;
}

/** Throws (with `reason`, naming `source` but never showing the key) when the key breaks the rule of apiKeyProblem. */
export function assertApiKey(key: string, source: string, reason: ErrorReason = "invalid_config"): string {
  const problem = apiKeyProblem(key);
  if (problem) throw new HermesError(reason, `${source} ${problem}`, { data: { key_source: source } });
  return key;
}
