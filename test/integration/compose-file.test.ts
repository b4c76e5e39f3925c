// infra/compose.yaml: the local demo stack (relay + 3 gateways) is wired the way the images
// and the CLI expect, keys only come from the environment, and Compose itself accepts the file
// (when a Compose binary is installed).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { currentRun } from "./harness/index.js";

const FILE = fileURLToPath(new URL("../../infra/compose.yaml", import.meta.url));
type Service = {
  image: string;
  command: string[];
  volumes: string[];
  ports: string[];
  environment: Record<string, string>;
  read_only?: boolean;
  cap_drop?: string[];
  healthcheck?: { test: string[] };
};
const compose = parse(readFileSync(FILE, "utf8"), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const gateways = ["gw-1", "gw-2", "gw-3"];

function composeCommand(): string[] | undefined {
  if (spawnSync("docker", ["compose", "version"]).status === 0) return ["docker", "compose"];
  if (spawnSync("docker-compose", ["version"]).status === 0) return ["docker-compose"];
  return undefined;
}

describe("infra/compose.yaml", () => {
  it("runs a relay and three gateways from the offline app image", () => {
    expect(Object.keys(compose.services).sort()).toEqual(["gw-1", "gw-2", "gw-3", "relay"]);
    for (const svc of Object.values(compose.services)) {
      expect(svc.image).toBe(`\${HERMES_IMAGE:-${currentRun().appImage}}`);
      expect(svc.read_only).toBe(true);
      expect(svc.cap_drop).toEqual(["ALL"]);
      expect(svc.healthcheck?.test.join(" ")).toMatch(/\/readyz/);
    }
    expect(compose.services.relay?.command.slice(0, 4)).toEqual(["relay", "start", "--data", "/data"]);
  });

  it("gives every daemon its own volume and every gateway its own id and relay key", () => {
    const volumes = Object.values(compose.services).map((s) => s.volumes[0]?.split(":")[0]);
    expect(new Set(volumes).size).toBe(4);
    for (const v of volumes) expect(compose.volumes).toHaveProperty(String(v));
    gateways.forEach((name, i) => {
      const cmd = compose.services[name]?.command.join(" ") ?? "";
      expect(cmd).toContain(`--id ${name}`);
      expect(cmd).toContain("--home /data");
      expect(cmd).toContain("--relay grpc://relay:7450");
      expect(cmd).toMatch(new RegExp(`--relay-key \\$\\{HERMES_RELAY_KEY_GW_${i + 1}:\\?`));
    });
  });

  it("takes keys from the environment only and publishes ports on loopback only", () => {
    for (const [name, svc] of Object.entries(compose.services)) {
      expect(svc.environment.API_SERVER_KEY, name).toMatch(/^\$\{HERMES_API_KEY:\?/);
      for (const p of svc.ports) expect(p, name).toMatch(/^127\.0\.0\.1:/);
    }
    const hostPorts = Object.values(compose.services).flatMap((s) => s.ports.map((p) => p.split(":")[1]));
    expect(new Set(hostPorts).size).toBe(hostPorts.length);
  });

  const cmd = composeCommand();
  it.runIf(cmd !== undefined)("is accepted by Docker Compose, and refused without the keys", () => {
    const [bin = "", ...pre] = cmd ?? [];
    const env = { ...process.env, HERMES_API_KEY: "k", HERMES_RELAY_KEY_GW_1: "a", HERMES_RELAY_KEY_GW_2: "b", HERMES_RELAY_KEY_GW_3: "c" };
    const ok = spawnSync(bin, [...pre, "-f", FILE, "config", "-q"], { env, encoding: "utf8" });
    expect(ok.stderr).toBe("");
    expect(ok.status).toBe(0);
    const { HERMES_API_KEY: _drop, ...withoutKey } = env;
    const refused = spawnSync(bin, [...pre, "-f", FILE, "config", "-q"], { env: withoutKey, encoding: "utf8" });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/compose-keys\.sh/);
  });
});
