/**
 * The size and time bounds both ends of a delivery enforce. A sender that checks against them is
 * never refused by a hop further on for a limit it could have known.
 */

/** `message_agent(target, message ≤ 16,000 chars)`. Counted in Unicode code points, so an emoji is one character. */
export const MESSAGE_LIMIT_CHARS = 16_000;

/**
 * The largest envelope the relay stores, as encoded bytes (it tells each gateway in its welcome).
 * 16,000 code points of 4-byte UTF-8 plus the other fields fit well inside; anything larger is
 * refused, never truncated.
 */
export const MAX_ENVELOPE_BYTES = 128 * 1024;

/** Default envelope TTL: a delivery still queued after this long expires with `queued_expired`. */
export const DEFAULT_TTL_SECONDS = 900;

/** Upper bound on a TTL, so a typo cannot park mail for months. */
export const MAX_TTL_SECONDS = 7 * 24 * 3600;

/** Length as a person counts it: code points, not UTF-16 units. */
export function messageLength(message: string): number {
  let count = 0;
  for (const _ of message) count++;
  return count;
}
