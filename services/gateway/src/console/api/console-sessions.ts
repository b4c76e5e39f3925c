import { createHash, randomBytes } from "node:crypto";
import { type Clock, isoTime } from "@hermes/common";

/** How long a console login lasts (absolute: no sliding renewal). */
export const SESSION_LIFETIME_MS = 12 * 60 * 60 * 1000;
/** How long a one-time login link (`hermes up`, `hermes console link`) can be used. */
export const LOGIN_LINK_LIFETIME_MS = 10 * 60 * 1000;
/** Live sessions kept at most; the oldest is dropped first. */
const MAX_SESSIONS = 1000;
const MAX_LOGIN_LINKS = 100;

/** A secret and when it stops working. */
export interface IssuedSecret {
  token: string;
  expires_at: string;
}

/** Entries by the SHA-256 of their token: the token itself is never kept, and a lookup reveals nothing by its timing. */
class ExpiringTokens {
  private readonly expiries = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly lifetimeMs: number,
    private readonly max: number,
  ) {}

  private static digest(token: string): string {
    return createHash("sha256").update(token).digest("hex");
  }

  issue(): IssuedSecret {
    this.sweep();
    while (this.expiries.size >= this.max) this.expiries.delete(this.expiries.keys().next().value!);
    const token = randomBytes(32).toString("base64url");
    const expires = this.clock.now() + this.lifetimeMs;
    this.expiries.set(ExpiringTokens.digest(token), expires);
    return { token, expires_at: isoTime(expires) };
  }

  /** Whether the token is live; `consume` ends it at the same time (single use). */
  check(token: string, consume = false): boolean {
    const key = ExpiringTokens.digest(token);
    const expires = this.expiries.get(key);
    if (expires === undefined) return false;
    if (consume || expires <= this.clock.now()) this.expiries.delete(key);
    return expires > this.clock.now();
  }

  end(token: string): void {
    this.expiries.delete(ExpiringTokens.digest(token));
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [key, expires] of this.expiries) if (expires <= now) this.expiries.delete(key);
  }
}

/**
 * The console's server-side sessions and one-time login links, in memory: a gateway restart logs
 * every console out (the operator logs in again with the key). Tokens are 256 random bits.
 */
export class ConsoleSessions {
  private readonly sessions: ExpiringTokens;
  private readonly loginLinks: ExpiringTokens;

  constructor(clock: Clock) {
    this.sessions = new ExpiringTokens(clock, SESSION_LIFETIME_MS, MAX_SESSIONS);
    this.loginLinks = new ExpiringTokens(clock, LOGIN_LINK_LIFETIME_MS, MAX_LOGIN_LINKS);
  }

  /** A new session (after a login with the key or a login link). */
  open(): IssuedSecret {
    return this.sessions.issue();
  }

  isLive(token: string): boolean {
    return this.sessions.check(token);
  }

  close(token: string): void {
    this.sessions.end(token);
  }

  /** A login link's token: good for one login within LOGIN_LINK_LIFETIME_MS. */
  issueLoginLink(): IssuedSecret {
    return this.loginLinks.issue();
  }

  /** Uses up a login link's token; true when it was live. */
  redeemLoginLink(token: string): boolean {
    return this.loginLinks.check(token, true);
  }
}
