import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { isAbsolute, join, relative } from "node:path";
import type { ServiceError } from "@grpc/grpc-js";
import { fromServiceError, HermesError, readEnvFile, systemClock, unixSocketAnswers, writeFileAtomic } from "@hermes/common";
import { addPeer, HermesHome, ModelConfigSource } from "@hermes/gateway/direct";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import { type ReplicateProgress, type Room, RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import { KeyAdmin, RelayStore, relayControlSocket, relayDbPath } from "@hermes/relay";
import { z } from "zod";
import { callOps } from "../commands/ops.js";
import { CliContext } from "../context.js";
import { table } from "../output.js";
import { Child, type ChildSpec, lostPortRace } from "./children.js";
import {
  DEMO_ROOM,
  type GatewayPlan,
  type MeshPlan,
  memberSpecs,
  planMesh,
  RELAY_NAME,
  tryCommands,
  WELCOME_EVENT_ID,
} from "./demo-plan.js";
import { ETCD_MISSING, findEtcd, LocalEtcd } from "./etcd.js";
import { Supervisor } from "./supervisor.js";

/**
 * `hermes up [--gateways N] [--dir DIR]`: the local mesh for newcomers. A relay and N gateways
 * run as child processes of this command, each with its own home under DIR; demo bots and a room
 * (authority on gw-1, replicas following on the others) are set up; the command prints where
 * everything is and what to try, then waits. A child that exits on its own is reported and started
 * again (supervisor.ts) while the rest keeps running; Ctrl-C (SIGINT) or SIGTERM stops every child
 * gracefully. Running it again on the same DIR reuses everything there (same ports when free, same
 * keys). The demo plan (bots, room, following) is applied to a gateway once, never again
 * (DIR/demo.json), so what the user changed since (a renamed or deleted bot, a moved room) stays.
 */

const STATE_FILE = "up.json";
/** The gateways the demo plan was applied to: each gets its bots and joins the room once, ever. */
const DEMO_FILE = "demo.json";
/** Unix socket paths must fit in sun_path (104 bytes on macOS, 108 on Linux). */
const MAX_SOCKET_PATH = 100;
const STOP_GRACE_MS = 15_000;
const PORT_ATTEMPTS = 3;

const portsSchema = z.object({ grpc: z.number().int().min(0).max(65535), http: z.number().int().min(0).max(65535) });
type Ports = z.infer<typeof portsSchema>;

/** DIR/up.json: what a later run reuses (the API key every gateway accepts, the ports). */
const upStateSchema = z.object({
  api_key: z.string().min(16),
  /** `--coordinator`: the key the gateways call each other with (HERMES_MESH_KEY), and etcd's ports. */
  mesh_key: z.string().min(16).optional(),
  etcd_ports: z.object({ client: z.number().int(), peer: z.number().int() }).optional(),
  ports: z.record(z.string(), portsSchema),
  /** Child pids while the mesh runs (so a second `hermes up` can say what holds the folder). */
  pids: z.record(z.string(), z.number().int()).optional(),
});
type UpState = z.infer<typeof upStateSchema>;

interface Layout {
  dir: string;
  relayDir: string;
  logsDir: string;
  homes: Map<string, HermesHome>;
}

// ------------------------------------------------------------------------------------------
// Files under DIR

function layout(dir: string, plan: MeshPlan): Layout {
  return {
    dir,
    relayDir: join(dir, RELAY_NAME),
    logsDir: join(dir, "logs"),
    homes: new Map(plan.gateways.map((g) => [g.name, new HermesHome(join(dir, g.name))])),
  };
}

/** The previous run's state; a missing or damaged file means new ports and key (bots and rooms stay). */
function loadState(dir: string): UpState | undefined {
  const file = join(dir, STATE_FILE);
  if (!existsSync(file)) return undefined;
  try {
    const parsed = upStateSchema.safeParse(JSON.parse(readFileSync(file, "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function saveState(dir: string, state: UpState): void {
  writeFileAtomic(join(dir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`, 0o600);
}

const demoSchema = z.object({ applied: z.array(z.string()) });

/** Gateways the demo plan was applied to. A missing or damaged file means none (applying it again only adds what is missing). */
function loadDemoApplied(dir: string): Set<string> {
  const file = join(dir, DEMO_FILE);
  if (!existsSync(file)) return new Set();
  try {
    const parsed = demoSchema.safeParse(JSON.parse(readFileSync(file, "utf8")));
    return new Set(parsed.success ? parsed.data.applied : []);
  } catch {
    return new Set();
  }
}

function saveDemoApplied(dir: string, applied: Iterable<string>): void {
  writeFileAtomic(join(dir, DEMO_FILE), `${JSON.stringify({ applied: [...new Set(applied)].sort() }, null, 2)}\n`, 0o600);
}

/** Sets KEY=VALUE lines in a .env file (mode 0600), keeping every other line. */
function setEnvVars(file: string, vars: Record<string, string>): void {
  const lines = existsSync(file) ? readFileSync(file, "utf8").split(/\r?\n/) : [];
  const pending = new Map(Object.entries(vars));
  const out = lines.map((line) => {
    const name = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/.exec(line)?.[1];
    if (!name || !pending.has(name)) return line;
    const value = pending.get(name)!;
    pending.delete(name);
    return `${name}=${value}`;
  });
  while (out.length > 0 && out[out.length - 1] === "") out.pop();
  for (const [name, value] of pending) out.push(`${name}=${value}`);
  writeFileAtomic(file, `${out.join("\n")}\n`, 0o600);
}

// ------------------------------------------------------------------------------------------
// Ports and sockets

function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.once("error", () => resolvePort(undefined));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === "object" && address ? address.port : undefined;
      server.close(() => resolvePort(bound));
    });
  });
}

/** Each wanted port if it is free (and not taken twice), else a free one the system picks. */
async function choosePorts(wanted: Record<string, Ports>): Promise<Record<string, Ports>> {
  const taken = new Set<number>();
  const pick = async (port: number | undefined): Promise<number> => {
    if (port !== undefined && port > 0 && !taken.has(port) && (await listenOnce(port)) === port) {
      taken.add(port);
      return port;
    }
    for (;;) {
      const fresh = await listenOnce(0);
      if (fresh !== undefined && !taken.has(fresh)) {
        taken.add(fresh);
        return fresh;
      }
    }
  };
  const out: Record<string, Ports> = {};
  for (const [name, ports] of Object.entries(wanted)) out[name] = { grpc: await pick(ports.grpc), http: await pick(ports.http) };
  return out;
}

/** Refuses when a relay or gateway of this folder already runs (a second `hermes up`, or a leftover). */
async function assertNotRunning(l: Layout, previous: UpState | undefined): Promise<void> {
  const sockets = [
    [RELAY_NAME, relayControlSocket(l.relayDir)],
    ...[...l.homes].map(([name, home]) => [name, home.controlSocket]),
  ] as const;
  for (const [name, socket] of sockets) {
    if (await unixSocketAnswers(socket)) {
      const pid = previous?.pids?.[name];
      throw new HermesError(
        "already_exists",
        `${name} of ${l.dir} is already running${pid ? ` (pid ${pid})` : ""}: is another hermes up using this folder? Stop it with Ctrl-C there${pid ? ` (or kill ${pid})` : ""}, or pass another --dir`,
      );
    }
  }
}

// ------------------------------------------------------------------------------------------
// Keys and peers (before anything starts: plain files and the relay's database)

/**
 * One relay key per gateway (connection = gateway name), kept in the gateway's .env as
 * HERMES_RELAY_KEY. A gateway that has its key and a relay that knows the connection are left as
 * they are; a side that lost its half gets a fresh pair.
 */
function prepareRelayKeys(l: Layout, plan: MeshPlan): void {
  mkdirSync(l.relayDir, { recursive: true, mode: 0o700 });
  const store = new RelayStore(relayDbPath(l.relayDir));
  try {
    const admin = new KeyAdmin(store, systemClock);
    const known = new Set(store.keys().map((k) => k.connection));
    for (const g of plan.gateways) {
      const home = l.homes.get(g.name)!;
      if (readEnvFile(home.envFile).HERMES_RELAY_KEY && known.has(g.name)) continue;
      if (known.has(g.name)) store.revokeKey(g.name);
      setEnvVars(home.envFile, { HERMES_RELAY_KEY: admin.add(g.name).key });
    }
  } finally {
    store.close();
  }
}

/** Every gateway knows every other as a peer (URL and the mesh's API key): replicate --from gw-2 works. */
function preparePeers(l: Layout, plan: MeshPlan, ports: Record<string, Ports>, apiKey: string): void {
  for (const g of plan.gateways) {
    const home = l.homes.get(g.name)!;
    setEnvVars(home.envFile, { API_SERVER_KEY: apiKey });
    for (const other of plan.gateways) {
      if (other.name === g.name) continue;
      addPeer(home, { name: other.name, url: `grpc://127.0.0.1:${ports[other.name]!.grpc}`, key: apiKey, note: "hermes up" });
    }
  }
}

// ------------------------------------------------------------------------------------------
// Children

interface Launch {
  kind: ChildSpec["kind"];
  ports: Ports;
  args: (p: Ports) => string[];
  logFile: string;
}

class Mesh {
  /** The current child of each daemon, in start order (a restart keeps the daemon's place). */
  readonly children = new Map<string, Child>();
  /** How each daemon was started, for a restart with the same ports. */
  private readonly launches = new Map<string, Launch>();
  private closed = false;

  /**
   * Starts a daemon and waits for its ready line; retries with other ports if it lost a port race
   * (up to `portAttempts` tries).
   */
  async start(
    name: string,
    kind: ChildSpec["kind"],
    ports: Ports,
    args: (p: Ports) => string[],
    logFile: string,
    portAttempts = PORT_ATTEMPTS,
  ): Promise<{ child: Child; ports: Ports }> {
    const previous = this.children.get(name);
    let current = ports;
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new HermesError("unavailable", `not starting ${name}: the mesh is stopping`);
      const child = new Child({ name, kind, args: args(current), logFile });
      this.children.set(name, child);
      try {
        await child.ready();
        this.launches.set(name, { kind, ports: current, args, logFile });
        return { child, ports: current };
      } catch (err) {
        if (previous) this.children.set(name, previous);
        else this.children.delete(name);
        if (attempt >= portAttempts || !lostPortRace(err, child)) throw err;
        current = (await choosePorts({ [name]: { grpc: 0, http: 0 } }))[name]!;
      }
    }
  }

  /** Starts a daemon that exited again, with the ports it had (the others' peer entries name them). */
  async restart(name: string): Promise<Child> {
    const launch = this.launches.get(name);
    if (!launch) throw new HermesError("not_found", `${name} was never started`);
    return (await this.start(name, launch.kind, launch.ports, launch.args, launch.logFile, 1)).child;
  }

  /** Gateways first (they flush and say goodbye to the relay), then the relay; how each ended. */
  async stopAll(): Promise<string[]> {
    this.closed = true;
    const stop = (kind: ChildSpec["kind"]) =>
      Promise.all(
        [...this.children.values()]
          .filter((c) => c.spec.kind === kind)
          .map(async (c) => {
            const { code, signal } = await c.stop(STOP_GRACE_MS);
            return `${c.spec.name} (${signal ? `killed by ${signal}` : `exit ${code}`})`;
          }),
      );
    const gateways = await stop("gateway");
    return [...gateways, ...(await stop("relay"))];
  }

  /** Last resort on process exit (synchronous): nothing may outlive `hermes up`. */
  killAll(): void {
    for (const c of this.children.values()) c.kill("SIGTERM");
  }
}

// ------------------------------------------------------------------------------------------
// Demo set-up through each gateway's control socket

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new HermesError("timeout", `${what} did not happen within ${timeoutMs / 1000} s${last ? ` (${(last as Error).message})` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Gw {
  plan: GatewayPlan;
  ctx: CliContext;
  gateway: GatewayServiceClient;
  rooms: RoomServiceClient;
}

/** The demo bots of a gateway the plan was not applied to yet (those it has already are kept). */
async function ensureBots(gw: Gw): Promise<void> {
  const have = new Set((await listBots(gw)).map((b) => b.name));
  for (const bot of gw.plan.bots) {
    if (have.has(bot.name)) continue;
    await gw.ctx.call(gw.gateway, gw.gateway.createProfile, {
      name: bot.name,
      title: bot.title,
      description: bot.description,
      model: "",
      provider: "",
      clone_from: "",
      soul: "",
    });
  }
}

/** The named profiles a gateway has now (after renames and deletes: what the summary shows). */
async function listBots(gw: Gw): Promise<{ name: string; title: string }[]> {
  const { profiles } = await gw.ctx.call(gw.gateway, gw.gateway.listProfiles, {});
  return profiles.filter((p) => !p.is_default).map((p) => ({ name: p.name, title: p.title }));
}

async function roomOn(gw: Gw): Promise<Room | undefined> {
  try {
    return (await gw.ctx.call(gw.rooms, gw.rooms.state, { room_id: DEMO_ROOM, include_disbanded: true })).room;
  } catch (err) {
    if (err instanceof HermesError && err.reason === "not_found") return undefined;
    throw err;
  }
}

function replicate(gw: Gw, from: string): Promise<ReplicateProgress | undefined> {
  return new Promise((done, fail) => {
    let last: ReplicateProgress | undefined;
    const stream = gw.rooms.replicate({ room_id: DEMO_ROOM, from: { url: "", key: "", peer: from }, follow: true }, gw.ctx.metadata());
    stream.on("data", (p: ReplicateProgress) => {
      last = p;
    });
    stream.on("error", (err: ServiceError) => fail(fromServiceError(err)));
    stream.on("end", () => done(last));
  });
}

/**
 * The demo room: created on gw-1 when the plan is first applied to it (with a welcome message that
 * starts a discussion among its members); each gateway the plan is applied to then follows whoever
 * leads the room now. Gateways it was applied to before are left as they are. Returns the authority
 * (undefined, with a note, when no gateway of the mesh leads the room).
 */
async function setUpRoom(
  gws: Gw[],
  fresh: ReadonlySet<string>,
  plan: MeshPlan,
  notes: string[],
  quorum: boolean,
): Promise<{ gateway: string; epoch: number } | undefined> {
  const states = await Promise.all(gws.map(roomOn));
  const leaders = gws
    .map((gw, i) => ({ gw, room: states[i] }))
    .filter((x) => x.room?.role === "authority" && !x.room.fenced_by)
    .sort((x, y) => y.room!.authority_epoch - x.room!.authority_epoch);
  let authority: { gateway: string; epoch: number };
  const first = gws[0]!;
  if (leaders[0]) {
    authority = { gateway: leaders[0].gw.plan.name, epoch: leaders[0].room!.authority_epoch };
  } else if (states.some((s) => s !== undefined) || !fresh.has(first.plan.name)) {
    const known = states.find((s) => s !== undefined);
    notes.push(
      known
        ? `room ${DEMO_ROOM} has no running authority here (the copies name ${known.authority_gateway_id}@${known.authority_epoch}); finish the authority move (docs/OPERATIONS.md)`
        : `room ${DEMO_ROOM} is not on any gateway of this mesh any more`,
    );
    return undefined;
  } else {
    const replicas = gws.slice(1).map((gw) => gw.plan.name);
    const withQuorum = quorum && replicas.length > 0;
    await first.ctx.call(first.rooms, first.rooms.create, {
      room_id: DEMO_ROOM,
      name: "Lobby",
      members: memberSpecs(plan, first.plan.name).map((spec) => {
        const at = spec.indexOf("@");
        return at < 0
          ? { member_id: spec, profile: spec }
          : { member_id: spec, profile: spec.slice(0, at), gateway_id: spec.slice(at + 1) };
      }),
      ...(withQuorum ? { replication: { mode: "quorum", replicas, min_insync: 0 } } : {}),
    });
    const welcome = {
      room_id: DEMO_ROOM,
      event_id: WELCOME_EVENT_ID,
      payload: {
        text: withQuorum
          ? `Welcome to the lobby! It is led by ${first.plan.name} and acknowledged only once the other gateways hold it: kill ${first.plan.name} and another takes over. Say hello, @all.`
          : `Welcome to the lobby! It lives on ${first.plan.name} and is replicated to the other gateways. Say hello, @all.`,
      },
    };
    // A quorum room accepts sends once its replicas caught up (not_enough_replicas until then).
    await waitFor(
      `${DEMO_ROOM}'s first message`,
      async () => {
        await first.ctx.call(first.rooms, first.rooms.send, welcome);
        return true;
      },
      30_000,
    );
    authority = { gateway: first.plan.name, epoch: 1 };
    // Quorum replicas follow by themselves.
    if (withQuorum) return authority;
  }
  if (quorum) return authority;
  await Promise.all(
    gws
      .filter((gw) => fresh.has(gw.plan.name) && gw.plan.name !== authority.gateway)
      .map(async (gw) => {
        const s = await gw.ctx.call(gw.rooms, gw.rooms.replicaState, { room_id: DEMO_ROOM }).catch(() => undefined);
        const following = s?.following && s.following.state !== "stopped" && s.authority?.gateway_id === authority.gateway;
        if (following) return;
        try {
          await replicate(gw, authority.gateway);
        } catch (err) {
          notes.push(`${gw.plan.name} could not replicate ${DEMO_ROOM} from ${authority.gateway}: ${(err as Error).message}`);
        }
      }),
  );
  return authority;
}

// ------------------------------------------------------------------------------------------
// The run

function displayPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel.length > 0 && !rel.startsWith("..") && !isAbsolute(rel) ? rel : path;
}

/** Runs the local mesh until Ctrl-C (loaded only for `hermes up`: it needs the gateway and relay packages). */
export async function up(count: number, dir: string, options: { coordinator?: boolean } = {}): Promise<void> {
  const plan = planMesh(count);
  const l = layout(dir, plan);
  const longest = join(dir, plan.gateways.at(-1)!.name, "gateway.sock");
  if (Buffer.byteLength(longest) > MAX_SOCKET_PATH) {
    throw new HermesError("invalid_params", `--dir ${dir} is too deep for the gateways' control sockets (${longest}); pick a shorter path`);
  }
  mkdirSync(l.logsDir, { recursive: true, mode: 0o700 });
  for (const home of l.homes.values()) home.ensureRoot();
  const previous = loadState(dir);
  await assertNotRunning(l, previous);

  const wanted: Record<string, Ports> = { [RELAY_NAME]: previous?.ports[RELAY_NAME] ?? plan.relayPorts };
  for (const g of plan.gateways) wanted[g.name] = previous?.ports[g.name] ?? g.preferredPorts;
  const ports = await choosePorts(wanted);
  const state: UpState = { api_key: previous?.api_key ?? randomBytes(24).toString("base64url"), ports, pids: {} };
  let etcdBinary: string | undefined;
  if (options.coordinator) {
    etcdBinary = findEtcd();
    if (!etcdBinary) throw new HermesError("missing_config", ETCD_MISSING);
    state.mesh_key = previous?.mesh_key ?? randomBytes(24).toString("base64url");
    const etcdWanted = previous?.etcd_ports ?? { client: 2379, peer: 2380 };
    const chosen = await choosePorts({ etcd: { grpc: etcdWanted.client, http: etcdWanted.peer } });
    state.etcd_ports = { client: chosen.etcd!.grpc, peer: chosen.etcd!.http };
    for (const home of l.homes.values()) setEnvVars(home.envFile, { HERMES_MESH_KEY: state.mesh_key });
  }
  prepareRelayKeys(l, plan);

  const mesh = new Mesh();
  let etcd: LocalEtcd | undefined;
  // Nothing may outlive `hermes up`, even when it dies of an error.
  const onExit = () => {
    mesh.killAll();
    etcd?.kill();
  };
  process.once("exit", onExit);
  let signalled: (signal: string) => void = () => undefined;
  const stopSignal = new Promise<string>((resolveSignal) => {
    signalled = resolveSignal;
  });
  let stopping: Promise<void> | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (!stopping) process.stderr.write(`\nhermes up: ${signal}, stopping the mesh…\n`);
    signalled(signal);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  const contexts: CliContext[] = [];
  let ended: string[] = [];
  let stopSupervising = () => {};
  const shutdown = () => {
    stopping ??= (async () => {
      stopSupervising();
      for (const ctx of contexts) ctx.close();
      ended = await mesh.stopAll();
      if (etcd) {
        await etcd.stop(STOP_GRACE_MS);
        ended.push("etcd");
      }
      saveState(dir, { ...state, pids: {} });
    })();
    return stopping;
  };

  try {
    if (etcdBinary && state.etcd_ports) {
      etcd = await LocalEtcd.start(etcdBinary, join(dir, "etcd"), join(l.logsDir, "etcd.log"), state.etcd_ports);
      process.stderr.write(`hermes up: etcd on ${etcd.endpoint} (pid ${etcd.pid}, data ${displayPath(join(dir, "etcd"))})\n`);
    }
    const setUp = startAndSetUp(plan, l, ports, state, mesh, contexts, () => stopping !== undefined, etcd?.endpoint);
    const first = await Promise.race([
      setUp.then((r) => ({ kind: "ready" as const, ...r })),
      stopSignal.then(() => ({ kind: "signal" as const })),
    ]);
    if (first.kind === "signal") {
      setUp.catch(() => undefined); // it fails as its children stop: nothing to report
      await shutdown();
      process.stdout.write("hermes up: stopped before the mesh was ready\n");
      return;
    }
    const keys = restartKeys(process.stdin, {
      restartNow: () => supervisor.restartNow(),
      interrupt: () => onSignal("SIGINT"),
    });
    const supervisor = new Supervisor({
      restart: (name) => mesh.restart(name),
      say: (line) => process.stderr.write(`${line}\n`),
      restarted: (child) => {
        state.pids![child.spec.name] = child.pid;
        saveState(dir, state);
      },
      restartHint: keys ? "press r to restart it now" : undefined,
    });
    stopSupervising = () => {
      supervisor.close();
      keys?.close();
    };
    printSummary(dir, plan, l, ports, mesh, first);
    // Running until a signal; a child that exits meanwhile is reported and started again.
    for (const child of mesh.children.values()) supervisor.watch(child);
    await stopSignal;
    await shutdown();
    process.stdout.write(`hermes up: stopped ${ended.join(", ")}; run it again to resume where you left off\n`);
  } catch (err) {
    await shutdown();
    throw err;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.off("exit", onExit);
  }
}

/**
 * On a terminal, single keys while the mesh runs: `r` restarts whatever is down at once. Raw mode
 * turns Ctrl-C into a key, so it is passed on as the interrupt it was. Undefined without a TTY.
 */
function restartKeys(stdin: NodeJS.ReadStream, on: { restartNow: () => void; interrupt: () => void }): { close: () => void } | undefined {
  if (!stdin.isTTY) return undefined;
  const onKey = (key: string) => {
    if (key === "r" || key === "R") on.restartNow();
    else if (key === "\u0003") on.interrupt();
  };
  stdin.setRawMode(true);
  stdin.setEncoding("utf8");
  stdin.on("data", onKey);
  stdin.resume();
  return {
    close: () => {
      stdin.off("data", onKey);
      stdin.setRawMode(false);
      stdin.pause();
    },
  };
}

interface SetUp {
  authority: { gateway: string; epoch: number } | undefined;
  notes: string[];
  /** Each gateway's named profiles as they are now. */
  bots: Map<string, { name: string; title: string }[]>;
  /** Each gateway's web console and a one-time login link to it (undefined when the gateway did not give one). */
  consoles: Map<string, { url: string; login: string | undefined }>;
}

/** Relay, then gateways, then the demo set-up where it was not applied yet; returns what the summary shows. */
async function startAndSetUp(
  plan: MeshPlan,
  l: Layout,
  ports: Record<string, Ports>,
  state: UpState,
  mesh: Mesh,
  contexts: CliContext[],
  stopped: () => boolean,
  etcdEndpoint: string | undefined,
): Promise<SetUp> {
  const relay = await mesh.start(
    RELAY_NAME,
    "relay",
    ports[RELAY_NAME]!,
    (p) => ["relay", "start", "--data", l.relayDir, "--grpc", `127.0.0.1:${p.grpc}`, "--http", `127.0.0.1:${p.http}`],
    join(l.logsDir, `${RELAY_NAME}.log`),
  );
  ports[RELAY_NAME] = relay.ports;
  state.pids![RELAY_NAME] = relay.child.pid;
  preparePeers(l, plan, ports, state.api_key);
  const started = await Promise.all(
    plan.gateways.map((g) =>
      mesh.start(
        g.name,
        "gateway",
        ports[g.name]!,
        (p) => [
          "--home",
          l.homes.get(g.name)!.root,
          "gateway",
          "start",
          "--id",
          g.name,
          "--grpc",
          `127.0.0.1:${p.grpc}`,
          "--http",
          `127.0.0.1:${p.http}`,
          "--relay",
          `grpc://127.0.0.1:${relay.ports.grpc}`,
          ...(etcdEndpoint ? ["--coordinator", etcdEndpoint] : []),
        ],
        join(l.logsDir, `${g.name}.log`),
      ),
    ),
  );
  let moved = false;
  plan.gateways.forEach((g, i) => {
    const s = started[i]!;
    moved ||= s.ports.grpc !== ports[g.name]!.grpc;
    ports[g.name] = s.ports;
    state.pids![g.name] = s.child.pid;
  });
  // A gateway that had to take other ports: the others' peer entries follow (read on next use).
  if (moved) preparePeers(l, plan, ports, state.api_key);
  saveState(l.dir, state);
  if (stopped()) throw new HermesError("unavailable", "stopped during set-up");

  const gws: Gw[] = plan.gateways.map((g) => {
    const ctx = new CliContext({ home: l.homes.get(g.name)!.root });
    contexts.push(ctx);
    return { plan: g, ctx, gateway: ctx.client(GatewayServiceClient), rooms: ctx.client(RoomServiceClient) };
  });
  const applied = loadDemoApplied(l.dir);
  const fresh = new Set(plan.gateways.map((g) => g.name).filter((name) => !applied.has(name)));
  await Promise.all(gws.filter((gw) => fresh.has(gw.plan.name)).map(ensureBots));
  await Promise.all(
    gws.map((gw) =>
      waitFor(
        `${gw.plan.name}'s relay link`,
        async () => ((await gw.ctx.call(gw.gateway, gw.gateway.status, {})).relay?.state === "connected" ? true : undefined),
        30_000,
      ),
    ),
  );
  const notes: string[] = [];
  const authority = await setUpRoom(gws, fresh, plan, notes, etcdEndpoint !== undefined);
  saveDemoApplied(l.dir, [...applied, ...fresh]);
  const bots = new Map(await Promise.all(gws.map(async (gw) => [gw.plan.name, await listBots(gw)] as const)));
  const consoles = new Map(
    await Promise.all(
      gws.map(async (gw) => {
        const link = await callOps<{ url: string }>(gw.ctx, "console.login_link").catch(() => undefined);
        return [gw.plan.name, { url: `http://127.0.0.1:${ports[gw.plan.name]!.http}/`, login: link?.url }] as const;
      }),
    ),
  );
  return { authority, notes, bots, consoles };
}

/** How a bot's model reads in the banner: `local` (the built-in stand-in) or `provider/model`. */
function modelLabel(home: HermesHome, bot: string): string {
  try {
    const { provider = "local", model } = new ModelConfigSource(home).forProfile(bot).global;
    return provider === "local" ? "local" : `${provider}/${model ?? "?"}`;
  } catch {
    return "config invalid";
  }
}

/** While a bot runs on the stand-in, what it is and the one command that gives it a real model. */
function localModelNote(plan: MeshPlan, l: Layout): string[] {
  const first = plan.gateways[0]!;
  const home = l.homes.get(first.name)!;
  if (!plan.gateways.some((g) => g.bots.some((b) => modelLabel(l.homes.get(g.name)!, b.name) === "local"))) return [];
  return [
    "model `local`: the built-in stand-in, deterministic canned replies with no model and no network (enough to try rooms and delivery).",
    "  For real answers point a bot at an OpenAI-compatible server (Ollama, llama.cpp's server, vLLM; the key is read from",
    "  OPENAI_API_KEY, or the variable --api-key-env names, in the bot's .env: any value for a server that needs none), e.g.:",
    `  npx hermes --home ${displayPath(home.root)} profile set ${first.bots[0]!.name} --provider openai --base-url http://127.0.0.1:11434/v1 --model llama3.2`,
  ];
}

function printSummary(
  dir: string,
  plan: MeshPlan,
  l: Layout,
  ports: Record<string, Ports>,
  mesh: Mesh,
  { authority, notes, bots, consoles }: SetUp,
): void {
  const pid = (name: string) => String(mesh.children.get(name)?.pid ?? "-");
  const rows = [
    [
      RELAY_NAME,
      `127.0.0.1:${ports[RELAY_NAME]!.grpc}`,
      `127.0.0.1:${ports[RELAY_NAME]!.http}`,
      displayPath(l.relayDir),
      "-",
      pid(RELAY_NAME),
    ],
    ...plan.gateways.map((g) => [
      g.name,
      `127.0.0.1:${ports[g.name]!.grpc}`,
      `127.0.0.1:${ports[g.name]!.http}`,
      displayPath(l.homes.get(g.name)!.root),
      (bots.get(g.name) ?? [])
        .map((b) => `${b.name} (${b.title ? `${b.title}, ` : ""}${modelLabel(l.homes.get(g.name)!, b.name)})`)
        .join(", ") || "-",
      pid(g.name),
    ]),
  ];
  const replicas = plan.gateways.map((g) => g.name).filter((n) => n !== authority?.gateway);
  const sections = tryCommands(plan, {
    hermes: "npx hermes",
    homeArg: (g) => displayPath(l.homes.get(g)!.root),
    authority,
  });
  const out = [
    "",
    `hermes up: a local mesh in ${displayPath(dir)}: a relay and ${plan.gateways.length} gateway(s), each a child process of this command`,
    "",
    table(["NAME", "GRPC", "HTTP", "HOME / DATA", "BOTS", "PID"], rows),
    "",
    authority
      ? `room ${DEMO_ROOM}: authority ${authority.gateway}@${authority.epoch}${replicas.length > 0 ? `, replicas following on ${replicas.join(", ")}` : ""}`
      : `room ${DEMO_ROOM}: no authority on this mesh`,
    `logs: ${displayPath(l.logsDir)}/<name>.log    metrics: curl -s 127.0.0.1:${ports[plan.gateways[0]!.name]!.http}/metrics`,
    "",
    "web consoles (each link logs you in once, within 10 minutes; later log in with the api_key of up.json, or run",
    "  npx hermes --home <home> console link for a new link):",
    ...plan.gateways.map((g) => {
      const c = consoles.get(g.name);
      return `  ${g.name}: ${c?.url ?? "-"}${c?.login ? `    login: ${c.login}` : ""}`;
    }),
    "",
    ...localModelNote(plan, l),
    ...notes.map((n) => `note: ${n}`),
    "",
    "what to try, in another terminal:",
    ...sections.flatMap((s) => [`  # ${s.title}`, ...s.commands.map((c) => `  ${c}`)]),
    "",
    "A gateway or the relay that exits (try: kill <PID>) is restarted after a few seconds; the others keep running.",
    "Ctrl-C stops everything; run it again to resume where you left off.",
    `mesh ready: dir=${dir} relay=127.0.0.1:${ports[RELAY_NAME]!.grpc} gateways=${plan.gateways.map((g) => `${g.name}@127.0.0.1:${ports[g.name]!.grpc}`).join(",")}`,
    "",
  ];
  process.stdout.write(out.join("\n"));
}
