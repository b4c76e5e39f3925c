import type { Db } from "@hermes/common";
import type { DeliveryReason, ReceiptState } from "@hermes/contract";
import type { DeliveryRecord } from "../core/receipt.js";
import type { IngressRow, IngressSource, OutboxRow } from "../core/rows.js";
import type { Route } from "../core/targets.js";

/** The two calls made on cached statements (better-sqlite3 binds positional or named parameters). */
type Statement = { run(...params: unknown[]): unknown; get(...params: unknown[]): unknown };

interface RawOutbox {
  delivery_id: string;
  from_profile: string;
  from_gateway: string;
  sender_session_key: string;
  target: string;
  route_kind: string;
  route_json: string;
  target_profile: string | null;
  message: string;
  fingerprint: string;
  created_at: string;
  ttl_seconds: number;
  state: ReceiptState;
  reason: string | null;
  error: string | null;
  attempts: number;
  settled_at: string | null;
  reply: string | null;
  compact: number;
  updated_at: string;
  notified_at: string | null;
}

interface RawIngress {
  delivery_id: string;
  sender: string;
  sender_name: string;
  target: string;
  target_profile: string;
  session_key: string;
  source: IngressSource;
  message: string;
  fingerprint: string;
  created_at: string;
  ttl_seconds: number;
  state: ReceiptState;
  reason: string | null;
  error: string | null;
  attempts: number;
  claimed_at: string | null;
  settled_at: string | null;
  reply: string | null;
  compact: number;
  updated_at: string;
}

/**
 * A local route's profile lives only in `target_profile` (a registered identity column, rekeyed on
 * rename); route_json keeps the rest, so no profile name hides in it.
 */
function routeJson(route: Route): string {
  if (route.kind !== "local") return JSON.stringify(route);
  const { profile: _profile, ...rest } = route;
  return JSON.stringify(rest);
}

function routeOf(r: RawOutbox): Route {
  const route = JSON.parse(r.route_json) as Route;
  return route.kind === "local" ? { ...route, profile: r.target_profile ?? "" } : route;
}

function toOutbox(r: RawOutbox): OutboxRow {
  return {
    delivery_id: r.delivery_id,
    from: `${r.from_profile}@${r.from_gateway}`,
    target: r.target,
    state: r.state,
    reason: r.reason as DeliveryReason | null,
    error: r.error,
    attempts: r.attempts,
    created_at: r.created_at,
    settled_at: r.settled_at,
    reply: r.reply,
    ttl_seconds: r.ttl_seconds,
    updated_at: r.updated_at,
    compact: r.compact === 1,
    from_profile: r.from_profile,
    from_gateway: r.from_gateway,
    sender_session_key: r.sender_session_key,
    route: routeOf(r),
    target_profile: r.target_profile,
    message: r.message,
    fingerprint: r.fingerprint,
    notified_at: r.notified_at,
  };
}

function toIngress(r: RawIngress): IngressRow {
  return {
    delivery_id: r.delivery_id,
    from: r.sender,
    target: r.target,
    state: r.state,
    reason: r.reason as DeliveryReason | null,
    error: r.error,
    attempts: r.attempts,
    created_at: r.created_at,
    settled_at: r.settled_at,
    reply: r.reply,
    ttl_seconds: r.ttl_seconds,
    updated_at: r.updated_at,
    compact: r.compact === 1,
    sender_name: r.sender_name,
    target_profile: r.target_profile,
    session_key: r.session_key,
    source: r.source,
    message: r.message,
    fingerprint: r.fingerprint,
    claimed_at: r.claimed_at,
  };
}

/** The mutable receipt fields, as bound parameters. */
function stateParams(r: DeliveryRecord) {
  return {
    delivery_id: r.delivery_id,
    state: r.state,
    reason: r.reason,
    error: r.error,
    attempts: r.attempts,
    settled_at: r.settled_at,
    reply: r.reply,
    compact: r.compact ? 1 : 0,
    updated_at: r.updated_at,
  };
}

export interface DeliveryListFilter {
  /** Deliveries sent by or addressed to this profile. */
  profile?: string | undefined;
  state?: ReceiptState | undefined;
  limit?: number | undefined;
}

export interface ListedDelivery {
  side: "outbox" | "ingress";
  record: DeliveryRecord;
}

/**
 * SQL of the delivery tables. The delivery service's group commit (delivery/app/delivery-commit.ts)
 * applies the row changes the delivery machines decided (core/delivery/{outbox,ingress}-machine.ts),
 * all of one batch in one transaction.
 */
export class DeliveriesStore {
  private readonly stmts: Record<string, Statement>;

  constructor(readonly db: Db) {
    this.stmts = {
      insertOutbox: db.prepare(
        `INSERT INTO delivery_outbox (delivery_id, from_profile, from_gateway, sender_session_key, target, route_kind, route_json, target_profile,
           message, fingerprint, created_at, ttl_seconds, state, reason, error, attempts, settled_at, reply, compact, updated_at, notified_at)
         VALUES (@delivery_id, @from_profile, @from_gateway, @sender_session_key, @target, @route_kind, @route_json, @target_profile,
           @message, @fingerprint, @created_at, @ttl_seconds, @state, @reason, @error, @attempts, @settled_at, @reply, @compact, @updated_at, NULL)`,
      ),
      getOutbox: db.prepare("SELECT * FROM delivery_outbox WHERE delivery_id = ?"),
      senderSessionKey: db.prepare("SELECT sender_session_key FROM delivery_outbox WHERE delivery_id = ?").pluck(),
      updateOutbox: db.prepare(
        `UPDATE delivery_outbox SET state = @state, reason = @reason, error = @error, attempts = @attempts, settled_at = @settled_at,
           reply = @reply, compact = @compact, updated_at = @updated_at WHERE delivery_id = @delivery_id`,
      ),
      notified: db.prepare("UPDATE delivery_outbox SET notified_at = ? WHERE delivery_id = ?"),
      insertIngress: db.prepare(
        `INSERT INTO delivery_ingress (delivery_id, sender, sender_name, target, target_profile, session_key, source, message, fingerprint,
           created_at, ttl_seconds, state, reason, error, attempts, claimed_at, settled_at, reply, compact, updated_at)
         VALUES (@delivery_id, @sender, @sender_name, @target, @target_profile, @session_key, @source, @message, @fingerprint,
           @created_at, @ttl_seconds, @state, @reason, @error, @attempts, NULL, @settled_at, @reply, @compact, @updated_at)`,
      ),
      getIngress: db.prepare("SELECT * FROM delivery_ingress WHERE delivery_id = ?"),
      updateIngress: db.prepare(
        `UPDATE delivery_ingress SET state = @state, reason = @reason, error = @error, attempts = @attempts, settled_at = @settled_at,
           reply = @reply, compact = @compact, updated_at = @updated_at, claimed_at = COALESCE(@claimed_at, claimed_at)
         WHERE delivery_id = @delivery_id`,
      ),
    };
  }

  insertOutbox(row: OutboxRow): void {
    this.stmts["insertOutbox"]!.run({
      ...stateParams(row),
      from_profile: row.from_profile,
      from_gateway: row.from_gateway,
      sender_session_key: row.sender_session_key,
      target: row.target,
      route_kind: row.route.kind,
      route_json: routeJson(row.route),
      target_profile: row.target_profile,
      message: row.message,
      fingerprint: row.fingerprint,
      created_at: row.created_at,
      ttl_seconds: row.ttl_seconds,
    });
  }

  outbox(deliveryId: string): OutboxRow | undefined {
    const r = this.stmts["getOutbox"]!.get(deliveryId) as RawOutbox | undefined;
    return r && toOutbox(r);
  }

  /** The sender's Bot Chat key as stored now (a rename of the sender rekeys it). */
  senderSessionKey(deliveryId: string): string | undefined {
    return this.stmts["senderSessionKey"]!.get(deliveryId) as string | undefined;
  }

  /** Stores the receipt fields of an outbox record (the state machine's result). */
  saveOutbox(record: DeliveryRecord): void {
    this.stmts["updateOutbox"]!.run(stateParams(record));
  }

  markNotified(deliveryId: string, at: string): void {
    this.stmts["notified"]!.run(at, deliveryId);
  }

  insertIngress(row: IngressRow): void {
    this.stmts["insertIngress"]!.run({
      ...stateParams(row),
      sender: row.from,
      sender_name: row.sender_name,
      target: row.target,
      target_profile: row.target_profile,
      session_key: row.session_key,
      source: row.source,
      message: row.message,
      fingerprint: row.fingerprint,
      created_at: row.created_at,
      ttl_seconds: row.ttl_seconds,
    });
  }

  ingress(deliveryId: string): IngressRow | undefined {
    const r = this.stmts["getIngress"]!.get(deliveryId) as RawIngress | undefined;
    return r && toIngress(r);
  }

  /** Stores the receipt fields of an ingress record; `claimedAt` is recorded on a claim. */
  saveIngress(record: DeliveryRecord, claimedAt?: string): void {
    this.stmts["updateIngress"]!.run({ ...stateParams(record), claimed_at: claimedAt ?? null });
  }

  /** Outbox rows that have not ended, oldest first (restart: dispatched again). */
  openOutbox(): OutboxRow[] {
    return (
      this.db.prepare("SELECT * FROM delivery_outbox WHERE state IN ('queued', 'claimed') ORDER BY created_at, rowid").all() as RawOutbox[]
    ).map(toOutbox);
  }

  /** Ended outbox rows whose completion notification was not written yet (a crash in between). */
  unnotifiedOutbox(): OutboxRow[] {
    return (
      this.db
        .prepare(
          "SELECT * FROM delivery_outbox WHERE notified_at IS NULL AND state NOT IN ('queued', 'claimed') ORDER BY created_at, rowid",
        )
        .all() as RawOutbox[]
    ).map(toOutbox);
  }

  /** Ingress rows in a state, oldest first. */
  ingressIn(state: "queued" | "claimed"): IngressRow[] {
    return this.db
      .prepare<[string], RawIngress>("SELECT * FROM delivery_ingress WHERE state = ? ORDER BY created_at, rowid")
      .all(state)
      .map(toIngress);
  }

  /** Queued rows whose first attempt never started (sweeper candidates; the caller checks the TTL). */
  unclaimedQueued(): { outbox: OutboxRow[]; ingress: IngressRow[] } {
    const outbox = (
      this.db
        .prepare("SELECT * FROM delivery_outbox WHERE state = 'queued' AND attempts = 0 AND route_kind != 'local'")
        .all() as RawOutbox[]
    ).map(toOutbox);
    const ingress = (this.db.prepare("SELECT * FROM delivery_ingress WHERE state = 'queued' AND attempts = 0").all() as RawIngress[]).map(
      toIngress,
    );
    return { outbox, ingress };
  }

  /** Outbox and ingress rows for an operator view; a local delivery (both sides here) is listed once, as outbox. */
  list(filter: DeliveryListFilter = {}): ListedDelivery[] {
    const limit = Math.min(Math.max(filter.limit ?? 100, 1), 1000);
    const where = (side: "o" | "i") => {
      const terms: string[] = [];
      if (filter.state) terms.push(`${side}.state = @state`);
      if (filter.profile) {
        terms.push(side === "o" ? "(o.from_profile = @profile OR o.target_profile = @profile)" : "i.target_profile = @profile");
      }
      return terms.length > 0 ? `AND ${terms.join(" AND ")}` : "";
    };
    const params = { state: filter.state ?? null, profile: filter.profile ?? null, limit };
    const outbox = (
      this.db
        .prepare(`SELECT o.* FROM delivery_outbox o WHERE 1 = 1 ${where("o")} ORDER BY o.created_at DESC, o.rowid DESC LIMIT @limit`)
        .all(params) as RawOutbox[]
    ).map((r) => ({ side: "outbox" as const, record: toOutbox(r) as DeliveryRecord }));
    const ingress = (
      this.db
        .prepare(
          `SELECT i.* FROM delivery_ingress i WHERE NOT EXISTS (SELECT 1 FROM delivery_outbox o WHERE o.delivery_id = i.delivery_id)
           ${where("i")} ORDER BY i.created_at DESC, i.rowid DESC LIMIT @limit`,
        )
        .all(params) as RawIngress[]
    ).map((r) => ({ side: "ingress" as const, record: toIngress(r) as DeliveryRecord }));
    return [...outbox, ...ingress].sort((a, b) => b.record.created_at.localeCompare(a.record.created_at)).slice(0, limit);
  }
}
