import { becomeDaemon } from "@hermes/common/client";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit, table, warn } from "../output.js";
import { platformSummary } from "./platforms.js";

export function registerGatewayCommands(program: Command, run: CommandRunner): void {
  const gateway = program.command("gateway").description("run or inspect a gateway");

  gateway
    .command("start")
    .description("run a gateway in the foreground (Ctrl-C or SIGTERM stops it gracefully)")
    .option("--id <id>", "gateway id (persisted on first start; never changes)")
    .option("--grpc <host:port>", "gRPC listen address (default 127.0.0.1:7440)")
    .option("--http <host:port>", "HTTP listen address for /livez /readyz /metrics /rpc (default 127.0.0.1:7441)")
    .option("--relay <url>", "relay to dial out to (grpc://host:port)")
    .option("--relay-key <key>", "connection key for --relay (or HERMES_RELAY_KEY)")
    .option("--relay-connection <name>", "this gateway's connection name at the relay (default: the gateway id)")
    .option("--coordinator <url>", "the coordinated mesh's etcd: etcd://host:2379[,host:2379…] (or HERMES_COORDINATOR)")
    .option("--advertise <url>", "how the other gateways of the mesh reach this one: grpc://host:port (or HERMES_ADVERTISE_URL)")
    .action(
      run(
        async (
          ctx,
          o: {
            id?: string;
            grpc?: string;
            http?: string;
            relay?: string;
            relayKey?: string;
            relayConnection?: string;
            coordinator?: string;
            advertise?: string;
          },
        ) => {
          becomeDaemon();
          const { Gateway } = await import("@hermes/gateway");
          const gw = await Gateway.start({
            home: ctx.home.root,
            overrides: {
              ...(o.id ? { id: o.id } : {}),
              ...(o.grpc ? { grpc: o.grpc } : {}),
              ...(o.http ? { http: o.http } : {}),
              ...(o.relay ? { relayUrl: o.relay } : {}),
              ...(o.relayKey ? { relayKey: o.relayKey } : {}),
              ...(o.relayConnection ? { relayConnection: o.relayConnection } : {}),
              ...(o.coordinator ? { coordinator: o.coordinator } : {}),
              ...(o.advertise ? { advertise: o.advertise } : {}),
            },
          });
          // Before the ready line: whoever waits for it has the warnings already.
          for (const warning of gw.startWarnings) warn(warning);
          process.stdout.write(
            `gateway ready: id=${gw.id} grpc=${gw.grpcAddress} http=${gw.httpAddress} control=${gw.home.controlSocket}\n`,
          );
          if (process.stderr.isTTY) {
            const h = `--home ${gw.home.root}`;
            process.stderr.write(
              `\nnext, in another terminal:\n  npx hermes ${h} profile create alice --title Researcher\n  npx hermes ${h} -p alice chat -q "hello"\n  npx hermes ${h} gateway status\n\n`,
            );
          }
          await new Promise<void>((resolve) => {
            const stop = (signal: string) => {
              gw.logger.info({ signal }, "stopping");
              gw.stop().then(resolve, resolve);
            };
            process.once("SIGTERM", () => stop("SIGTERM"));
            process.once("SIGINT", () => stop("SIGINT"));
          });
        },
      ),
    );

  gateway
    .command("status")
    .description("id, addresses, uptime, profiles, rooms, peers, relay link, platforms")
    .action(
      run(async (ctx) => {
        const gw = ctx.client(GatewayServiceClient);
        const s = await ctx.call(gw, gw.status, {});
        emit(ctx.json, s, () =>
          table(
            ["FIELD", "VALUE"],
            [
              ["id", s.gateway_id],
              ["version", s.version],
              ["home", s.home],
              ["grpc", s.grpc_address],
              ["http", s.http_address],
              ["control socket", s.control_socket],
              ["uptime", `${Math.round(s.uptime_seconds)} s`],
              ["profiles", s.profiles],
              ["rooms", s.rooms],
              ["peers", s.peers.map((p) => `${p.name} (${p.url})`).join(", ") || "-"],
              ["relay", s.relay?.state === "disabled" || !s.relay ? "-" : `${s.relay.url} (${s.relay.state})`],
              ...s.platforms.map((p) => [p.platform, platformSummary(p)]),
            ],
          ),
        );
      }),
    );
}
