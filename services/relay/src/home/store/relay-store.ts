import { type Db, HermesError, openDatabase } from "@hermes/common";
import type { DeliveryEnvelope } from "@hermes/contract/envelope";
import type Database from "better-sqlite3";
import type { NewDelivery, Outcome, RelayDelivery, RelayDeliveryState } from "../../deliveries/core/deliveries.js";
import type { RosterBot, StoredConnection } from "../../roster/core/roster.js";
import { RELAY_MIGRATIONS } from "./migrations.js";

interface DeliveryRow {
  seq: number;
  delivery_id: string;
  fingerprint: string;
  sender_connection: string;
  target_connection: string;
  target_handle: string;
  sender_name: string;
  envelope_json: string;
  state: RelayDeliveryState;
  forwards: number;
  accepted_at: number;
  expires_at: number;
  updated_at: number;
  outcome_json: string | null;
}

export interface KeyRecord {
  connection: string;
  created_at: string;
  gateway_id: string | null;
  last_seen_at: string | null;
}

function fromRow(row: DeliveryRow): RelayDelivery {
  return {
    delivery_id: row.delivery_id,
    seq: row.seq,
    fingerprint: row.fingerprint,
    sender_connection: row.sender_connection,
    target_connection: row.target_connection,
    target_handle: row.target_handle,
    sender_name: row.sender_name,
    envelope: JSON.parse(row.envelope_json) as DeliveryEnvelope,
    state: row.state,
    forwards: row.forwards,
    accepted_at: row.accepted_at,
    expires_at: row.expires_at,
    updated_at: row.updated_at,
    outcome: row.outcome_json === null ? null : (JSON.parse(row.outcome_json) as Outcome),
  };
}

/**
 * DATA/relay.db: connection keys (hashed), the last roster of every connection, the durable
 * envelope queue. WAL with synchronous=FULL, so a `queued` ack (sent after the insert commits)
 * survives a power loss.
 */
export class RelayStore {
  readonly db: Db;
  private readonly statements = new Map<string, Database.Statement>();

  constructor(
    readonly path: string,
    options: { busyTimeoutMs?: number } = {},
  ) {
    this.db = openDatabase(path, {
      label: "relay database",
      migrations: RELAY_MIGRATIONS,
      synchronous: "FULL",
      ...(options.busyTimeoutMs !== undefined ? { busyTimeoutMs: options.busyTimeoutMs } : {}),
    });
  }

  /** A prepared statement, prepared once per connection (preparing costs more than running). */
  private stmt(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  // -------------------------------------------------------------------------------------------
  // meta

  meta(key: string): string | undefined {
    return (this.stmt("SELECT value FROM relay_meta WHERE key = ?").get(key) as { value: string } | undefined)?.value;
  }

  setMeta(key: string, value: string): void {
    this.stmt("INSERT INTO relay_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value").run(key, value);
  }

  rosterEpoch(): number {
    return Number(this.meta("roster_epoch") ?? 0);
  }

  // -------------------------------------------------------------------------------------------
  // keys

  addKey(connection: string, keyHash: string, createdAt: string): void {
    const exists = this.stmt("SELECT 1 FROM connection_keys WHERE connection = ?").get(connection);
    if (exists) {
      throw new HermesError(
        "already_exists",
        `connection ${connection} already has a key; revoke it first (hermes relay key revoke ${connection}) to issue a new one`,
        { data: { connection } },
      );
    }
    this.stmt("INSERT INTO connection_keys (connection, key_hash, created_at) VALUES (?, ?, ?)").run(connection, keyHash, createdAt);
  }

  /** The connection a key hash belongs to. */
  connectionForKeyHash(keyHash: string): string | undefined {
    return (this.stmt("SELECT connection FROM connection_keys WHERE key_hash = ?").get(keyHash) as { connection: string } | undefined)
      ?.connection;
  }

  hasConnection(connection: string): boolean {
    return this.stmt("SELECT 1 FROM connection_keys WHERE connection = ?").get(connection) !== undefined;
  }

  keys(): KeyRecord[] {
    return this.stmt(
      "SELECT connection, created_at, gateway_id, last_seen_at FROM connection_keys ORDER BY connection",
    ).all() as KeyRecord[];
  }

  /** Deletes the key (and, by cascade, the connection's roster); false when there was none. */
  revokeKey(connection: string): boolean {
    return this.stmt("DELETE FROM connection_keys WHERE connection = ?").run(connection).changes > 0;
  }

  touchConnection(connection: string, gatewayId: string, at: string): void {
    this.stmt("UPDATE connection_keys SET gateway_id = ?, last_seen_at = ? WHERE connection = ?").run(gatewayId, at, connection);
  }

  // -------------------------------------------------------------------------------------------
  // roster

  /** Every connection with a key, with its last announced bots and the gateway id of its last hello. */
  loadRoster(): StoredConnection[] {
    const rows = this.stmt(
      "SELECT connection, handle, display_name, title, description FROM roster_bots ORDER BY connection, handle",
    ).all() as (RosterBot & { connection: string })[];
    const bots = new Map<string, RosterBot[]>();
    for (const { connection, ...bot } of rows) bots.set(connection, [...(bots.get(connection) ?? []), bot]);
    // Connections with a key but no bots are part of the roster too (an empty list).
    return this.keys().map((k) => ({ connection: k.connection, gateway_id: k.gateway_id ?? "", bots: bots.get(k.connection) ?? [] }));
  }

  /** Replaces one connection's bots and records the epoch, in one transaction. */
  saveRoster(connection: string, bots: readonly RosterBot[], epoch: number): void {
    const insert = this.stmt("INSERT INTO roster_bots (connection, handle, display_name, title, description) VALUES (?, ?, ?, ?, ?)");
    this.db
      .transaction(() => {
        this.stmt("DELETE FROM roster_bots WHERE connection = ?").run(connection);
        for (const b of bots) insert.run(connection, b.handle, b.display_name, b.title, b.description);
        this.setMeta("roster_epoch", String(epoch));
      })
      .immediate();
  }

  saveEpoch(epoch: number): void {
    this.setMeta("roster_epoch", String(epoch));
  }

  // -------------------------------------------------------------------------------------------
  // deliveries

  delivery(id: string): RelayDelivery | undefined {
    const row = this.stmt("SELECT * FROM deliveries WHERE delivery_id = ?").get(id) as DeliveryRow | undefined;
    return row && fromRow(row);
  }

  /** Commits a new delivery; returns it with its seq. */
  insert(record: NewDelivery): RelayDelivery {
    const info = this.stmt(
      `INSERT INTO deliveries (delivery_id, fingerprint, sender_connection, target_connection, target_handle, sender_name,
           envelope_json, state, forwards, accepted_at, expires_at, updated_at, outcome_json)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      record.delivery_id,
      record.fingerprint,
      record.sender_connection,
      record.target_connection,
      record.target_handle,
      record.sender_name,
      JSON.stringify(record.envelope),
      record.state,
      record.forwards,
      record.accepted_at,
      record.expires_at,
      record.updated_at,
      record.outcome === null ? null : JSON.stringify(record.outcome),
    );
    return { ...record, seq: Number(info.lastInsertRowid) };
  }

  /** Stores a state change (state, forwards, updated_at, outcome). */
  save(record: RelayDelivery): void {
    this.stmt("UPDATE deliveries SET state = ?, forwards = ?, updated_at = ?, outcome_json = ? WHERE delivery_id = ?").run(
      record.state,
      record.forwards,
      record.updated_at,
      record.outcome === null ? null : JSON.stringify(record.outcome),
      record.delivery_id,
    );
  }

  /** Every delivery not ended yet, in commit order. */
  open(): RelayDelivery[] {
    return (this.stmt("SELECT * FROM deliveries WHERE state IN ('queued', 'forwarded') ORDER BY seq").all() as DeliveryRow[]).map(fromRow);
  }

  /** Forgets ended deliveries last changed before `before` (ms); a later repeat is then a new delivery. */
  prune(before: number): number {
    return this.stmt("DELETE FROM deliveries WHERE state IN ('done', 'offline') AND updated_at < ?").run(before).changes;
  }

  countByState(): Record<RelayDeliveryState, number> {
    const out: Record<RelayDeliveryState, number> = { queued: 0, forwarded: 0, done: 0, offline: 0 };
    for (const r of this.stmt("SELECT state, COUNT(*) AS n FROM deliveries GROUP BY state").all() as {
      state: RelayDeliveryState;
      n: number;
    }[])
      out[r.state] = r.n;
    return out;
  }
}
