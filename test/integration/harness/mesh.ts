// A test mesh: the networks, volumes and containers of one scenario, named and labelled so
// they can be told apart and swept, and torn down together.
//
//   const mesh = useMesh("split-brain");                 // afterAll(teardown) is registered
//   const lan = await mesh.network("lan");
//   const a = await mesh.gateway({ name: "gw-a", networks: [lan] });
//   await a.hermes(["groups", "create", "--name", "ops", "--members", "a,b"]);
//   const heal = await mesh.cut(a, b);  ...  await heal();
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Wait } from "testcontainers";
import { afterAll } from "vitest";
import { dockerode, isNotFound } from "./docker-client.js";
import { ETCD_CLIENT_PORT, EtcdCluster, type EtcdClusterOptions, EtcdNode, etcdMemberCommand, etcdStarted } from "./etcd.js";
import { createNatTopology, type NatTopology } from "./nat.js";
import {
  type CliFlavor,
  type ContainerSpec,
  GATEWAY_GRPC_PORT,
  GATEWAY_HTTP_PORT,
  GatewayNode,
  type GatewayOptions,
  type MeshContext,
  type MeshNetwork,
  MeshNode,
  RELAY_GRPC_PORT,
  RELAY_HTTP_PORT,
  RelayNode,
  type RelayOptions,
  readinessWait,
  STANDIN_PATH,
} from "./node.js";
import { currentRun, type IntegrationRun, runLabels } from "./run-context.js";

const STANDIN_SOURCE = fileURLToPath(new URL("../standin/hermes-standin.mjs", import.meta.url));

export interface MeshOptions {
  /** "real" runs the image's `hermes`; "standin" the harness's stand-in. Default: real. */
  cli?: CliFlavor;
  /** API_SERVER_KEY of every gateway and relay (default: random per mesh). */
  apiKey?: string;
  startupTimeoutMs?: number;
}

export class Mesh implements MeshContext {
  readonly apiKey: string;
  readonly cli: CliFlavor;
  readonly logDir: string;
  private readonly nodes: MeshNode[] = [];
  private readonly nets: MeshNetwork[] = [];
  private readonly volumes: string[] = [];
  private readonly startupTimeoutMs: number;
  private tornDown = false;

  private constructor(
    readonly name: string,
    readonly run: IntegrationRun,
    options: MeshOptions,
  ) {
    if (!/^[a-z0-9][a-z0-9-]{0,30}$/.test(name)) throw new Error(`mesh name ${name}: use 1-31 of [a-z0-9-]`);
    this.apiKey = options.apiKey ?? randomBytes(18).toString("base64url");
    this.cli = options.cli ?? "real";
    this.logDir = run.logDir;
    this.startupTimeoutMs = options.startupTimeoutMs ?? 60_000;
  }

  static create(name: string, options: MeshOptions = {}): Mesh {
    return new Mesh(name, currentRun(), options);
  }

  resourceName(suffix: string): string {
    return `hit-${this.run.runId}-${this.name}-${suffix}`;
  }

  labels(extra: Record<string, string> = {}): Record<string, string> {
    return { ...runLabels(this.run), "org.hermes-mesh.it.mesh": this.name, ...extra };
  }

  get allNodes(): readonly MeshNode[] {
    return this.nodes;
  }

  // ----------------------------------------------------------------------------- resources

  /**
   * A user-defined bridge network. masquerade: false is what NAT topologies need (pitfall N1:
   * Docker's host MASQUERADE rule would otherwise rewrite forwarded packets); plain networks keep it.
   */
  async network(name: string, options: { masquerade?: boolean } = {}): Promise<MeshNetwork> {
    const masquerade = options.masquerade ?? true;
    const docker = await dockerode();
    const fullName = this.resourceName(name);
    const created = await docker.createNetwork({
      Name: fullName,
      Driver: "bridge",
      CheckDuplicate: true,
      Labels: this.labels(),
      Options: masquerade ? {} : { "com.docker.network.bridge.enable_ip_masquerade": "false" },
    });
    const info = await created.inspect();
    const ipam = info.IPAM?.Config?.[0] as { Subnet?: string; Gateway?: string } | undefined;
    if (!ipam?.Subnet) throw new Error(`network ${fullName} has no IPv4 subnet`);
    const net: MeshNetwork = { name: fullName, id: created.id, subnet: ipam.Subnet, gatewayIp: ipam.Gateway ?? "", masquerade };
    this.nets.push(net);
    return net;
  }

  private async volume(node: string): Promise<string> {
    const docker = await dockerode();
    const name = this.resourceName(`${node}-data`);
    await docker.createVolume({ Name: name, Labels: this.labels({ "org.hermes-mesh.it.node": node }) });
    this.volumes.push(name);
    return name;
  }

  private daemonSpec(volume: string, ports: number[], readyLine: RegExp, env: Record<string, string> = {}) {
    const standin = this.cli === "standin";
    const spec: Omit<ContainerSpec, "command"> = {
      image: this.run.appImage,
      env: { API_SERVER_KEY: this.apiKey, ...env },
      exposedPorts: ports,
      wait: readinessWait(readyLine, ports[1] ?? ports[0] ?? 0),
      // NET_ADMIN lets cut() install nft rules with `exec --user 0`; the daemon itself runs as
      // uid 10001 and has no effective capabilities.
      capAdd: ["NET_ADMIN"],
      sysctls: {},
      volume,
      files: standin ? [{ content: readFileSync(STANDIN_SOURCE, "utf8"), target: STANDIN_PATH, mode: 0o644 }] : [],
      startupTimeoutMs: this.startupTimeoutMs,
      ...(standin ? { entrypoint: ["node"] } : {}),
    };
    return spec;
  }

  private track<T extends MeshNode>(node: T): T {
    if (this.nodes.some((n) => n.name === node.name)) throw new Error(`mesh ${this.name} already has a node ${node.name}`);
    this.nodes.push(node);
    return node;
  }

  // ----------------------------------------------------------------------------- nodes

  /** A gateway (`hermes gateway start`), ready when it printed `gateway ready:` and /readyz is 200. */
  async gateway(options: GatewayOptions): Promise<GatewayNode> {
    const volume = await this.volume(options.name);
    const base = this.daemonSpec(volume, [GATEWAY_GRPC_PORT, GATEWAY_HTTP_PORT], /gateway ready:/, options.env);
    // Copied into the volume before every start (root-owned, world-readable: the daemon reads it,
    // and an atomic rewrite by the daemon would still work since it owns /data).
    if (options.config !== undefined) base.files = [...base.files, { content: options.config, target: "/data/config.yaml", mode: 0o644 }];
    const node = this.track(new GatewayNode(this, options, base));
    return node.start();
  }

  /** A relay (`hermes relay start`), ready when it printed `relay ready:` and /readyz is 200. */
  async relay(options: RelayOptions): Promise<RelayNode> {
    const volume = await this.volume(options.name);
    const base = this.daemonSpec(volume, [RELAY_GRPC_PORT, RELAY_HTTP_PORT], /relay ready:/, options.env);
    const node = this.track(new RelayNode(this, options.name, { ...base, command: RelayNode.command(this, options) }, options.networks));
    return node.start();
  }

  /**
   * A bare container (base image, root, NET_ADMIN, `sleep`) for probes and routers.
   * sysctls go to HostConfig (pitfall N4: /proc/sys is read-only inside the container).
   */
  async plain(name: string, networks: MeshNetwork[], options: { sysctls?: Record<string, string> } = {}): Promise<MeshNode> {
    const node = this.track(
      new MeshNode(
        this,
        name,
        {
          image: this.run.baseImage,
          command: ["sleep", "2147483647"],
          user: "0:0",
          env: {},
          exposedPorts: [],
          capAdd: ["NET_ADMIN"],
          sysctls: options.sysctls ?? {},
          files: [],
          startupTimeoutMs: this.startupTimeoutMs,
        },
        networks,
      ),
    );
    return node.start();
  }

  /**
   * A base-image container running one zero-dependency node script (e.g. the gated provider), as
   * an unprivileged user, ready when it printed `readyLine`.
   */
  async script(
    name: string,
    networks: MeshNetwork[],
    options: { source: string; args?: string[]; ports: number[]; readyLine: RegExp },
  ): Promise<MeshNode> {
    const target = `/opt/hermes-it/${name}.mjs`;
    const node = this.track(
      new MeshNode(
        this,
        name,
        {
          image: this.run.baseImage,
          command: ["node", target, ...(options.args ?? [])],
          user: "65534:65534",
          env: {},
          exposedPorts: options.ports,
          wait: () => Wait.forLogMessage(options.readyLine),
          capAdd: [],
          sysctls: {},
          files: [{ content: readFileSync(options.source, "utf8"), target, mode: 0o644 }],
          startupTimeoutMs: this.startupTimeoutMs,
        },
        networks,
      ),
    );
    return node.start();
  }

  /**
   * An etcd cluster (`<name>-0..n-1`, 3 members by default) of the etcd image, one volume per member,
   * started together; resolves once every member reports a leader. See etcd.ts.
   */
  async etcdCluster(options: EtcdClusterOptions): Promise<EtcdCluster> {
    const base = options.name ?? "etcd";
    const names = Array.from({ length: options.members ?? 3 }, (_, i) => `${base}-${i}`);
    const members = await Promise.all(
      names.map(async (name) =>
        this.track(
          new EtcdNode(
            this,
            name,
            {
              image: this.run.etcdImage,
              command: etcdMemberCommand(name, names, this.resourceName(base)),
              env: {},
              exposedPorts: [ETCD_CLIENT_PORT],
              wait: etcdStarted,
              // cut() installs nft rules with `exec --user 0`; etcd itself runs as uid 10002.
              capAdd: ["NET_ADMIN"],
              sysctls: {},
              volume: await this.volume(name),
              files: [],
              startupTimeoutMs: this.startupTimeoutMs,
            },
            options.networks,
          ),
        ),
      ),
    );
    await Promise.all(members.map((m) => m.start()));
    const cluster = new EtcdCluster(members);
    await cluster.waitHealthy();
    return cluster;
  }

  /** Home network behind a masquerading router; see nat.ts. */
  nat(name = "home"): Promise<NatTopology> {
    return createNatTopology(this, name);
  }

  // ----------------------------------------------------------------------------- partitions

  /** Take a node off every network it is on; the returned function puts it back. */
  async isolate(node: MeshNode): Promise<() => Promise<void>> {
    const nets = [...node.networks];
    for (const net of nets) await node.disconnect(net);
    return async () => {
      for (const net of nets) await node.connect(net);
    };
  }

  /**
   * Cut the path between two nodes that stay on their networks (both can still talk to
   * everyone else, and the test process still reaches both through mapped ports). nft drops
   * packets in both directions, so callers see timeouts as in a real partition; reject: true
   * answers TCP resets instead (fast failures). Addresses are taken now: cut again after a
   * restart or reconnect of either node. Returns the heal function.
   */
  async cut(a: MeshNode, b: MeshNode, options: { reject?: boolean } = {}): Promise<() => Promise<void>> {
    const table = (peer: MeshNode) => `hermes_cut_${peer.name.replace(/[^a-zA-Z0-9]/g, "_")}`;
    const addrs = async (n: MeshNode) => Promise.all(n.networks.map((net) => n.ipOn(net)));
    const apply = async (self: MeshNode, peer: MeshNode, peerIps: string[]) => {
      const t = table(peer);
      const rules = (dir: "saddr" | "daddr") => {
        const match = `ip ${dir} { ${peerIps.join(", ")} }`;
        return options.reject ? `${match} ip protocol tcp reject with tcp reset; ${match} drop;` : `${match} drop;`;
      };
      const ruleset = [
        `table inet ${t} {`,
        `  chain input { type filter hook input priority -10; policy accept; ${rules("saddr")} }`,
        `  chain output { type filter hook output priority -10; policy accept; ${rules("daddr")} }`,
        "}",
        "",
      ].join("\n");
      await self.container.copyContentToContainer([{ content: ruleset, target: `/tmp/${t}.nft` }]);
      await self.execOk(["/usr/sbin/nft", "-f", `/tmp/${t}.nft`], { user: "0" });
    };
    const [aIps, bIps] = await Promise.all([addrs(a), addrs(b)]);
    await apply(a, b, bIps);
    await apply(b, a, aIps);
    return async () => {
      for (const [self, peer] of [
        [a, b],
        [b, a],
      ] as const) {
        if (!self.running) continue;
        const res = await self.exec(["/usr/sbin/nft", "delete", "table", "inet", table(peer)], { user: "0" });
        // A container started after the cut has no such table: nothing to heal there.
        if (res.exitCode !== 0 && !/No such file or directory/.test(res.stderr)) {
          throw new Error(`${self.name}: removing the cut from ${peer.name} failed: ${res.stderr}`);
        }
      }
    };
  }

  /** cut(node, peer) for every peer (e.g. an authority from every etcd member); one heal for all. */
  async cutAll(node: MeshNode, peers: readonly MeshNode[], options: { reject?: boolean } = {}): Promise<() => Promise<void>> {
    const heals: Array<() => Promise<void>> = [];
    for (const peer of peers) heals.push(await this.cut(node, peer, options));
    return async () => {
      for (const heal of heals) await heal();
    };
  }

  // ----------------------------------------------------------------------------- teardown

  /** Remove every container, network and volume of the mesh; logs go to run.logDir first. */
  async teardown(): Promise<void> {
    if (this.tornDown) return;
    this.tornDown = true;
    const problems: string[] = [];
    for (const node of this.nodes) node.dumpLogs();
    await Promise.all(
      this.nodes.map((n) => n.remove().catch((err: Error) => problems.push(`container ${n.containerName}: ${err.message}`))),
    );
    const docker = await dockerode();
    for (const net of this.nets) {
      await docker
        .getNetwork(net.id)
        .remove()
        .catch((err: unknown) => {
          if (!isNotFound(err)) problems.push(`network ${net.name}: ${(err as Error).message}`);
        });
    }
    for (const vol of this.volumes) {
      await docker
        .getVolume(vol)
        .remove()
        .catch((err: unknown) => {
          if (!isNotFound(err)) problems.push(`volume ${vol}: ${(err as Error).message}`);
        });
    }
    // The global teardown sweeps anything left; say what it will have to do.
    if (problems.length > 0) console.warn(`[mesh ${this.name}] teardown left:\n  ${problems.join("\n  ")}`);
  }
}

/** Mesh.create + afterAll(teardown): call at the top of a describe block or file. */
export function useMesh(name: string, options: MeshOptions = {}): Mesh {
  const started = Date.now();
  const mesh = Mesh.create(name, options);
  afterAll(async () => {
    await mesh.teardown();
    // The scenario's wall time: from the file's set-up to the end of the teardown.
    console.log(`[mesh ${name}] wall time ${((Date.now() - started) / 1000).toFixed(1)} s (set-up, tests and teardown)`);
  });
  return mesh;
}
