import type { Metadata } from "@grpc/grpc-js";
import { bearerToken, type Clock, HermesError, isoTime, type Logger, type Metrics } from "@hermes/common";
import { assertConnectionName, MAX_ENVELOPE_BYTES } from "@hermes/contract";
import type { DeliveryBroker } from "../../deliveries/app/broker.js";
import type { RelaySettings } from "../../home/app/config.js";
import type { RelayMetrics } from "../../home/app/relay-metrics.js";
import type { RelayStore } from "../../home/store/relay-store.js";
import { hashKey } from "../../keys/core/keys.js";
import type { RosterBook, RosterBot } from "../../roster/core/roster.js";
import type { TunnelRouter } from "../../tunnel/app/tunnel-router.js";
import type { GatewaySession, SessionTable } from "./sessions.js";

export interface RelayHubDeps {
  id: string;
  settings: RelaySettings;
  logger: Logger;
  metrics: Metrics;
  relayMetrics: RelayMetrics;
  clock: Clock;
  store: RelayStore;
  roster: RosterBook;
  sessions: SessionTable;
  broker: DeliveryBroker;
  tunnel: TunnelRouter;
}

/**
 * The relay's switchboard: which gateway holds which connection's stream, what each
 * announced, and the broker and tunnel behind them. The Connect handler hands it every stream's
 * events; the control socket revokes keys through it.
 */
export class RelayHub {
  readonly id: string;
  readonly settings: RelaySettings;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly relayMetrics: RelayMetrics;
  readonly store: RelayStore;
  readonly roster: RosterBook;
  readonly sessions: SessionTable;
  readonly broker: DeliveryBroker;
  readonly tunnel: TunnelRouter;
  private readonly clock: Clock;
  /** Set first thing in a stop, before any stream is closed. */
  private closing = false;
  private nextSessionId = 1;

  constructor(deps: RelayHubDeps) {
    this.id = deps.id;
    this.settings = deps.settings;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
    this.relayMetrics = deps.relayMetrics;
    this.clock = deps.clock;
    this.store = deps.store;
    this.roster = deps.roster;
    this.sessions = deps.sessions;
    this.broker = deps.broker;
    this.tunnel = deps.tunnel;
  }

  /** The connection a presented key belongs to, or `unauthenticated` (nothing else happens). */
  authenticate(metadata: Metadata): string {
    const header = metadata.get("authorization")[0];
    const key = bearerToken(typeof header === "string" ? header : undefined);
    const connection = key ? this.store.connectionForKeyHash(hashKey(key)) : undefined;
    if (!connection) {
      throw new HermesError(
        "unauthenticated",
        "missing, unknown or revoked connection key: send `authorization: Bearer <key>` with a key from `hermes relay key add NAME`",
      );
    }
    return connection;
  }

  newSessionId(): number {
    return this.nextSessionId++;
  }

  /** A gateway's hello was accepted: its stream becomes the connection's, it gets its welcome and roster view. */
  attach(session: GatewaySession): void {
    if (this.closing) throw new HermesError("unavailable", "the relay is stopping; reconnect in a moment");
    const previous = this.sessions.attach(session);
    this.store.touchConnection(session.connection, session.gatewayId, isoTime(this.clock.now()));
    const changed = this.roster.connected(session.connection, session.gatewayId);
    if (changed) this.store.saveEpoch(this.roster.epoch);
    session.send({
      frame: {
        $case: "welcome",
        value: {
          connection: session.connection,
          relay_id: this.id,
          roster_epoch: this.roster.epoch,
          max_envelope_bytes: MAX_ENVELOPE_BYTES,
        },
      },
    });
    this.logger.info(
      { connection: session.connection, gateway_id: session.gatewayId, replaced: previous !== undefined },
      "gateway connected",
    );
    if (changed) this.broadcastRoster();
    else session.send(this.rosterFrame(session.connection));
    // Only now: what the replaced stream held is forwarded again at once, on this stream, and
    // nothing may come before its welcome and roster.
    if (previous) {
      this.broker.connectionDown(previous.connection, previous.id, "replaced");
      this.tunnel.connectionDown(previous.connection);
      previous.close(new HermesError("refused", `a newer stream of connection ${session.connection} replaced this one`));
    }
    this.broker.connectionUp();
  }

  /** A stream ended (closed, broken, or cancelled). */
  detach(session: GatewaySession): void {
    if (!this.sessions.detach(session)) return;
    this.tunnel.connectionDown(session.connection);
    // Stopping: what the gateway held stays queued in the database and is forwarded again after the restart.
    if (this.closing) return;
    this.broker.connectionDown(session.connection, session.id, "lost");
    try {
      this.store.touchConnection(session.connection, session.gatewayId, isoTime(this.clock.now()));
      if (this.roster.disconnected(session.connection)) {
        this.store.saveEpoch(this.roster.epoch);
        this.broadcastRoster();
      }
    } catch (err) {
      this.logger.warn({ err, connection: session.connection }, "recording a disconnect failed");
    }
    this.logger.info({ connection: session.connection, gateway_id: session.gatewayId }, "gateway disconnected");
  }

  /** A gateway announced its bots. */
  announce(connection: string, bots: RosterBot[]): void {
    if (!this.roster.announce(connection, bots)) return;
    this.store.saveRoster(connection, bots, this.roster.epoch);
    this.logger.info({ connection, bots: bots.length, roster_epoch: this.roster.epoch }, "roster changed");
    this.broadcastRoster();
  }

  private rosterFrame(connection: string) {
    const view = this.roster.viewFor(connection);
    return { frame: { $case: "roster" as const, value: { epoch: view.epoch, bots: view.bots } } };
  }

  private broadcastRoster(): void {
    for (const s of this.sessions.all()) s.send(this.rosterFrame(s.connection));
  }

  /** Revokes a connection's key: its stream (if any) is closed, its bots leave the roster. */
  revokeKey(connection: string): { connection: string; disconnected: boolean } {
    assertConnectionName(connection);
    if (!this.store.revokeKey(connection)) {
      throw new HermesError("not_found", `no key for connection ${connection}; list them with: hermes relay key list`, {
        data: { connection },
      });
    }
    this.roster.remove(connection);
    this.store.saveEpoch(this.roster.epoch);
    const session = this.sessions.get(connection);
    if (session) {
      session.close(new HermesError("unauthenticated", `the key of connection ${connection} was revoked at the relay`));
      this.detach(session);
    }
    this.logger.warn({ connection, disconnected: session !== undefined }, "connection key revoked");
    this.broadcastRoster();
    return { connection, disconnected: session !== undefined };
  }

  /**
   * First step of a stop: what was decided is made durable (and acked) while the streams are still
   * open; then no new stream is accepted and every open one is ended (gateways reconnect with
   * back-off), leaving what they held queued in the database.
   */
  close(): void {
    if (!this.closing) {
      try {
        this.broker.flush();
      } catch (err) {
        this.logger.error({ err }, "final relay commit failed");
      }
    }
    this.closing = true;
  }

  /** Ends every stream (after `close`). */
  endStreams(): void {
    for (const s of this.sessions.all()) s.close(new HermesError("unavailable", "the relay is stopping; reconnect in a moment"));
  }
}
