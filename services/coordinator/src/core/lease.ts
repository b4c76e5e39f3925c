import { HermesError } from "@hermes/common/pure";

/**
 * Lease arithmetic on a monotonic clock.
 *
 * etcd restarts a lease's TTL when it processes a grant or keep-alive, which is always after this
 * process sent the request. So a lease granted (or renewed) by a request sent at monotonic time t0
 * with TTL T lives on the server until at least t0 + T. This process treats it as valid only until
 * t0 + T·(1 − margin): the margin absorbs clock-rate drift between the two machines, and a claimant
 * elsewhere acts only after etcd itself has expired the lease. The state reads nothing but the
 * injected monotonic clock, so a jump of the wall clock changes nothing; a paused process (SIGSTOP,
 * GC, VM freeze) finds its deadline passed when it resumes and acks nothing.
 */

export interface LeasePolicy {
  ttlMs: number;
  /** Fraction of the TTL held back from the validity window, in [0.05, 0.5]. */
  safetyMargin: number;
}

export const DEFAULT_SAFETY_MARGIN = 0.2;
/** A healthy lease is renewed every third of its TTL, so two renewals can fail before it is at risk. */
export const RENEWALS_PER_TTL = 3;

export function leasePolicy(ttlSeconds: number, safetyMargin = DEFAULT_SAFETY_MARGIN): LeasePolicy {
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > 3600) {
    throw new HermesError("invalid_config", `invalid coordinator lease TTL ${ttlSeconds}: a whole number of seconds from 1 to 3600`, {
      data: { lease_ttl_seconds: ttlSeconds },
    });
  }
  if (!Number.isFinite(safetyMargin) || safetyMargin < 0.05 || safetyMargin > 0.5) {
    throw new HermesError("invalid_config", `invalid lease safety margin ${safetyMargin}: a fraction of the TTL from 0.05 to 0.5`, {
      data: { safety_margin: safetyMargin },
    });
  }
  return { ttlMs: ttlSeconds * 1000, safetyMargin };
}

/** The last monotonic instant at which a lease granted by a request sent at `requestSentAt` may be relied on. */
export function safeDeadline(requestSentAt: number, grantedTtlMs: number, safetyMargin: number): number {
  return requestSentAt + grantedTtlMs * (1 - safetyMargin);
}

/**
 * - `unleased`: no lease (before the first grant, or etcd said the lease is gone);
 * - `valid`: the lease may be relied on until `validUntil`;
 * - `lost`: a lease id is held but its safe deadline passed without a renewal (self-fenced). A later
 *   renewal of the same lease makes it valid again; etcd saying it is gone makes it `unleased`.
 */
export type LeasePhase = "unleased" | "valid" | "lost";

export interface LeaseStatus {
  phase: LeasePhase;
  leaseId: string | null;
  /** Monotonic deadline of validity, null without a lease. */
  validUntil: number | null;
  /** Milliseconds of validity left (0 unless valid). */
  remainingMs: number;
}

/** What a request carries from send to answer: the lease it concerns and when it was sent. */
export interface RenewalTicket {
  /** null for a grant of a new lease. */
  leaseId: string | null;
  sentAt: number;
}

export class LeaseClock {
  private leaseId: string | null = null;
  private validUntil: number | null = null;
  /** Send time of the request behind the current validity (renewals are scheduled from it). */
  private grantedFrom: number | null = null;
  private nextAttempt: number;
  private failuresInRow = 0;

  constructor(
    readonly policy: LeasePolicy,
    private readonly now: () => number,
  ) {
    this.nextAttempt = now();
  }

  status(): LeaseStatus {
    if (this.leaseId === null || this.validUntil === null) return { phase: "unleased", leaseId: null, validUntil: null, remainingMs: 0 };
    const remainingMs = Math.max(0, this.validUntil - this.now());
    return { phase: remainingMs > 0 ? "valid" : "lost", leaseId: this.leaseId, validUntil: this.validUntil, remainingMs };
  }

  isValid(): boolean {
    return this.status().phase === "valid";
  }

  /** Call right before sending a grant (no lease yet) or a keep-alive: the ticket's time is the one that counts. */
  requestSent(): RenewalTicket {
    return { leaseId: this.leaseId, sentAt: this.now() };
  }

  /**
   * etcd granted or renewed `leaseId` for `ttlSeconds` in answer to `ticket`. A late answer to an older
   * request never shortens the validity; an answer about another lease than the one held is ignored.
   */
  granted(ticket: RenewalTicket, leaseId: string, ttlSeconds: number): void {
    if (ticket.leaseId !== null && ticket.leaseId !== this.leaseId) return;
    if (ticket.leaseId === null && this.leaseId !== null && this.leaseId !== leaseId) return;
    if (!(ttlSeconds > 0)) {
      this.gone(leaseId);
      return;
    }
    const deadline = safeDeadline(ticket.sentAt, ttlSeconds * 1000, this.policy.safetyMargin);
    this.leaseId = leaseId;
    if (this.validUntil === null || deadline > this.validUntil) {
      this.validUntil = deadline;
      this.grantedFrom = ticket.sentAt;
    }
    this.failuresInRow = 0;
    this.nextAttempt = (this.grantedFrom ?? ticket.sentAt) + Math.floor((ttlSeconds * 1000) / RENEWALS_PER_TTL);
  }

  /** The request got no answer (etcd unreachable, timeout). The lease keeps its deadline; retry soon. */
  failed(_ticket: RenewalTicket): void {
    this.failuresInRow += 1;
    this.nextAttempt = this.now() + this.retryDelayMs();
  }

  /** etcd answered that the lease does not exist (expired or revoked): everything bound to it is gone. */
  gone(leaseId: string): void {
    if (this.leaseId !== null && leaseId !== this.leaseId) return;
    this.leaseId = null;
    this.validUntil = null;
    this.grantedFrom = null;
    this.nextAttempt = this.now();
  }

  /** Monotonic time of the next grant or keep-alive attempt. */
  nextAttemptAt(): number {
    return this.nextAttempt;
  }

  /** How long to wait for an answer before counting the attempt failed. */
  requestTimeoutMs(): number {
    return Math.max(100, Math.floor(this.policy.ttlMs / 4));
  }

  /** Failed attempts since the last success. */
  get failures(): number {
    return this.failuresInRow;
  }

  private retryDelayMs(): number {
    return Math.max(50, Math.floor(this.policy.ttlMs / 10));
  }
}
