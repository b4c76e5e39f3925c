import { type IsrPlan, type MaxLag, planIsr, type ReplicaLag, replicaInSync } from "./isr.js";
import { ackingMembers, admitSend, quorumCommit } from "./quorum.js";

export interface AckTrackerOptions {
  authority: string;
  epoch: number;
  /** The room's configured replicas (the authority excluded). */
  replicas: readonly string[];
  minInsync: number;
  maxLag: MaxLag;
  /** The ISR of the record this authority holds. */
  recordedIsr: readonly string[];
  /** Last seq of the log when tracking begins (all of it durable on the authority). */
  logEnd: number;
  /** Acknowledged seq when tracking begins (0 for a new authority: it learns the rest from acks). */
  committed?: number;
  /**
   * The seq a replica outside the recorded ISR must hold before it may join (a new authority: its
   * log end at the claim, which covers every send acknowledged in earlier epochs; acks of this epoch
   * still start from `committed`).
   */
  joinFloor?: number;
  /** Monotonic clock. */
  now: () => number;
}

/**
 * The authority's side of quorum acks for one room in one epoch: its log end, the durable seqs the
 * replicas report, the append time of the recent events (for time lag), the recorded and pending ISR
 * and the acknowledged seq. Pure: it is told what happened and answers what follows.
 */
export class AckTracker {
  readonly authority: string;
  readonly epoch: number;
  private readonly options: AckTrackerOptions;
  private readonly trackingSince: number;
  private logEndSeq: number;
  private authorityDurableSeq: number;
  private committedSeq: number;
  private recorded: string[];
  private pending: string[] | null = null;
  private readonly durable = new Map<string, number>();
  /** Append times of seqs firstTimedSeq, firstTimedSeq+1, …, from index `head`. */
  private appendTimes: number[] = [];
  private head = 0;
  private firstTimedSeq: number;

  constructor(options: AckTrackerOptions) {
    this.options = options;
    this.authority = options.authority;
    this.epoch = options.epoch;
    this.trackingSince = options.now();
    this.logEndSeq = options.logEnd;
    this.authorityDurableSeq = options.logEnd;
    this.committedSeq = options.committed ?? 0;
    this.recorded = [...options.recordedIsr];
    this.firstTimedSeq = options.logEnd + 1;
  }

  /** The authority appended `seq` (the next one); `durable` once it is fsynced (else call `authorityDurable`). */
  appended(seq: number, durable = true): void {
    if (seq !== this.logEndSeq + 1) throw new Error(`append of seq ${seq} after ${this.logEndSeq}: seqs are dense`);
    this.logEndSeq = seq;
    this.appendTimes.push(this.options.now());
    if (durable) this.authorityDurableSeq = seq;
    this.forgetOldAppendTimes();
  }

  authorityDurable(seq: number): void {
    this.authorityDurableSeq = Math.max(this.authorityDurableSeq, Math.min(seq, this.logEndSeq));
  }

  /**
   * A replica reports its durable seq. Reports from another epoch or from a gateway that is not a
   * configured replica are ignored (false); seqs never go backwards and never pass the log end.
   */
  replicaAck(gatewayId: string, epoch: number, durableSeq: number): boolean {
    if (epoch !== this.epoch || !this.options.replicas.includes(gatewayId) || gatewayId === this.authority) return false;
    if (!Number.isSafeInteger(durableSeq) || durableSeq < 0) return false;
    this.durable.set(gatewayId, Math.max(this.durable.get(gatewayId) ?? 0, Math.min(durableSeq, this.logEndSeq)));
    return true;
  }

  /** The acknowledged seq now (it only grows). */
  committed(): number {
    const result = quorumCommit({
      authority: this.authority,
      authorityDurableSeq: this.authorityDurableSeq,
      recorded: this.recorded,
      pending: this.pending,
      minInsync: this.options.minInsync,
      durable: this.durable,
      previous: this.committedSeq,
    });
    this.committedSeq = result.committed;
    return this.committedSeq;
  }

  /** Members an ack waits for, below the authority's durable seq. */
  waitingOn(): string[] {
    return ackingMembers(this.recorded, this.pending)
      .filter((g) => g !== this.authority && (this.durable.get(g) ?? 0) < this.authorityDurableSeq)
      .sort();
  }

  admit(leaseValid: boolean): ReturnType<typeof admitSend> {
    return admitSend({ leaseValid, recordedIsrSize: this.recorded.length, minInsync: this.options.minInsync });
  }

  lagOf(gatewayId: string): ReplicaLag {
    const now = this.options.now();
    const reported = this.durable.get(gatewayId);
    if (reported === undefined) return { events: null, lackingForMs: now - this.trackingSince };
    const events = this.logEndSeq - reported;
    return { events, lackingForMs: events <= 0 ? 0 : now - this.appendedAt(reported + 1) };
  }

  inSync(gatewayId: string): boolean {
    return replicaInSync(this.lagOf(gatewayId), this.options.maxLag);
  }

  /** The next ISR change to write, if any; none while one is being written. */
  planIsr(): IsrPlan {
    if (this.pending !== null) return { kind: "keep" };
    const inSync = new Set(this.options.replicas.filter((r) => this.inSync(r)));
    return planIsr({
      authority: this.authority,
      replicas: this.options.replicas,
      recorded: this.recorded,
      inSync,
      durable: this.durable,
      committed: Math.max(this.committed(), this.options.joinFloor ?? 0),
    });
  }

  /** The change is being written: from now on acks wait for its members too. */
  isrWriting(isr: readonly string[]): void {
    this.pending = [...isr];
  }

  /** The record now holds `isr` (the compare-and-swap succeeded). */
  isrRecorded(isr: readonly string[]): void {
    this.recorded = [...isr];
    this.pending = null;
  }

  /** The write failed: the record still holds the recorded ISR. */
  isrWriteFailed(): void {
    this.pending = null;
  }

  get isr(): { recorded: readonly string[]; pending: readonly string[] | null } {
    return { recorded: this.recorded, pending: this.pending };
  }

  get logEnd(): number {
    return this.logEndSeq;
  }

  durableOf(gatewayId: string): number | null {
    return gatewayId === this.authority ? this.authorityDurableSeq : (this.durable.get(gatewayId) ?? null);
  }

  private appendedAt(seq: number): number {
    if (seq < this.firstTimedSeq) return this.trackingSince;
    return this.appendTimes[this.head + seq - this.firstTimedSeq] ?? this.options.now();
  }

  /** A replica lagging more than max_lag.events is out of sync whatever the time, so older times are not needed. */
  private forgetOldAppendTimes(): void {
    const keep = this.options.maxLag.events + 1;
    const held = this.appendTimes.length - this.head;
    if (held <= keep) return;
    const drop = held - keep;
    this.head += drop;
    this.firstTimedSeq += drop;
    if (this.head > 4096 && this.head * 2 > this.appendTimes.length) {
      this.appendTimes = this.appendTimes.slice(this.head);
      this.head = 0;
    }
  }
}
