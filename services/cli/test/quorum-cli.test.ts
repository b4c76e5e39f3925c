import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deadEndpoint, type EtcdMember, startEtcd } from "../../../test/support/etcd.js";
import { eventually } from "../../../test/support/eventually.js";
import { assertBuilt, type GatewayProcess, hermes, removeHome, startGatewayProcess, TEST_KEY, tempHome } from "./support/cli-harness.js";

/**
 * The operator's side of quorum rooms, with the built CLI against two gateway processes of one
 * coordinated mesh on a real etcd: `gateway start --coordinator` (and its exit 2 when etcd cannot be
 * reached), `groups create --replicas --min-insync`, `groups state` with the replication,
 * `groups promote --unclean`, their refusals of bad input with exit 2, and --help.
 */

const MESH_KEY = "cli-mesh-key-0123456789abcdef";
let etcd: EtcdMember & { stopAll(): Promise<void> };
let homeA: string;
let homeB: string;
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  assertBuilt();
  etcd = await startEtcd();
  homeA = tempHome("hcli-qa-");
  homeB = tempHome("hcli-qb-");
  const coordinator = `etcd://${etcd.endpoint.replace(/^http:\/\//, "")}`;
  const env = (id: string) => ({
    API_SERVER_KEY: TEST_KEY,
    HERMES_MESH_KEY: MESH_KEY,
    HERMES_GATEWAY_ID: id,
    HERMES_COORDINATOR: coordinator,
  });
  // One after the other: both at once on two busy cores is slower than the lease likes.
  a = await startGatewayProcess(homeA, env("gw-a"));
  b = await startGatewayProcess(homeB, env("gw-b"));
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  for (const h of [homeA, homeB]) if (h) removeHome(h);
  await etcd?.stopAll();
});

const onA = (args: string[]) => hermes(args, { home: homeA });
const onB = (args: string[]) => hermes(args, { home: homeB });
const json = <T = Record<string, unknown>>(r: { stdout: string }) => JSON.parse(r.stdout) as T;

describe("hermes gateway start --coordinator", () => {
  it("exits 2 with what to do when etcd cannot be reached, before binding any port", async () => {
    const home = tempHome("hcli-qdead-");
    try {
      const dead = (await deadEndpoint()).replace(/^http:\/\//, "etcd://");
      const r = await hermes(["gateway", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--coordinator", dead], {
        home,
        env: { API_SERVER_KEY: TEST_KEY, HERMES_MESH_KEY: MESH_KEY },
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/cannot reach the coordinator/);
      expect(r.stderr).toMatch(/Start etcd/);
      expect(r.stdout).not.toMatch(/gateway ready/);
    } finally {
      removeHome(home);
    }
  });

  it("refuses a coordinator URL that is not etcd://host:port with exit 2", async () => {
    const r = await hermes(["gateway", "start", "--coordinator", "http://x y"], { home: homeA, env: { API_SERVER_KEY: TEST_KEY } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--coordinator/);
  });
});

describe("hermes groups with quorum replication", () => {
  it("creates a quorum room, shows its replication (text and --json) and acknowledges sends over the in-sync replicas", async () => {
    const created = await onA([
      "--json",
      "groups",
      "create",
      "--name",
      "Quorum",
      "--members",
      "alice,bob",
      "--id",
      "q1",
      "--replicas",
      "gw-b",
      "--min-insync",
      "2",
    ]);
    expect(created.code, created.stderr).toBe(0);
    expect(json(created)).toMatchObject({ room: { room_id: "q1", authority_gateway_id: "gw-a", authority_epoch: 1 } });

    await eventually(
      async () => {
        const state = json<{ replication: unknown }>(await onA(["--json", "groups", "state", "q1"]));
        expect(state.replication).toMatchObject({
          mode: "quorum",
          replicas: ["gw-a", "gw-b"],
          min_insync: 2,
          isr: ["gw-a", "gw-b"],
          missing: [],
          lease: { holder: "gw-a" },
        });
      },
      { timeoutMs: 30_000, what: "gw-b in sync" },
    );
    const human = await onA(["groups", "state", "q1"]);
    expect(human.stdout).toMatch(/mode\s+quorum, min_insync 2/);
    expect(human.stdout).toMatch(/in sync\s+gw-a, gw-b/);
    expect(human.stdout).toMatch(/lease\s+held by gw-a/);

    const sent = await onA(["--json", "groups", "send", "q1", "hello", "--event-id", "e1"]);
    expect(sent.code, sent.stderr).toBe(0);
    expect(json(sent)).toMatchObject({ accepted: true, event: { seq: 2, epoch: 1 } });
    // The replica holds what was acknowledged, and is no authority.
    const onReplica = await onB(["--json", "groups", "log", "q1"]);
    expect(json<{ events: { event_id: string }[] }>(onReplica).events.map((e) => e.event_id)).toContain("e1");
    const refused = await onB(["groups", "send", "q1", "hi", "--event-id", "e2"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/not_authority|led by gw-a|authority/);

    // While gw-a's lease lives, promote is refused, even --unclean (exit 2), and nothing changes.
    const promote = await onB(["groups", "promote", "q1", "--confirm", "--unclean"]);
    expect(promote.code).toBe(2);
    expect(promote.stderr).toMatch(/gw-a/);
    expect(json(await onA(["--json", "groups", "state", "q1"]))).toMatchObject({ room: { role: "authority", authority_epoch: 1 } });
  });

  it("refuses bad quorum input with exit 2 and a reason", async () => {
    const base = ["groups", "create", "--name", "Bad", "--members", "alice,bob"];
    const cases: [string[], RegExp][] = [
      [["--min-insync", "2"], /--min-insync needs --replicas/],
      [["--replicas", "gw-b", "--min-insync", "two"], /--min-insync/],
      [["--replicas", "gw-b", "--min-insync", "3"], /min_insync/],
      [["--replicas", "gw-b,gw-b"], /replicas/],
      [["--replicas", "Not A Gateway!"], /is not a gateway id/],
    ];
    for (const [extra, message] of cases) {
      const r = await onA([...base, ...extra]);
      expect({ args: extra, code: r.code }).toEqual({ args: extra, code: 2 });
      expect(r.stderr).toMatch(message);
    }
    const json2 = await onA(["--json", ...base, "--replicas", "gw-b,gw-b"]);
    expect(json2.code).toBe(2);
    expect(json2.stderr + json2.stdout).toMatch(/invalid_params/);
  });

  it("a gateway without a coordinator refuses quorum rooms: coordinator_required, exit 2", async () => {
    const home = tempHome("hcli-qplain-");
    const plain = await startGatewayProcess(home, { API_SERVER_KEY: TEST_KEY, HERMES_GATEWAY_ID: "gw-plain" });
    try {
      const r = await hermes(["groups", "create", "--name", "No", "--members", "alice,bob", "--replicas", "gw-b"], { home });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/coordinator/);
    } finally {
      await plain.stop();
      removeHome(home);
    }
  });

  it("--help names the quorum options", async () => {
    const create = await hermes(["groups", "create", "--help"]);
    expect(create.stdout).toMatch(/--replicas <list>/);
    expect(create.stdout).toMatch(/--min-insync <n>/);
    expect((await hermes(["groups", "promote", "--help"])).stdout).toMatch(/--unclean/);
    const start = await hermes(["gateway", "start", "--help"]);
    expect(start.stdout).toMatch(/--coordinator <url>/);
    expect(start.stdout).toMatch(/--advertise <url>/);
  });
});
