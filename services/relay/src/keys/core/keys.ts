import { createHash } from "node:crypto";

/** Prefix of every connection key, so a leaked key is recognisable in logs and secret scanners. */
export const KEY_PREFIX = "hrk_";
const KEY_BYTES = 32;

/**
 * A new connection key: the prefix and 256 random bits, base64url. Randomness comes in as a
 * function so the core stays deterministic under test.
 */
export function newConnectionKey(randomBytes: (n: number) => Buffer): string {
  return KEY_PREFIX + randomBytes(KEY_BYTES).toString("base64url");
}

/**
 * What the relay stores instead of the key. Keys carry 256 random bits, so a plain SHA-256 is
 * enough: there is nothing to brute-force, and a fast hash keeps every reconnect cheap.
 */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}
