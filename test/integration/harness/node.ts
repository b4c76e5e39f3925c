// One container of a test mesh: a gateway, a relay, a NAT router or a plain probe. It survives
// its container: crash() + restart() start a new container with the same name, aliases,
// networks and /data volume, which is how "kill -9, then restart on the same disk" is tested.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GenericContainer, type StartedTestContainer, Wait, type WaitStrategy } from "testcontainers";
import { dockerode, isNotFound } from "./docker-client.js";
import { type HttpProbeResult, httpProbeArgv, parseHttpProbe } from "./in-container-http.js";

export interface MeshNetwork {
  name: string;
  id: string;
  subnet: string;
  /** The bridge's own address (the host side). */
  gatewayIp: string;
  masquerade: boolean;
}

/** What a node needs from its mesh (kept narrow so node.ts does not import mesh.ts). */
export interface MeshContext {
  readonly name: string;
  readonly apiKey: string;
  readonly cli: CliFlavor;
  readonly logDir: string;
  resourceName(suffix: string): string;
  labels(extra?: Record<string, string>): Record<string, string>;
}

export type CliFlavor = "real" | "standin";
export const STANDIN_PATH = "/opt/hermes-standin/hermes.mjs";

export interface ContainerSpec {
  image: string;
  /** Arguments for the image's entrypoint (`hermes` in the app image). */
  command: string[];
  entrypoint?: string[];
  user?: string;
  env: Record<string, string>;
  exposedPorts: number[];
  /** A fresh wait strategy per start (strategies keep state). */
  wait?: () => WaitStrategy;
  capAdd: string[];
  sysctls: Record<string, string>;
  /** Named volume mounted at /data. */
  volume?: string;
  files: Array<{ content: string; target: string; mode?: number }>;
  startupTimeoutMs: number;
}

export interface ExecOutcome {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  /** "0" to run as root (needed for ip/nft; the app image runs as uid 10001). */
  user?: string;
  env?: Record<string, string>;
}

type Hook = (node: MeshNode) => Promise<void>;

/** argv: ms, command…; runs the command with a time limit and prints how it ended on a last line. */
const WITHIN_SCRIPT = `
const { spawn } = require("node:child_process");
const [ms, cmd, ...args] = process.argv.slice(1);
const child = spawn(cmd, args, { stdio: ["ignore", "inherit", "inherit"] });
let timedOut = false;
const timer = setTimeout(() => { timedOut = true; child.kill("SIGTERM"); }, Number(ms));
child.on("exit", (code) => {
  clearTimeout(timer);
  process.stdout.write("\\n__within__ " + JSON.stringify({ code, timedOut }) + "\\n");
});
`;

/** GenericContainer has no sysctl setter; the field is protected, so a subclass sets it. */
class SpecContainer extends GenericContainer {
  withSysctls(sysctls: Record<string, string>): this {
    this.hostConfig.Sysctls = { ...this.hostConfig.Sysctls, ...sysctls };
    return this;
  }
}

export class MeshNode {
  private current: StartedTestContainer | undefined;
  private readonly attached: MeshNetwork[];
  private readonly afterStartHooks: Hook[] = [];
  private readonly afterConnectHooks = new Map<string, Hook[]>();
  private readonly logChunks: string[] = [];
  private incarnation = 0;
  private isPaused = false;
  /** Wall time of each container start, readiness included (ms). */
  readonly startDurationsMs: number[] = [];

  constructor(
    readonly mesh: MeshContext,
    readonly name: string,
    protected spec: ContainerSpec,
    networks: MeshNetwork[],
  ) {
    if (networks.length === 0) throw new Error(`node ${name}: give it at least one network`);
    this.attached = [...networks];
  }

  get containerName(): string {
    return this.mesh.resourceName(this.name);
  }

  get container(): StartedTestContainer {
    if (!this.current) throw new Error(`node ${this.name} is not running (crashed or stopped); call restart()`);
    return this.current;
  }

  get running(): boolean {
    return this.current !== undefined;
  }

  /** Networks the node is attached to right now (partitions remove entries). */
  get networks(): readonly MeshNetwork[] {
    return this.attached;
  }

  /** Run after every start (e.g. the default route of a node behind NAT). */
  onStart(hook: Hook): void {
    this.afterStartHooks.push(hook);
  }

  /** Run after every (re)connection to `net` (e.g. routes that die with the interface). */
  onConnect(net: MeshNetwork, hook: Hook): void {
    const hooks = this.afterConnectHooks.get(net.id) ?? [];
    hooks.push(hook);
    this.afterConnectHooks.set(net.id, hooks);
  }

  async start(): Promise<this> {
    if (this.current) throw new Error(`node ${this.name} already runs`);
    const [first, ...others] = this.attached;
    if (!first) throw new Error(`node ${this.name} is attached to no network; connect() one before restarting it`);
    const s = this.spec;
    this.incarnation++;
    this.logChunks.push(`--- ${this.name}: container #${this.incarnation} ---\n`);
    let c = new SpecContainer(s.image)
      .withName(this.containerName)
      .withHostname(this.name)
      .withLabels(this.mesh.labels({ "org.hermes-mesh.it.node": this.name }))
      .withNetworkMode(first.name)
      .withNetworkAliases(this.name)
      .withEnvironment(s.env)
      .withCommand(s.command)
      .withStartupTimeout(s.startupTimeoutMs)
      .withLogConsumer((stream) => stream.on("data", (chunk: Buffer | string) => this.logChunks.push(String(chunk))));
    if (s.entrypoint) c = c.withEntrypoint(s.entrypoint);
    if (s.user) c = c.withUser(s.user);
    if (s.exposedPorts.length > 0) c = c.withExposedPorts(...s.exposedPorts);
    if (s.wait) c = c.withWaitStrategy(s.wait());
    if (s.volume) c = c.withBindMounts([{ source: s.volume, target: "/data", mode: "rw" }]);
    if (s.capAdd.length > 0) c = c.withAddedCapabilities(...s.capAdd);
    if (Object.keys(s.sysctls).length > 0) c = c.withSysctls(s.sysctls);
    if (s.files.length > 0) c = c.withCopyContentToContainer(s.files);
    const t0 = Date.now();
    try {
      this.current = await c.start();
    } catch (err) {
      this.dumpLogs();
      throw new Error(`node ${this.name} did not start: ${(err as Error).message}\n--- last log lines ---\n${this.logTail(30)}`);
    }
    this.startDurationsMs.push(Date.now() - t0);
    for (const net of others) await this.attach(net);
    for (const hook of this.afterStartHooks) await hook(this);
    for (const net of this.attached) for (const hook of this.afterConnectHooks.get(net.id) ?? []) await hook(this);
    return this;
  }

  // ----------------------------------------------------------------------------- commands

  /** Run argv in the container (no shell: arguments are passed as they are). */
  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecOutcome> {
    const res = await this.container.exec(argv, {
      ...(options.user ? { user: options.user } : {}),
      ...(options.env ? { env: options.env } : {}),
    });
    return { exitCode: res.exitCode, stdout: res.stdout, stderr: res.stderr };
  }

  /** exec that throws (with the output) unless the exit code is 0. */
  async execOk(argv: string[], options: ExecOptions = {}): Promise<string> {
    const res = await this.exec(argv, options);
    if (res.exitCode !== 0) {
      throw new Error(`${this.name}: \`${argv.join(" ")}\` exited ${res.exitCode}\nstdout: ${res.stdout}\nstderr: ${res.stderr}`);
    }
    return res.stdout;
  }

  /** `hermes --json ARGS` in the container, parsed; throws with the output unless it exits 0. */
  async hermesJson<T = Record<string, unknown>>(args: string[]): Promise<T> {
    const out = await this.hermes(["--json", ...args]);
    if (out.exitCode !== 0) throw new Error(`${this.name}: hermes ${args.join(" ")} exited ${out.exitCode}\n${out.stderr}${out.stdout}`);
    return JSON.parse(out.stdout) as T;
  }

  /**
   * `hermes ARGS` in the container, killed (SIGTERM) if it has not ended within `ms`: for commands
   * expected to hang on a path that drops packets (a dial across a NAT), without waiting for their
   * own deadlines. `timedOut` says which way it ended.
   */
  async hermesWithin(args: string[], ms: number): Promise<ExecOutcome & { timedOut: boolean }> {
    const prefix = this.mesh.cli === "standin" ? ["node", STANDIN_PATH] : ["hermes"];
    const res = await this.exec(["node", "-e", WITHIN_SCRIPT, String(ms), ...prefix, ...args]);
    const marker = /\n?__within__ (\{.*\})\s*$/.exec(res.stdout);
    const end = marker ? (JSON.parse(marker[1]!) as { code: number | null; timedOut: boolean }) : { code: res.exitCode, timedOut: false };
    return {
      exitCode: end.code ?? 1,
      stdout: marker ? res.stdout.slice(0, marker.index) : res.stdout,
      stderr: res.stderr,
      timedOut: end.timedOut,
    };
  }

  /** Run the `hermes` CLI in the container (the real one or the stand-in, as the mesh says). */
  hermes(args: string[], options: ExecOptions = {}): Promise<ExecOutcome> {
    const prefix = this.mesh.cli === "standin" ? ["node", STANDIN_PATH] : ["hermes"];
    return this.exec([...prefix, ...args], options);
  }

  /** GET from inside this container: sees aliases, partitions and NAT as the node does. */
  async httpGet(url: string, options: { timeoutMs?: number; headers?: Record<string, string> } = {}): Promise<HttpProbeResult> {
    const res = await this.exec(httpProbeArgv(url, options.timeoutMs ?? 2_000, options.headers));
    return parseHttpProbe(res.stdout);
  }

  /**
   * Append "ip name" to the container's /etc/hosts (as root, argv only): lets a node resolve
   * a node of a network it is not on, e.g. a home gateway behind NAT resolving the relay.
   */
  async addHostsEntry(name: string, ip: string): Promise<void> {
    if (!/^[a-zA-Z0-9][a-zA-Z0-9.-]*$/.test(name) || !/^[0-9a-fA-F:.]+$/.test(ip)) throw new Error(`bad hosts entry ${ip} ${name}`);
    await this.execOk(["node", "-e", "require('node:fs').appendFileSync('/etc/hosts', process.argv[1])", `${ip}\t${name}\n`], {
      user: "0",
    });
  }

  // ----------------------------------------------------------------------------- addresses

  /** The node's address on a network now (addresses change across reconnects and restarts). */
  async ipOn(net: MeshNetwork): Promise<string> {
    const docker = await dockerode();
    const info = await docker.getContainer(this.container.getId()).inspect();
    const ip = info.NetworkSettings.Networks[net.name]?.IPAddress;
    if (!ip) throw new Error(`${this.name} has no address on ${net.name}`);
    return ip;
  }

  /** http://localhost:<mapped port> for a container port, for calls from the test process. */
  hostUrl(containerPort: number, scheme = "http"): string {
    return `${scheme}://${this.container.getHost()}:${this.container.getMappedPort(containerPort)}`;
  }

  hostAddress(containerPort: number): string {
    return `${this.container.getHost()}:${this.container.getMappedPort(containerPort)}`;
  }

  // ----------------------------------------------------------------------------- faults

  /** Leave a network (a partition: the alias stops resolving and packets stop flowing). */
  async disconnect(net: MeshNetwork): Promise<void> {
    const i = this.attached.findIndex((n) => n.id === net.id);
    if (i < 0) throw new Error(`${this.name} is not on ${net.name}`);
    const docker = await dockerode();
    await docker.getNetwork(net.id).disconnect({ Container: this.container.getId(), Force: true });
    this.attached.splice(i, 1);
  }

  /** Join (or re-join, healing a partition) a network with the node's alias. */
  async connect(net: MeshNetwork): Promise<void> {
    if (this.attached.some((n) => n.id === net.id)) throw new Error(`${this.name} is already on ${net.name}`);
    await this.attach(net);
    this.attached.push(net);
    for (const hook of this.afterConnectHooks.get(net.id) ?? []) await hook(this);
  }

  private async attach(net: MeshNetwork): Promise<void> {
    const docker = await dockerode();
    await docker.getNetwork(net.id).connect({ Container: this.container.getId(), EndpointConfig: { Aliases: [this.name] } });
  }

  /** kill -9 of the whole container (no graceful shutdown, no flush); the volume stays. */
  async crash(): Promise<void> {
    const docker = await dockerode();
    const c = docker.getContainer(this.container.getId());
    await c.kill({ signal: "SIGKILL" });
    await c.wait();
    await this.discardContainer();
  }

  /**
   * SIGSTOP of the container's main process (pid 1: the daemon itself), as a GC pause or a VM freeze
   * looks: its sockets stay open and nothing answers. resume() sends SIGCONT.
   */
  async pause(): Promise<void> {
    await this.signal("SIGSTOP");
    this.isPaused = true;
  }

  async resume(): Promise<void> {
    await this.signal("SIGCONT");
    this.isPaused = false;
  }

  get paused(): boolean {
    return this.isPaused;
  }

  private async signal(signal: "SIGSTOP" | "SIGCONT"): Promise<void> {
    const docker = await dockerode();
    await docker.getContainer(this.container.getId()).kill({ signal });
  }

  /** Graceful stop (SIGTERM, then SIGKILL after timeoutSeconds); the volume stays. */
  async stop(timeoutSeconds = 10): Promise<void> {
    // A frozen process would sit on the SIGTERM until the SIGKILL.
    if (this.isPaused) await this.resume();
    const docker = await dockerode();
    const c = docker.getContainer(this.container.getId());
    try {
      await c.stop({ t: timeoutSeconds });
    } catch (err) {
      if (!isNotFound(err) && (err as { statusCode?: number }).statusCode !== 304) throw err;
    }
    await this.discardContainer();
  }

  /**
   * A new container with the same name, aliases, current networks and volume (after crash()
   * or stop(); a running node is stopped gracefully first).
   */
  async restart(): Promise<this> {
    if (this.current) await this.stop();
    return this.start();
  }

  private async discardContainer(): Promise<void> {
    const id = this.container.getId();
    this.current = undefined;
    this.isPaused = false;
    const docker = await dockerode();
    try {
      await docker.getContainer(id).remove({ force: true, v: false });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  // ----------------------------------------------------------------------------- logs

  /** Everything the node's containers printed so far (all incarnations). */
  logText(): string {
    return this.logChunks.join("");
  }

  logTail(lines: number): string {
    return this.logText().split("\n").slice(-lines).join("\n");
  }

  dumpLogs(): string {
    const dir = join(this.mesh.logDir, this.mesh.name);
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${this.name}.log`);
    writeFileSync(file, this.logText());
    return file;
  }

  /** Remove the container for good (teardown). */
  async remove(): Promise<void> {
    if (!this.current) return;
    await this.discardContainer();
  }
}

// ------------------------------------------------------------------------------- gateways, relays

export const GATEWAY_GRPC_PORT = 7440;
export const GATEWAY_HTTP_PORT = 7441;
export const RELAY_GRPC_PORT = 7450;
export const RELAY_HTTP_PORT = 7451;

/** Waits for the ready line and a 200 from /readyz (via the mapped port). */
export function readinessWait(readyLine: RegExp, httpPort: number): () => WaitStrategy {
  return () => Wait.forAll([Wait.forLogMessage(readyLine), Wait.forHttp("/readyz", httpPort).forStatusCode(200)]);
}

export interface GatewayOptions {
  name: string;
  /** --id; null to start without it (the gateway then uses the id persisted in /data). */
  id?: string | null;
  networks: MeshNetwork[];
  relay?: { url: string; key: string };
  env?: Record<string, string>;
  /** More `gateway start` arguments. */
  args?: string[];
  /** HERMES_HOME/config.yaml (YAML text), written into the volume before every start. */
  config?: string;
}

export interface TranscriptMessage {
  seq: number;
  role: string;
  content: string;
}

/** Reads one session's messages (argv: database file, session id); fixed script, arguments as argv. */
const TRANSCRIPT_SCRIPT = `
const Database = require("/app/node_modules/better-sqlite3");
const [file, session] = process.argv.slice(1);
const db = new Database(file, { readonly: true, fileMustExist: true });
const rows = db.prepare("SELECT seq, role, content FROM messages WHERE session_id = ? ORDER BY seq").all(session);
process.stdout.write(JSON.stringify(rows));
`;

export class GatewayNode extends MeshNode {
  constructor(
    mesh: MeshContext,
    private options: GatewayOptions,
    base: Omit<ContainerSpec, "command">,
  ) {
    super(mesh, options.name, { ...base, command: GatewayNode.command(mesh, options) }, options.networks);
  }

  static command(mesh: MeshContext, o: GatewayOptions): string[] {
    const id = o.id === undefined ? o.name : o.id;
    return [
      ...(mesh.cli === "standin" ? [STANDIN_PATH] : []),
      "gateway",
      "start",
      "--home",
      "/data",
      ...(id === null ? [] : ["--id", id]),
      "--grpc",
      `0.0.0.0:${GATEWAY_GRPC_PORT}`,
      "--http",
      `0.0.0.0:${GATEWAY_HTTP_PORT}`,
      ...(o.relay ? ["--relay", o.relay.url, "--relay-key", o.relay.key] : []),
      ...(o.args ?? []),
    ];
  }

  /** grpc://<alias>:7440, for other containers on a shared network. */
  get grpcUrl(): string {
    return `grpc://${this.name}:${GATEWAY_GRPC_PORT}`;
  }

  get httpUrl(): string {
    return `http://${this.name}:${GATEWAY_HTTP_PORT}`;
  }

  /** host:port of the gRPC API from the test process. */
  get hostGrpc(): string {
    return this.hostAddress(GATEWAY_GRPC_PORT);
  }

  get hostHttp(): string {
    return this.hostUrl(GATEWAY_HTTP_PORT);
  }

  /** The id the running gateway reports (`hermes gateway status --json`). */
  async gatewayId(): Promise<string> {
    const out = await this.hermes(["gateway", "status", "--json", "--home", "/data"]);
    if (out.exitCode !== 0) throw new Error(`${this.name}: gateway status exited ${out.exitCode}: ${out.stderr}`);
    const status = JSON.parse(out.stdout) as { id?: string; gateway_id?: string };
    const id = status.id ?? status.gateway_id;
    if (!id) throw new Error(`${this.name}: gateway status has no id: ${out.stdout}`);
    return id;
  }

  /**
   * The messages of a profile's canonical Bot Chat: its session id from `hermes profile show`,
   * the rows from the profile's state.db, opened read-only next to the running gateway.
   */
  async botChat(profile: string): Promise<TranscriptMessage[]> {
    const shown = await this.hermesJson<{ bot_chat_session_id: string }>(["profile", "show", profile]);
    const db = profile === "default" ? "/data/state.db" : `/data/profiles/${profile}/state.db`;
    const out = await this.execOk(["node", "-e", TRANSCRIPT_SCRIPT, db, shown.bot_chat_session_id]);
    return JSON.parse(out) as TranscriptMessage[];
  }

  /** Restart with changed options (e.g. `{ id: null }` to prove the id comes from the volume). */
  async restartWith(changes: Partial<Omit<GatewayOptions, "name" | "networks">>): Promise<this> {
    if (this.running) await this.stop();
    this.options = { ...this.options, ...changes };
    this.spec = { ...this.spec, command: GatewayNode.command(this.mesh, this.options) };
    return this.start();
  }
}

export interface RelayOptions {
  name: string;
  networks: MeshNetwork[];
  env?: Record<string, string>;
  args?: string[];
}

export class RelayNode extends MeshNode {
  static command(mesh: MeshContext, o: RelayOptions): string[] {
    return [
      ...(mesh.cli === "standin" ? [STANDIN_PATH] : []),
      "relay",
      "start",
      "--data",
      "/data",
      "--grpc",
      `0.0.0.0:${RELAY_GRPC_PORT}`,
      "--http",
      `0.0.0.0:${RELAY_HTTP_PORT}`,
      ...(o.args ?? []),
    ];
  }

  /** grpc://<alias>:7450, what gateways pass as --relay. */
  get grpcUrl(): string {
    return `grpc://${this.name}:${RELAY_GRPC_PORT}`;
  }

  get hostHttp(): string {
    return this.hostUrl(RELAY_HTTP_PORT);
  }

  /** `hermes relay key add NAME`: the connection key a gateway passes as --relay-key. */
  async addKey(name: string): Promise<string> {
    const out = await this.hermes(["relay", "key", "add", name, "--data", "/data"]);
    if (out.exitCode !== 0) throw new Error(`${this.name}: relay key add ${name} exited ${out.exitCode}: ${out.stderr}`);
    const key = out.stdout.trim().split("\n").pop()?.trim().split(/\s+/).pop();
    if (!key) throw new Error(`${this.name}: relay key add ${name} printed no key`);
    return key;
  }
}
