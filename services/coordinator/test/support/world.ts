/**
 * The world behind the coordinator's scenario scripts (testdata/*.txt): one fake monotonic clock,
 * a lease clock per gateway, one room's authority record with a `mod_revision` (a stand-in for the
 * etcd key, written only by compare-and-swap) and the authority's ack tracker. See README.md.
 */
import { AckTracker } from "../../src/core/ack-tracker.js";
import { type ClaimMode, changeIsr, decideClaim, releaseRecord } from "../../src/core/authority.js";
import type { AuthorityRecord } from "../../src/core/authority-record.js";
import type { Refusal } from "../../src/core/decision.js";
import { type IsrPlan, maxLag } from "../../src/core/isr.js";
import { LeaseClock, leasePolicy, type RenewalTicket } from "../../src/core/lease.js";

export interface Directive {
  command: string;
  positional: string[];
  named: Map<string, string>;
}

interface Gateway {
  id: string;
  lease: LeaseClock;
  tickets: RenewalTicket[];
  /** The record as this gateway last read it: its next decision and compare-and-swap use it. */
  read: StoredRecord | null;
  /** Highest epoch in its durable state. */
  maxEpoch: number;
}

interface StoredRecord {
  record: AuthorityRecord;
  modRevision: number;
}

const MODES = new Set<ClaimMode>(["automatic", "promote", "promote_unclean"]);

export class CoordinationWorld {
  private time = 0;
  private readonly gateways = new Map<string, Gateway>();
  /** etcd's leases: when each expires on the server (TTL restarted whenever etcd handles a grant or keep-alive). */
  private readonly serverLeases = new Map<string, number>();
  private stored: StoredRecord | null = null;
  private revision = 0;
  private tracker: AckTracker | null = null;
  private replicas: string[] = [];
  private minInsync = 1;
  private lagLimit = maxLag(1000, 10_000);

  run(d: Directive): string {
    switch (d.command) {
      case "at":
        this.time = int(d.positional[0], "time");
        return `t=${this.time}`;
      case "lease":
        return this.newLease(d);
      case "keepalive":
        return this.keepAlive(d);
      case "answer":
        return this.answer(d);
      case "no-answer": {
        const gw = this.gateway(d.positional[0]);
        gw.lease.failed(this.takeTicket(gw));
        return this.describeLease(gw);
      }
      case "status":
        return this.describeLease(this.gateway(d.positional[0]));
      case "revoke": {
        const leaseId = need(d.positional[0], "lease id");
        this.serverLeases.delete(leaseId);
        return `etcd: lease ${leaseId} revoked`;
      }
      case "record":
        return this.putRecord(d);
      case "read": {
        const gw = this.gateway(d.positional[0]);
        gw.read = this.stored;
        return `${gw.id} read ${this.describeRecord()}`;
      }
      case "claim":
        return this.claim(d);
      case "release":
        return this.release(d);
      case "room":
        return this.newRoom(d);
      case "append":
        return this.append(d);
      case "ack":
        return this.ack(d);
      case "commit":
        return this.describeCommit();
      case "lag":
        return this.describeLag(need(d.positional[0], "gateway"));
      case "plan-isr":
        return this.planIsr();
      case "isr-written":
        return this.isrWritten();
      case "isr-write-failed":
        this.roomTracker().isrWriteFailed();
        return `write failed; isr ${this.describeIsr()}`;
      case "send":
        return this.send();
      default:
        throw new Error(`unknown command ${JSON.stringify(d.command)}`);
    }
  }

  /** Invariants checked after every step. */
  violations(): string[] {
    const broken: string[] = [];
    // Every acknowledged send is durable on every gateway the record lists (or is about to list) as in sync:
    // whichever of them wins a failover holds it.
    if (this.tracker) {
      const committed = this.tracker.committed();
      const { recorded, pending } = this.tracker.isr;
      for (const g of new Set([...recorded, ...(pending ?? [])])) {
        const durable = this.tracker.durableOf(g) ?? 0;
        if (durable < committed) broken.push(`acknowledged seq ${committed} is not durable on ISR member ${g} (durable ${durable})`);
      }
    }
    // A gateway never relies on a lease that etcd has already expired.
    for (const gw of this.gateways.values()) {
      const s = gw.lease.status();
      if (s.phase === "valid" && s.leaseId !== null && !this.leaseAlive(s.leaseId)) {
        broken.push(`${gw.id} relies on lease ${s.leaseId}, which etcd expired`);
      }
    }
    return broken;
  }

  private newLease(d: Directive): string {
    const id = need(d.positional[0], "gateway");
    const policy = leasePolicy(int(d.named.get("ttl") ?? "2", "ttl"), Number(d.named.get("margin") ?? "0.2"));
    const gw: Gateway = {
      id,
      lease: new LeaseClock(policy, () => this.time),
      tickets: [],
      read: null,
      maxEpoch: int(d.named.get("epoch") ?? "0", "epoch"),
    };
    this.gateways.set(id, gw);
    return `${id}: ttl=${policy.ttlMs}ms margin=${policy.safetyMargin}; ${this.describeLease(gw)}`;
  }

  private keepAlive(d: Directive): string {
    const gw = this.gateway(d.positional[0]);
    const ticket = gw.lease.requestSent();
    gw.tickets.push(ticket);
    return `${gw.id} sends ${ticket.leaseId === null ? "a grant request" : `a keep-alive of lease ${ticket.leaseId}`} at t=${ticket.sentAt}`;
  }

  private answer(d: Directive): string {
    const gw = this.gateway(d.positional[0]);
    const ticket = d.positional[1] === "newest" ? gw.tickets.pop() : gw.tickets.shift();
    if (!ticket) throw new Error(`${gw.id} has no request in flight`);
    const leaseId = d.named.get("lease") ?? ticket.leaseId ?? need(undefined, "lease=");
    const ttl = int(d.named.get("ttl") ?? "2", "ttl");
    // etcd handles the request now (after it was sent) and restarts the TTL from now.
    const handledAt = int(d.named.get("handled_at") ?? String(this.time), "handled_at");
    if (ticket.leaseId !== null && !this.leaseAlive(leaseId, handledAt)) {
      gw.lease.gone(leaseId);
      return `etcd: lease ${leaseId} not found; ${this.describeLease(gw)}`;
    }
    this.serverLeases.set(leaseId, handledAt + ttl * 1000);
    gw.lease.granted(ticket, leaseId, ttl);
    return this.describeLease(gw);
  }

  private leaseAlive(leaseId: string, at = this.time): boolean {
    const expiresAt = this.serverLeases.get(leaseId);
    return expiresAt !== undefined && at < expiresAt;
  }

  private takeTicket(gw: Gateway): RenewalTicket {
    const ticket = gw.tickets.shift();
    if (!ticket) throw new Error(`${gw.id} has no request in flight`);
    return ticket;
  }

  private describeLease(gw: Gateway): string {
    const s = gw.lease.status();
    const next = `next attempt at t=${gw.lease.nextAttemptAt()}`;
    if (s.phase === "unleased") return `${gw.id}: unleased; ${next}`;
    return `${gw.id}: ${s.phase} lease ${s.leaseId} until t=${s.validUntil} (${s.remainingMs} ms left); ${next}`;
  }

  private putRecord(d: Directive): string {
    const lease = d.named.get("lease") ?? "null";
    const record: AuthorityRecord = {
      gateway_id: need(d.named.get("gateway"), "gateway="),
      epoch: int(d.named.get("epoch"), "epoch="),
      isr: need(d.named.get("isr"), "isr=").split(","),
      replicas: (d.named.get("replicas") ?? need(d.named.get("isr"), "isr=")).split(","),
      min_insync: Number(d.named.get("min_insync") ?? 1),
      lease: lease === "null" ? null : lease,
    };
    this.write(record);
    return this.describeRecord();
  }

  private write(record: AuthorityRecord): void {
    this.revision += 1;
    this.stored = { record, modRevision: this.revision };
  }

  private describeRecord(): string {
    if (!this.stored) return "no record";
    const { record, modRevision } = this.stored;
    const alive = record.lease !== null && this.leaseAlive(record.lease) ? "alive" : "dead";
    return `record ${record.gateway_id}@${record.epoch} isr=[${record.isr.join(",")}] lease=${record.lease ?? "none"} (${alive}) rev=${modRevision}`;
  }

  /** What the gateway decides on: the record it read (consumed by the next write), else the current one. */
  private recordSeenBy(gw: Gateway): StoredRecord | null {
    return gw.read ?? this.stored;
  }

  /** A compare-and-swap on the revision of the record the gateway decided on. */
  private cas(gw: Gateway, record: AuthorityRecord): string | null {
    const expected = this.recordSeenBy(gw)?.modRevision ?? 0;
    gw.read = null;
    if ((this.stored?.modRevision ?? 0) !== expected)
      return `cas failed: expected rev=${expected}, found rev=${this.stored?.modRevision ?? 0}`;
    this.write(record);
    gw.maxEpoch = Math.max(gw.maxEpoch, record.epoch);
    return null;
  }

  private claim(d: Directive): string {
    const gw = this.gateway(d.positional[0]);
    const mode = (d.named.get("mode") ?? "automatic") as ClaimMode;
    if (!MODES.has(mode)) throw new Error(`unknown mode ${mode}`);
    const lease = gw.lease.status();
    if (lease.phase !== "valid" || lease.leaseId === null) return `${gw.id} cannot claim: its own lease is ${lease.phase}`;
    const record = this.recordSeenBy(gw)?.record ?? null;
    const decision = decideClaim({
      self: gw.id,
      selfLease: lease.leaseId,
      mode,
      record,
      recordLeaseAlive: record?.lease != null && this.leaseAlive(record.lease),
      localMaxEpoch: gw.maxEpoch,
    });
    if (decision.kind === "refuse") {
      gw.read = null;
      return `${gw.id} ${describeRefusal(decision)}`;
    }
    const failed = this.cas(gw, decision.record);
    if (failed) return `${gw.id} claims epoch ${decision.record.epoch}: ${failed}`;
    return `${gw.id} claimed${decision.unclean ? " (unclean)" : ""}: ${this.describeRecord()}`;
  }

  private release(d: Directive): string {
    const gw = this.gateway(d.positional[0]);
    if (!this.stored) return "no record";
    const change = releaseRecord(this.stored.record, gw.id, gw.lease.status().leaseId ?? "");
    if (change.kind === "refuse") return `${gw.id} ${describeRefusal(change)}`;
    return this.cas(gw, change.record) ?? `${gw.id} released: ${this.describeRecord()}`;
  }

  private newRoom(d: Directive): string {
    if (!this.stored) throw new Error("write the record first");
    const { record } = this.stored;
    this.replicas = need(d.named.get("replicas"), "replicas=").split(",");
    this.minInsync = int(d.named.get("min_insync") ?? "2", "min_insync");
    const [events, ms] = (d.named.get("max_lag") ?? "1000/10000").split("/");
    this.lagLimit = maxLag(int(events, "max_lag events"), int(ms, "max_lag ms"));
    this.tracker = new AckTracker({
      authority: record.gateway_id,
      epoch: record.epoch,
      replicas: this.replicas,
      minInsync: this.minInsync,
      maxLag: this.lagLimit,
      recordedIsr: record.isr,
      logEnd: int(d.named.get("log") ?? "0", "log"),
      ...(d.named.has("join_floor") ? { joinFloor: int(d.named.get("join_floor"), "join_floor") } : {}),
      now: () => this.time,
    });
    return `room led by ${record.gateway_id}@${record.epoch}: replicas=[${this.replicas.join(",")}] min_insync=${this.minInsync} isr ${this.describeIsr()} log_end=${this.tracker.logEnd}`;
  }

  private roomTracker(): AckTracker {
    if (!this.tracker) throw new Error("no room: use `room` first");
    return this.tracker;
  }

  private append(d: Directive): string {
    const tracker = this.roomTracker();
    const n = int(d.named.get("n") ?? "1", "n");
    const durable = d.named.get("durable") !== "false";
    for (let i = 0; i < n; i++) tracker.appended(tracker.logEnd + 1, durable);
    return `log_end=${tracker.logEnd}; ${this.describeCommit()}`;
  }

  private ack(d: Directive): string {
    const tracker = this.roomTracker();
    const gw = need(d.positional[0], "gateway");
    const seq = int(d.named.get("seq"), "seq=");
    if (gw === tracker.authority) tracker.authorityDurable(seq);
    else if (!tracker.replicaAck(gw, int(d.named.get("epoch") ?? String(tracker.epoch), "epoch"), seq))
      return `ack from ${gw} ignored; ${this.describeCommit()}`;
    return this.describeCommit();
  }

  private describeCommit(): string {
    const tracker = this.roomTracker();
    const committed = tracker.committed();
    const waiting = tracker.waitingOn();
    return `committed=${committed}${waiting.length ? ` waiting_on=[${waiting.join(",")}]` : ""}`;
  }

  private describeLag(gw: string): string {
    const tracker = this.roomTracker();
    const lag = tracker.lagOf(gw);
    return `${gw}: lag ${lag.events === null ? "unknown" : `${lag.events} events`}, lacking for ${lag.lackingForMs} ms: ${tracker.inSync(gw) ? "in sync" : "out of sync"}`;
  }

  private describeIsr(): string {
    const { recorded, pending } = this.roomTracker().isr;
    return `[${recorded.join(",")}]${pending ? ` writing [${pending.join(",")}]` : ""}`;
  }

  private planIsr(): string {
    const tracker = this.roomTracker();
    const plan: IsrPlan = tracker.planIsr();
    if (plan.kind === "keep") return `keep ${this.describeIsr()}`;
    tracker.isrWriting(plan.isr);
    const parts = [
      plan.added.length ? `add ${plan.added.join(",")}` : "",
      plan.removed.length ? `remove ${plan.removed.join(",")}` : "",
    ].filter(Boolean);
    return `${parts.join(", ")}: isr ${this.describeIsr()}`;
  }

  private isrWritten(): string {
    const tracker = this.roomTracker();
    const pending = tracker.isr.pending;
    if (!pending || !this.stored) throw new Error("no ISR change is being written");
    const gw = this.gateway(tracker.authority);
    const change = changeIsr(this.stored.record, gw.id, gw.lease.status().leaseId ?? "", pending);
    if (change.kind === "refuse") {
      tracker.isrWriteFailed();
      return `${gw.id} ${describeRefusal(change)}`;
    }
    const failed = this.cas(gw, change.record);
    if (failed) {
      tracker.isrWriteFailed();
      return failed;
    }
    tracker.isrRecorded(change.record.isr);
    return `${this.describeRecord()}; ${this.describeCommit()}`;
  }

  private send(): string {
    const tracker = this.roomTracker();
    const admission = tracker.admit(this.gateway(tracker.authority).lease.isValid());
    return admission.kind === "admit" ? "admitted" : describeRefusal(admission);
  }

  private gateway(id: string | undefined): Gateway {
    const gw = this.gateways.get(need(id, "gateway"));
    if (!gw) throw new Error(`unknown gateway ${id}: use \`lease ${id}\` first`);
    return gw;
  }
}

function describeRefusal(r: Refusal): string {
  return `refused ${r.code} (${r.reason}): ${r.message}`;
}

function need(value: string | undefined, what: string): string {
  if (value === undefined || value === "") throw new Error(`missing ${what}`);
  return value;
}

function int(value: string | undefined, what: string): number {
  const n = Number(need(value, what));
  if (!Number.isSafeInteger(n)) throw new Error(`${what} must be an integer, got ${value}`);
  return n;
}
