import { createHash, timingSafeEqual } from "node:crypto";

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

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\./.test(h);
}
