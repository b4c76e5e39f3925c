// infra/compose.yaml: the local demo stack (relay + etcd + 3 gateways of one coordinated mesh) is
// wired the way the images and the CLI expect, keys only come from the environment, the etcd
// service's own command and health check work in the etcd image, and Compose itself accepts the
// file (when a Compose binary is installed).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { currentRun, eventually } from "./harness/index.js";
import { runLabels } from "./harness/run-context.js";

const FILE = fileURLToPath(new URL("../../infra/compose.yaml", import.meta.url));
type Service = {
  image: string;
  command: string[];
  volumes: string[];
  ports: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  read_only?: boolean;
  cap_drop?: string[];
  healthcheck?: { test: string[] };
};
const compose = parse(readFileSync(FILE, "utf8"), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const gateways = ["gw-1", "gw-2", "gw-3"];
const daemons = ["relay", ...gateways];
const service = (name: string): Service => {
  const svc = compose.services[name];
  if (!svc) throw new Error(`no service ${name} in infra/compose.yaml`);
  return svc;
};
const etcdArg = (name: string) => {
  const cmd = service("etcd").command;
  return cmd[cmd.indexOf(`--${name}`) + 1];
};

function composeCommand(): string[] | undefined {
  if (spawnSync("docker", ["compose", "version"]).status === 0) return ["docker", "compose"];
  if (spawnSync("docker-compose", ["version"]).status === 0) return ["docker-compose"];
  return undefined;
}

describe("infra/compose.yaml", () => {
  it("runs a relay and three gateways from the offline app image, and etcd from the etcd image", () => {
    expect(Object.keys(compose.services).sort()).toEqual(["etcd", "gw-1", "gw-2", "gw-3", "relay"]);
    for (const name of daemons) {
      const svc = service(name);
      expect(svc.image).toBe(`\${HERMES_IMAGE:-${currentRun().appImage}}`);
      expect(svc.healthcheck?.test.join(" ")).toMatch(/\/readyz/);
    }
    expect(service("etcd").image).toBe(`\${HERMES_ETCD_IMAGE:-${currentRun().etcdImage}}`);
    for (const svc of Object.values(compose.services)) {
      expect(svc.read_only).toBe(true);
      expect(svc.cap_drop).toEqual(["ALL"]);
    }
    expect(service("relay").command.slice(0, 4)).toEqual(["relay", "start", "--data", "/data"]);
  });

  it("makes the gateways one coordinated mesh on the etcd service, each advertising its own name", () => {
    const clientPort = new URL(etcdArg("listen-client-urls") ?? "").port;
    expect(etcdArg("advertise-client-urls")).toBe(`http://etcd:${clientPort}`);
    expect(etcdArg("data-dir")).toMatch(/^\/data\//);
    for (const name of gateways) {
      const svc = service(name);
      expect(svc.environment?.HERMES_COORDINATOR, name).toBe(`etcd://etcd:${clientPort}`);
      expect(svc.environment?.HERMES_ADVERTISE_URL, name).toBe(`grpc://${name}:7440`);
      expect(svc.command.join(" ")).toContain("--grpc 0.0.0.0:7440");
      expect(svc.environment?.HERMES_MESH_KEY, name).toMatch(/^\$\{HERMES_MESH_KEY:\?/);
      expect(svc.depends_on?.etcd).toEqual({ condition: "service_healthy" });
    }
  });

  it("the etcd service's command serves clients and its health check passes in the etcd image", async () => {
    const svc = service("etcd");
    const labels = Object.entries(runLabels(currentRun())).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
    const started = spawnSync(
      "docker",
      [
        "run",
        "-d",
        "--rm",
        ...labels,
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--cap-drop",
        "ALL",
        "--network",
        "none",
        "--mount",
        "type=volume,dst=/data",
        svc.image.replace(/^\$\{HERMES_ETCD_IMAGE:-(.*)\}$/, "$1"),
        ...svc.command,
      ],
      { encoding: "utf8" },
    );
    expect(started.stderr).toBe("");
    const id = started.stdout.trim();
    try {
      const test = svc.healthcheck?.test ?? [];
      expect(test[0]).toBe("CMD");
      await eventually(() => spawnSync("docker", ["exec", id, ...test.slice(1)]).status === 0, {
        what: "the compose health check of etcd to pass",
        timeoutMs: 20_000,
      });
    } finally {
      spawnSync("docker", ["rm", "-f", "-v", id]);
    }
  });

  it("gives every daemon its own volume and every gateway its own id and relay key", () => {
    const volumes = Object.values(compose.services).map((s) => s.volumes[0]?.split(":")[0]);
    expect(new Set(volumes).size).toBe(5);
    for (const v of volumes) expect(compose.volumes).toHaveProperty(String(v));
    gateways.forEach((name, i) => {
      const cmd = service(name).command.join(" ");
      expect(cmd).toContain(`--id ${name}`);
      expect(cmd).toContain("--home /data");
      expect(cmd).toContain("--relay grpc://relay:7450");
      expect(cmd).toMatch(new RegExp(`--relay-key \\$\\{HERMES_RELAY_KEY_GW_${i + 1}:\\?`));
    });
  });

  it("takes keys from the environment only and publishes ports on loopback only", () => {
    for (const name of daemons) expect(service(name).environment?.API_SERVER_KEY, name).toMatch(/^\$\{HERMES_API_KEY:\?/);
    for (const [name, svc] of Object.entries(compose.services)) for (const p of svc.ports) expect(p, name).toMatch(/^127\.0\.0\.1:/);
    const hostPorts = Object.values(compose.services).flatMap((s) => s.ports.map((p) => p.split(":")[1]));
    expect(new Set(hostPorts).size).toBe(hostPorts.length);
  });

  const cmd = composeCommand();
  it.runIf(cmd !== undefined)("is accepted by Docker Compose, and refused without the keys", () => {
    const [bin = "", ...pre] = cmd ?? [];
    const env = {
      ...process.env,
      HERMES_API_KEY: "k",
      HERMES_MESH_KEY: "m",
      HERMES_RELAY_KEY_GW_1: "a",
      HERMES_RELAY_KEY_GW_2: "b",
      HERMES_RELAY_KEY_GW_3: "c",
    };
    const ok = spawnSync(bin, [...pre, "-f", FILE, "config", "-q"], { env, encoding: "utf8" });
    expect(ok.stderr).toBe("");
    expect(ok.status).toBe(0);
    const { HERMES_API_KEY: _drop, ...withoutKey } = env;
    const refused = spawnSync(bin, [...pre, "-f", FILE, "config", "-q"], { env: withoutKey, encoding: "utf8" });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/compose-keys\.sh/);
  });
});
