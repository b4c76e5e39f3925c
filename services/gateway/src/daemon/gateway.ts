import { rmSync } from "node:fs";
import {
  type Clock,
  type Db,
  isoTime,
  type Logger,
  type Metrics,
  ServingStatus,
  shutdownServer,
  startInPhases,
  type WalCheckpointer,
} from "@hermes/common";
import type { Coordinator } from "@hermes/coordinator";
import type { GatewayStatus } from "@hermes/proto/hermes/v1/gateway";
import type { A2aTasks } from "../a2a/app/a2a-tasks.js";
import type { ChatService } from "../agents/app/chat.js";
import { OBLIGATION_RETENTION_MS, pruneEndedObligations } from "../agents/store/obligations-store.js";
import type { DeliveryService } from "../delivery/app/delivery-service.js";
import type { DeliveryWorker } from "../delivery/app/delivery-worker.js";
import type { GatewaySettings } from "../home/app/config.js";
import { type ProfileDatabases, writeHeartbeats } from "../home/store/gateway-store.js";
import type { HermesHome } from "../home/store/home.js";
import type { ProfileService } from "../identity/app/profiles.js";
import type { LiveRouting, SessionService } from "../identity/app/sessions.js";
import type { RoutingIndex } from "../identity/core/routing-index.js";
import type { PeerRuns } from "../peers/app/peer-runs.js";
import type { TelegramBot } from "../platforms/telegram/app/telegram-bot.js";
import type { RelayLink } from "../relay-link/app/relay-link.js";
import type { DiscussionDriver } from "../rooms/app/discussion-driver.js";
import type { CoordinatedRooms } from "../rooms/app/quorum/coordinated-rooms.js";
import type { RoomsService } from "../rooms/app/rooms-service.js";
import type { RoutineService } from "../routines/app/routine-service.js";
import { type Foundation, type GatewayOptions, openFoundation } from "./foundation.js";
import { joinMesh } from "./mesh.js";
import { type Servers, startServers } from "./servers.js";
import { buildServices, type Services } from "./services.js";
import { GatewayState } from "./state.js";

export type { GatewayOptions } from "./foundation.js";
export { VERSION } from "./version.js";

/** How often ended turn obligations are pruned. */
const OBLIGATION_PRUNE_MS = 3600_000;

/**
 * A running gateway: stores, services, gRPC (TCP + control socket), HTTP and timers. `start` builds
 * it in dependency order (foundation → services → servers), then starts it; `stop` takes it down
 * in the reverse order (daemon/README.md).
 */
export class Gateway {
  readonly id: string;
  readonly home: HermesHome;
  readonly settings: GatewaySettings;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly clock: Clock;
  readonly db: Db;
  private readonly checkpointer: WalCheckpointer;
  readonly profileDbs: ProfileDatabases;
  /** The live routing index. */
  readonly routing: RoutingIndex;
  readonly sessions: SessionService;
  readonly profiles: ProfileService;
  readonly chat: ChatService;
  /** Bot-to-bot delivery (the outbox and ingress machines, their group commit, receipts). */
  readonly deliveries: DeliveryService;
  /** Runs the deliveries' turns, transports and notifications. */
  private readonly deliveryWorker: DeliveryWorker;
  /** Turns other gateways run here (`hermes peer dm/run`). */
  readonly peerRuns: PeerRuns;
  /** Tasks A2A callers start here. */
  readonly a2aTasks: A2aTasks;
  /** Replicated rooms (store, group commit, replication, authority). */
  readonly rooms: RoomsService;
  /** The discussion driver of the rooms led here. */
  readonly discussions: DiscussionDriver;
  /** The dial-out link to the relay, when relay.url is configured. */
  readonly relay: RelayLink | undefined;
  /** The coordinated mesh's etcd client, when a coordinator is configured. */
  readonly coordinator: Coordinator | undefined;
  private readonly coordination: CoordinatedRooms | undefined;
  /** The Telegram bot, when platforms.telegram is enabled. */
  readonly telegram: TelegramBot | undefined;
  /** Bot Mode routines (cron jobs whose runs are turns in Bot Chats). */
  readonly routines: RoutineService;
  /** What the operator should fix, logged at start (`gateway start` also prints them on stderr). */
  readonly startWarnings: string[];
  private readonly liveRouting: LiveRouting;
  private readonly timers: NodeJS.Timeout[] = [];
  private stopping: Promise<void> | undefined;

  private constructor(
    f: Foundation,
    s: Services,
    private readonly servers: Servers,
    private readonly state: GatewayState,
  ) {
    this.id = f.id;
    this.home = f.home;
    this.settings = f.settings;
    this.logger = f.logger;
    this.metrics = f.metrics;
    this.clock = f.clock;
    this.db = f.db;
    this.checkpointer = f.checkpointer;
    this.profileDbs = f.profileDbs;
    this.liveRouting = f.routing;
    this.routing = f.routing.index;
    this.startWarnings = f.startWarnings;
    this.sessions = s.sessions;
    this.profiles = s.profiles;
    this.chat = s.chat;
    this.deliveries = s.deliveries;
    this.deliveryWorker = s.deliveryWorker;
    this.peerRuns = s.peerRuns;
    this.a2aTasks = s.a2aTasks;
    this.rooms = s.rooms;
    this.discussions = s.discussions;
    this.relay = s.relay;
    this.coordinator = f.coordinator;
    this.coordination = s.coordination;
    this.telegram = s.telegram;
    this.routines = s.routines;
  }

  static start(options: GatewayOptions): Promise<Gateway> {
    return startInPhases(async (cleanup) => {
      const f = await openFoundation(options, cleanup);
      const services = buildServices(f, cleanup);
      const state = new GatewayState(f, services);
      const servers = await startServers(f, services, state, cleanup);
      await joinMesh(f, services, state.grpcAddress);
      return new Gateway(f, services, servers, state).run();
    });
  }

  /**
   * Start-up, once the servers listen: interrupted chat turns are marked failed (and ended ones
   * past their retention pruned), peer runs, A2A tasks and deliveries recovered, followed rooms resumed, the
   * driver closes turns left open, the relay link dials, the Telegram bot finishes its inbox and
   * polls, heartbeats are written, and only then is the gateway ready.
   */
  private run(): this {
    this.timers.push(setInterval(() => this.liveRouting.flush(), this.settings.routingPersistMs).unref());
    this.timers.push(setInterval(() => this.writeHeartbeats("running"), this.settings.heartbeatMs).unref());
    this.chat.recoverInterruptedTurns();
    this.pruneObligations();
    this.timers.push(setInterval(() => this.pruneObligations(), OBLIGATION_PRUNE_MS).unref());
    // Runs cut off by the last stop are failed, then the times missed meanwhile follow the misfire policy.
    this.routines.start();
    this.peerRuns.start();
    this.a2aTasks.start();
    this.deliveries.start();
    this.rooms.start();
    this.discussions.start();
    this.relay?.start();
    this.telegram?.start();
    this.writeHeartbeats("running");
    this.servers.health.setAll(ServingStatus.SERVING);
    this.state.ready = true;
    this.logger.info({ grpc: this.grpcAddress, http: this.httpAddress, control: this.home.controlSocket }, "gateway ready");
    return this;
  }

  get startedAt(): number {
    return this.state.startedAt;
  }

  get grpcAddress(): string {
    return this.state.grpcAddress;
  }

  get httpAddress(): string {
    return this.state.httpAddress;
  }

  status(): GatewayStatus {
    return this.state.status();
  }

  /** Ended turn obligations past their retention are deleted (at start, then hourly). */
  pruneObligations(): number {
    try {
      const pruned = pruneEndedObligations(this.db, isoTime(this.clock.now() - OBLIGATION_RETENTION_MS));
      if (pruned > 0) this.logger.info({ pruned }, "pruned ended turn obligations");
      return pruned;
    } catch (err) {
      this.logger.warn({ err }, "pruning turn obligations failed");
      return 0;
    }
  }

  /** Heartbeat rows for every hosted profile (identity-keyed: they follow renames, go with deletes). */
  writeHeartbeats(state: "running" | "stopped"): void {
    try {
      writeHeartbeats(this.db, {
        profiles: this.profiles.names(),
        gateway_id: this.id,
        pid: process.pid,
        state,
        at: isoTime(this.clock.now()),
      });
    } catch (err) {
      this.logger.warn({ err }, "writing heartbeats failed");
    }
  }

  /** Graceful stop (SIGTERM): not ready, stop accepting, let in-flight calls finish, persist, close. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const { health, grpc, control, rpc, http } = this.servers;
      this.state.ready = false;
      health.setAll(ServingStatus.NOT_SERVING);
      for (const t of this.timers) clearInterval(t);
      // The routine timer first: no run starts from here on; running ones end with the turn engine.
      this.routines.beginStop();
      const grace = this.settings.shutdownGraceMs;
      // Deliveries first: queued mail stays queued for the next start, waiting callers are answered.
      this.deliveries.beginStop();
      // Peer runs too: waiting dm callers are answered; queued runs stay queued, running ones end interrupted.
      this.peerRuns.beginStop();
      // A2A too: no new tasks; running turns end with the turn engine (failed runtime_offline), open streams with the HTTP port.
      this.a2aTasks.beginStop();
      // No new Telegram updates: the poller tells Telegram the final offset and releases the bot's singleton.
      const telegramStopping = this.telegram?.beginStop();
      const roomsStopping = this.rooms.beginStop();
      // No more claims, leading or following; waiting quorum sends are answered (not acknowledged).
      const coordinationStopping = this.coordination?.stop();
      // Running member turns get the grace period; their ends are logged while appends still work.
      const discussionsStopping = this.discussions.stop(grace);
      // The relay link next: running relayed deliveries were just answered runtime_offline (they stay queued here).
      await this.relay?.stop();
      await Promise.all([shutdownServer(grpc, grace), shutdownServer(control, grace)]);
      health.close();
      rpc.close();
      await http.close();
      await roomsStopping;
      await discussionsStopping;
      await this.rooms.stop();
      await coordinationStopping;
      // Revokes the lease: the registration and every room held by it are free at once (the in-sync
      // replicas take over without waiting for the TTL).
      await this.coordinator?.close();
      await this.chat.stop(grace);
      // Answers of the turns that finished go out; queued Telegram updates stay in the inbox for the next start.
      await telegramStopping;
      await this.telegram?.stop(grace);
      await this.routines.stop();
      await this.deliveryWorker.stop();
      this.deliveries.stop();
      this.liveRouting.persistAll();
      this.writeHeartbeats("stopped");
      this.profileDbs.closeAll();
      await this.checkpointer.stop();
      this.db.close();
      rmSync(this.home.controlSocket, { force: true });
      this.logger.info("gateway stopped");
      this.logger.flush?.();
    })();
    return this.stopping;
  }
}
