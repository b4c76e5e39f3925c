import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { becomeDaemon, envValue, HermesError, PeerChannel, systemClock, unixSocketAnswers } from "@hermes/common/client";
import { type ConnectionInfo, RelayAdminServiceClient, type RelayStatus } from "@hermes/proto/hermes/v1/relay";
import type { KeyAdmin, RelayStore } from "@hermes/relay";
import type { Command } from "commander";
import { type CliContext, folderOption } from "../context.js";
import type { CommandRunner } from "../main.js";
import { emit, table, warn } from "../output.js";

interface RelayOptions {
  data?: string;
}

const DATA_HELP = "the relay's data folder (default HERMES_RELAY_DATA, else HERMES_HOME/relay)";

/** `--data DIR`, else HERMES_RELAY_DATA, else HERMES_HOME/relay. */
function dataDir(ctx: CliContext, o: RelayOptions): string {
  if (o.data !== undefined) return folderOption(o.data, "--data");
  return envValue(process.env, "HERMES_RELAY_DATA") ?? join(ctx.home.root, "relay");
}

/**
 * Key administration runs through the relay's control socket when a relay serves the data folder
 * (so a revoke disconnects at once), else directly on its database.
 */
async function withKeys<T>(
  dir: string,
  create: boolean,
  live: (admin: RelayAdmin) => Promise<T>,
  offline: (admin: KeyAdmin, store: RelayStore) => T,
): Promise<T> {
  const { KeyAdmin, RelayStore, relayControlSocket, relayDbPath } = await import("@hermes/relay");
  const socket = relayControlSocket(dir);
  if (await unixSocketAnswers(socket)) {
    const admin = relayAdmin(dir, socket);
    try {
      return await live(admin);
    } finally {
      admin.channel.close();
    }
  }
  if (create) mkdirSync(dir, { recursive: true, mode: 0o700 });
  else if (!existsSync(relayDbPath(dir))) {
    throw new HermesError(
      "not_found",
      `no relay data in ${dir}: start one with hermes relay start --data ${dir}, or pass the right --data`,
    );
  }
  const store = new RelayStore(relayDbPath(dir));
  try {
    return offline(new KeyAdmin(store, systemClock), store);
  } finally {
    store.close();
  }
}

/** RelayAdminService on the relay's control socket (no key: the socket is 0600). */
interface RelayAdmin {
  channel: PeerChannel;
  client: RelayAdminServiceClient;
}

function relayAdmin(dir: string, socket: string): RelayAdmin {
  const channel = PeerChannel.open(
    { url: `unix:${socket}`, describe: `the relay serving ${dir}`, nameReplies: false },
    { deadlineMs: 30_000 },
  );
  return { channel, client: channel.client(RelayAdminServiceClient) };
}

export function registerRelayCommands(program: Command, run: CommandRunner): void {
  const relay = program.command("relay").description("run a relay, and manage the connection keys of the gateways that dial it");

  relay
    .command("start")
    .description("run a relay in the foreground (Ctrl-C or SIGTERM stops it gracefully)")
    .option("--grpc <host:port>", "gRPC listen address for gateways (default 127.0.0.1:7450)")
    .option("--http <host:port>", "HTTP listen address for /livez /readyz /metrics (default 127.0.0.1:7451)")
    .option("--data <dir>", DATA_HELP)
    .action(
      run(async (ctx, o: { grpc?: string; http?: string } & RelayOptions) => {
        const dir = dataDir(ctx, o);
        becomeDaemon();
        const { Relay } = await import("@hermes/relay");
        const r = await Relay.start({ dataDir: dir, overrides: { grpc: o.grpc, http: o.http } });
        for (const warning of r.startWarnings) warn(warning);
        process.stdout.write(
          `relay ready: id=${r.id} grpc=${r.grpcAddress} http=${r.httpAddress} data=${dir} control=${r.controlSocket}\n`,
        );
        if (process.stderr.isTTY) {
          process.stderr.write(
            `\nnext, in another terminal:\n  npx hermes relay key add laptop --data ${dir}\n  npx hermes gateway start --relay grpc://${r.grpcAddress} --relay-key <the key>\n\n`,
          );
        }
        await new Promise<void>((resolve) => {
          const stop = (signal: string) => {
            r.logger.info({ signal }, "stopping");
            r.stop().then(resolve, resolve);
          };
          process.once("SIGTERM", () => stop("SIGTERM"));
          process.once("SIGINT", () => stop("SIGINT"));
        });
      }),
    );

  relay
    .command("status")
    .description("the running relay: id, addresses, uptime, connections, queue, roster epoch")
    .option("--data <dir>", DATA_HELP)
    .action(
      run(async (ctx, o: RelayOptions) => {
        const dir = dataDir(ctx, o);
        const { relayControlSocket } = await import("@hermes/relay");
        const socket = relayControlSocket(dir);
        if (!(await unixSocketAnswers(socket))) {
          throw new HermesError("unavailable", `no relay is serving ${dir}; start one with: hermes relay start --data ${dir}`);
        }
        const { channel, client } = relayAdmin(dir, socket);
        try {
          const s: RelayStatus = await channel.unary(client, client.status, {});
          emit(ctx.json, s, () =>
            table(
              ["FIELD", "VALUE"],
              [
                ["id", s.relay_id],
                ["version", s.version],
                ["data", s.data_dir],
                ["grpc", s.grpc_address],
                ["http", s.http_address],
                ["uptime", `${Math.round(s.uptime_seconds)} s`],
                ["connections", `${s.connections_online} online of ${s.connections_known}`],
                ["queued", s.queued],
                ["in flight", s.in_flight],
                ["roster epoch", s.roster_epoch],
              ],
            ),
          );
        } finally {
          channel.close();
        }
      }),
    );

  const key = relay.command("key").description("connection keys: one per gateway, named after its connection");

  key
    .command("add <name>")
    .description("issue a key for connection NAME; it is printed once (as the last word), the relay keeps only its hash")
    .option("--data <dir>", DATA_HELP)
    .action(
      run(async (ctx, name: string, o: RelayOptions) => {
        const dir = dataDir(ctx, o);
        const added = await withKeys<{ connection: string; key: string; created_at: string }>(
          dir,
          true,
          ({ channel, client }) => channel.unary(client, client.addKey, { connection: name }),
          (admin) => admin.add(name),
        );
        emit(
          ctx.json,
          added,
          () =>
            `connection ${added.connection} added. Give this key to its gateway (gateway start --relay-key, or relay.key in its config.yaml with relay.connection: ${added.connection}); it is shown only once:\n${added.key}`,
        );
      }),
    );

  key
    .command("list")
    .description("connections with a key: online or not, gateway id, bots announced, last seen")
    .option("--data <dir>", DATA_HELP)
    .action(
      run(async (ctx, o: RelayOptions) => {
        const dir = dataDir(ctx, o);
        const list = await withKeys<ConnectionInfo[]>(
          dir,
          false,
          async ({ channel, client }) => (await channel.unary(client, client.listKeys, {})).connections,
          (admin) => admin.list(),
        );
        emit(ctx.json, { connections: list }, () =>
          list.length === 0
            ? `no connection keys yet; add one with: hermes relay key add NAME --data ${dir}`
            : table(
                ["CONNECTION", "ONLINE", "GATEWAY", "BOTS", "CREATED", "LAST SEEN"],
                list.map((k) => [k.connection, k.online ? "yes" : "no", k.gateway_id || "-", k.bots, k.created_at, k.last_seen_at || "-"]),
              ),
        );
      }),
    );

  key
    .command("revoke <name>")
    .description("revoke connection NAME's key: its gateway is disconnected and refused from now on")
    .option("--data <dir>", DATA_HELP)
    .action(
      run(async (ctx, name: string, o: RelayOptions) => {
        const dir = dataDir(ctx, o);
        const revoked = await withKeys(
          dir,
          false,
          ({ channel, client }) => channel.unary(client, client.revokeKey, { connection: name }),
          (_admin, store) => {
            if (!store.revokeKey(name)) {
              throw new HermesError("not_found", `no key for connection ${name}; list them with: hermes relay key list --data ${dir}`);
            }
            // The roster lost that connection's bots: the capability epoch rises.
            store.saveEpoch(store.rosterEpoch() + 1);
            return { connection: name, disconnected: false };
          },
        );
        emit(
          ctx.json,
          revoked,
          () => `revoked the key of connection ${revoked.connection}${revoked.disconnected ? " (its gateway was disconnected)" : ""}`,
        );
      }),
    );
}
