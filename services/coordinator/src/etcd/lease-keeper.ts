import type { Etcd3 } from "etcd3";
import { LeaseClock, type LeasePhase, type LeasePolicy, type LeaseStatus, type RenewalTicket } from "../core/lease.js";
import { withTimeout } from "./client.js";

export interface LeaseChange {
  phase: LeasePhase;
  leaseId: string | null;
  /** The lease held before, when it changed (a new grant after the old one was gone). */
  previousLeaseId: string | null;
}

/**
 * Keeps this process's one etcd lease alive, driven by the core's LeaseClock on the monotonic clock:
 * the clock says when to send the next grant or keep-alive and how long the lease may be relied on;
 * this class only does the I/O (one keep-alive stream per attempt, answered or timed out) and reports
 * phase changes. It trusts neither the library's own keep-alive nor its view of lease validity.
 */
export class LeaseKeeper {
  private readonly clock: LeaseClock;
  private timer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private reported: { phase: LeasePhase; leaseId: string | null } = { phase: "unleased", leaseId: null };
  private readonly listeners = new Set<(change: LeaseChange) => void>();
  private stopped = false;
  private attempt: Promise<void> | null = null;
  /** The last grant or keep-alive got no answer from etcd (unreachable, or no majority). */
  private unanswered = false;

  constructor(
    private readonly client: Etcd3,
    policy: LeasePolicy,
    private readonly now: () => number,
    /** Each answered keep-alive: its round trip in seconds (a metric). */
    private readonly renewed: (seconds: number) => void = () => undefined,
  ) {
    this.clock = new LeaseClock(policy, now);
  }

  status(): LeaseStatus {
    return this.clock.status();
  }

  /** Whether etcd answered the last renewal attempt (a lease lost for want of an answer is an unreachable coordinator). */
  etcdAnswering(): boolean {
    return !this.unanswered;
  }

  onChange(listener: (change: LeaseChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The first grant: resolves once a lease is held, rejects (with etcd's error) when the grant fails. */
  async start(): Promise<void> {
    const ticket = this.clock.requestSent();
    const res = await this.client.leaseClient.leaseGrant({ TTL: this.clock.policy.ttlMs / 1000 });
    this.clock.granted(ticket, String(res.ID), Number(res.TTL));
    this.report();
    this.schedule();
  }

  /** Stops renewing and revokes the lease (best effort, bounded): the keys under it vanish at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.deadlineTimer);
    await this.attempt?.catch(() => undefined);
    const { leaseId } = this.clock.status();
    if (leaseId === null) return;
    await this.client.leaseClient.leaseRevoke({ ID: leaseId }).catch(() => undefined);
    this.clock.gone(leaseId);
    this.report();
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    clearTimeout(this.deadlineTimer);
    const now = this.now();
    this.timer = setTimeout(() => void this.renew(), Math.max(0, this.clock.nextAttemptAt() - now));
    const { validUntil, phase } = this.clock.status();
    // Notice the safe deadline passing even while a renewal hangs.
    if (phase === "valid" && validUntil !== null) this.deadlineTimer = setTimeout(() => this.report(), Math.max(0, validUntil - now) + 1);
  }

  private async renew(): Promise<void> {
    if (this.stopped) return;
    const ticket = this.clock.requestSent();
    this.attempt = this.send(ticket);
    await this.attempt;
    this.attempt = null;
    this.report();
    this.schedule();
  }

  private async send(ticket: RenewalTicket): Promise<void> {
    const timeoutMs = this.clock.requestTimeoutMs();
    try {
      if (ticket.leaseId === null) {
        const res = await withTimeout(
          this.client.leaseClient.leaseGrant({ TTL: this.clock.policy.ttlMs / 1000 }),
          timeoutMs,
          () => new Error("lease grant timed out"),
        );
        this.clock.granted(ticket, String(res.ID), Number(res.TTL));
      } else {
        const ttl = await this.keepAliveOnce(ticket.leaseId, timeoutMs);
        this.renewed((this.now() - ticket.sentAt) / 1000);
        if (ttl > 0) this.clock.granted(ticket, ticket.leaseId, ttl);
        else this.clock.gone(ticket.leaseId);
      }
      this.unanswered = false;
    } catch {
      this.unanswered = true;
      this.clock.failed(ticket);
    }
  }

  /** One keep-alive on its own stream: the TTL etcd answers (0: the lease does not exist). */
  private async keepAliveOnce(leaseId: string, timeoutMs: number): Promise<number> {
    const stream = await withTimeout(this.client.leaseClient.leaseKeepAlive(), timeoutMs, () => new Error("keep-alive stream timed out"));
    try {
      const answer = new Promise<number>((resolve, reject) => {
        stream.on("data", (res) => {
          if (String(res.ID) === leaseId) resolve(Number(res.TTL));
        });
        stream.on("error", reject);
        stream.on("end", () => reject(new Error("keep-alive stream ended")));
      });
      stream.write({ ID: leaseId });
      return await withTimeout(answer, timeoutMs, () => new Error("keep-alive timed out"));
    } finally {
      stream.cancel();
    }
  }

  private report(): void {
    const { phase, leaseId } = this.clock.status();
    if (phase === this.reported.phase && leaseId === this.reported.leaseId) return;
    const previousLeaseId = this.reported.leaseId;
    this.reported = { phase, leaseId };
    for (const listener of this.listeners)
      listener({ phase, leaseId, previousLeaseId: previousLeaseId !== leaseId ? previousLeaseId : null });
  }
}
