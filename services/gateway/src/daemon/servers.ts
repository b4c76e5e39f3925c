import { chmodSync, rmSync } from "node:fs";
import { ServerCredentials, type ServiceDefinition } from "@grpc/grpc-js";
import {
  adaptService,
  addReflection,
  BoundedGrpcServer,
  bindServer,
  type Cleanup,
  claimUnixSocket,
  formatHostPort,
  GuardedServer,
  HealthRegistry,
  type HttpServer,
  KeyRing,
  type Server,
  type ServiceHandlers,
  startHttpServer,
} from "@hermes/common";
import { CONSOLE_DIST } from "@hermes/console";
import { BotModeServiceService } from "@hermes/proto/hermes/v1/botmode";
import { DeliveryServiceService } from "@hermes/proto/hermes/v1/delivery";
import { ControlServiceService, GatewayServiceService } from "@hermes/proto/hermes/v1/gateway";
import { OpsServiceService } from "@hermes/proto/hermes/v1/ops";
import { PeerServiceService } from "@hermes/proto/hermes/v1/peers";
import { QuorumServiceService } from "@hermes/proto/hermes/v1/quorum";
import { RoomMemberServiceService } from "@hermes/proto/hermes/v1/rooms";
import { a2aRoutes } from "../a2a/api/a2a-routes.js";
import { A2aCallers } from "../a2a/app/a2a-callers.js";
import { a2aPeerDirectory } from "../a2a/app/a2a-peer-client.js";
import { a2aStatus } from "../a2a/app/a2a-status.js";
import { controlServiceHandlers, gatewayServiceHandlers } from "../api/grpc/gateway-service.js";
import { apiPlatformRoute } from "../api/http/api-platform.js";
import { createRpcServer, type RpcServer } from "../api/rpc/rpc-server.js";
import { botModeRpcMethods } from "../botmode/api/botmode-methods.js";
import { botModeServiceHandlers } from "../botmode/api/botmode-service.js";
import type { BotModeApi } from "../botmode/api/methods.js";
import { ConsoleGate, consoleRoutes, loadConsoleAssets } from "../console/api/console.js";
import { ConsoleSessions } from "../console/api/console-sessions.js";
import { deliveryServiceHandlers } from "../delivery/api/delivery-service.js";
import type { OpsDeps } from "../ops/api/methods.js";
import { opsRpcMethods } from "../ops/api/ops-methods.js";
import { opsServiceHandlers } from "../ops/api/ops-service.js";
import { type CoordinatorSource, MeshObserver } from "../ops/app/mesh-observer.js";
import { consoleUrl } from "../ops/core/mesh-status.js";
import { peerServiceHandlers } from "../peers/api/peer-service.js";
import { peerLinks } from "../peers/app/peer-directory.js";
import { memberTurnServiceHandlers } from "../rooms/api/member-turn-service.js";
import { quorumServiceHandlers } from "../rooms/api/quorum-service.js";
import type { RpcMethod } from "../rooms/api/room-methods.js";
import { roomMethods } from "../rooms/api/room-methods.js";
import { roomServiceDefinition, roomServiceHandlers } from "../rooms/api/room-service.js";
import type { Foundation } from "./foundation.js";
import type { Services } from "./services.js";
import type { GatewayState } from "./state.js";
import { VERSION } from "./version.js";

/** The transports of a running gateway. */
export interface Servers {
  health: HealthRegistry;
  /** The TCP port, guarded by the API key ring. */
  grpc: Server;
  /** HERMES_HOME/gateway.sock (0600, no key): the same services plus ControlService. */
  control: Server;
  /** JSON-RPC over WebSocket at /rpc on the HTTP port. */
  rpc: RpcServer;
  http: HttpServer;
}

/**
 * The gRPC servers (TCP and the control socket) with every service, health and reflection, the
 * JSON-RPC upgrade and the HTTP port; bound and listening when this returns (health still
 * NOT_SERVING, /readyz 503 until the start sequence says ready).
 */
export async function startServers(f: Foundation, s: Services, state: GatewayState, cleanup: Cleanup): Promise<Servers> {
  const { settings, metrics, logger, home, listen } = f;
  const health = new HealthRegistry();
  const keys = new KeyRing(settings.apiKeys);
  const botMode: BotModeApi = { profiles: s.profiles, metadata: s.metadata, routines: s.routines };

  // The mesh as this gateway sees it, the console's sessions and the ops methods (console, status, check).
  const mesh = new MeshObserver({
    clock: f.clock,
    selfStatus: () => state.status(),
    rooms: s.rooms,
    profiles: s.profiles,
    activeProfiles: () => s.chat.activeProfiles(),
    peers: s.peers,
    peerLinks: () => peerLinks(s.config),
    relayRoster: s.relay ? () => s.relay!.remoteRoster() : undefined,
    coordinator: coordinatorView(f),
  });
  cleanup.push(() => mesh.close());
  const sessions = new ConsoleSessions(f.clock);
  const rpcMethods: Record<string, RpcMethod> = {};
  const ops: OpsDeps = {
    gatewayId: f.id,
    clock: f.clock,
    version: VERSION,
    home: home.root,
    mesh,
    rooms: s.rooms,
    chat: s.chat,
    deliveries: s.deliveries,
    sessions,
    keyRequired: keys.required,
    consoleUrl: () => consoleUrl(state.httpAddress, null) ?? "/",
    rpcMethodNames: () => Object.keys(rpcMethods).sort(),
    a2a: (limit) =>
      a2aStatus(
        {
          enabled: settings.a2a.enabled,
          tasks: s.a2aTasks,
          profiles: s.profiles,
          config: s.config,
          peers: a2aPeerDirectory(s.config),
          baseUrl: () => settings.a2a.publicUrl ?? `http://${state.httpAddress}`,
        },
        limit,
      ),
    metadata: {
      sections: () => s.metadata.sections().map(({ id, name }) => ({ id, name })),
      profile: (name) => {
        const { hidden, section } = s.profiles.show(name).meta;
        return { hidden, section };
      },
    },
  };
  Object.assign(rpcMethods, roomMethods(s.rooms), botModeRpcMethods(botMode), opsRpcMethods(ops));
  const gate = new ConsoleGate({ gatewayId: f.id, keys, sessions, allowedOrigins: settings.httpAllowedOrigins });

  const grpcLogger = logger.child({ module: "grpc" });
  const grpcServer = new BoundedGrpcServer(grpcLogger, { "grpc.max_receive_message_length": 8 * 1024 * 1024 });
  const controlServer = new GuardedServer(grpcLogger);
  /** One service on one server: the TCP port checks the key, the control socket does not. */
  const serve = <S>(server: Server, transport: "tcp" | "control", definition: ServiceDefinition, handlers: ServiceHandlers<S>) =>
    server.addService(
      definition,
      adaptService(definition, handlers, { ...(transport === "tcp" ? { auth: keys } : {}), metrics, transport }),
    );
  for (const [server, transport] of [
    [grpcServer, "tcp"],
    [controlServer, "control"],
  ] as const) {
    serve(server, transport, GatewayServiceService, gatewayServiceHandlers({ botMode, chat: s.chat, status: state }));
    serve(server, transport, BotModeServiceService, botModeServiceHandlers(botMode));
    serve(
      server,
      transport,
      DeliveryServiceService,
      deliveryServiceHandlers({ deliveries: s.deliveries, keyRequired: keys.required, transport }),
    );
    serve(server, transport, PeerServiceService, peerServiceHandlers({ runs: s.peerRuns, keyRequired: keys.required, transport }));
    serve(server, transport, roomServiceDefinition, roomServiceHandlers(s.rooms));
    serve(
      server,
      transport,
      RoomMemberServiceService,
      memberTurnServiceHandlers({ server: s.memberTurns, keyRequired: keys.required, transport }),
    );
    serve(server, transport, OpsServiceService, opsServiceHandlers(ops, transport));
    health.addToServer(server);
  }
  serve(controlServer, "control", ControlServiceService, controlServiceHandlers({ profiles: s.profiles }));
  if (s.quorum) {
    // Only gateways of the mesh report what they hold: a client key must not be able to fake an ack.
    const meshOnly = settings.meshKey ? new KeyRing([settings.meshKey]) : keys;
    grpcServer.addService(
      QuorumServiceService,
      adaptService(QuorumServiceService, quorumServiceHandlers(s.quorum), { auth: meshOnly, metrics, transport: "tcp" }),
    );
  }
  await addReflection(grpcServer);
  await addReflection(controlServer);

  const grpcPort = await grpcServer.listenTcp(formatHostPort(listen.grpc.bind));
  cleanup.push(() => grpcServer.forceShutdown());
  const grpcAddress = formatHostPort({ host: listen.grpc.bind.host, port: grpcPort });
  await claimUnixSocket(home.controlSocket, "another gateway is already serving this home");
  await bindServer(controlServer, `unix:${home.controlSocket}`, ServerCredentials.createInsecure());
  chmodSync(home.controlSocket, 0o600);
  cleanup.push(() => {
    controlServer.forceShutdown();
    rmSync(home.controlSocket, { force: true });
  });
  const rpc = createRpcServer({
    admit: (req) => gate.check(req, true),
    methods: rpcMethods,
    logger: logger.child({ module: "rpc" }),
    maxConnections: settings.maxRpcConnections,
  });
  cleanup.push(() => rpc.close());
  const http = await startHttpServer({
    listen: listen.http.bind,
    registry: metrics.registry,
    // Not ready while writes fail for a full disk; ready again once one commits.
    ready: () => state.serving,
    metricsPublic: settings.metricsPublic,
    routes: [
      apiPlatformRoute({ chat: s.chat, keys, logger }),
      ...(settings.a2a.enabled
        ? [
            a2aRoutes({
              tasks: s.a2aTasks,
              callers: new A2aCallers(keys, s.config, logger.child({ module: "a2a" })),
              profiles: s.profiles,
              config: s.config,
              listed: (profile) => !s.profiles.show(profile).meta.hidden,
              gatewayId: f.id,
              version: VERSION,
              publicUrl: settings.a2a.publicUrl,
              keepAliveMs: settings.a2a.keepAliveMs,
              allowedOrigins: settings.httpAllowedOrigins,
              logger: logger.child({ module: "a2a" }),
            }),
          ]
        : []),
      consoleRoutes({
        gatewayId: f.id,
        gate,
        sessions,
        keys,
        assets: loadConsoleAssets(CONSOLE_DIST),
        logger: logger.child({ module: "console" }),
        registry: metrics.registry,
      }),
    ],
    upgrades: [rpc.upgrade],
  });
  state.listening = { grpc: grpcAddress, http: formatHostPort(http.address) };
  return { health, grpc: grpcServer, control: controlServer, rpc, http };
}

/** The coordinator as the mesh view shows it: its endpoints and this gateway's lease phase. */
function coordinatorView(f: Foundation): CoordinatorSource | undefined {
  const { coordinator } = f;
  const endpoints = f.settings.coordinator?.endpoints ?? [];
  if (!coordinator) return undefined;
  return { status: () => ({ endpoints, state: `lease ${coordinator.leaseStatus().phase}`, error: null }) };
}
