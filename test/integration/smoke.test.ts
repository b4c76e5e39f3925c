// Smoke scenario: two gateway containers on one network: health, partition and heal, and
// kill -9 + restart on the same volume keeping the gateway id. Runs the real `hermes` when
// the app image has it (HERMES_IT_STANDIN=1 forces the stand-in).
import { beforeAll, describe, expect, it } from "vitest";
import { currentRun, type GatewayNode, grpcHealth, type MeshNetwork, useMesh } from "./harness/index.js";

const run = currentRun();
const cli = run.realCli && process.env.HERMES_IT_STANDIN !== "1" ? "real" : "standin";

describe(`smoke: two gateways (${cli} hermes)`, () => {
  const mesh = useMesh("smoke", { cli });
  let lan: MeshNetwork;
  let a: GatewayNode;
  let b: GatewayNode;

  beforeAll(async () => {
    lan = await mesh.network("lan");
    [a, b] = await Promise.all([mesh.gateway({ name: "gw-a", networks: [lan] }), mesh.gateway({ name: "gw-b", networks: [lan] })]);
    console.log(`[smoke] container start (ready) ms: gw-a ${a.startDurationsMs[0]}, gw-b ${b.startDurationsMs[0]}`);
  });

  it("both gateways answer /livez, /readyz and /metrics from the host", async () => {
    for (const gw of [a, b]) {
      expect((await fetch(`${gw.hostHttp}/livez`)).status).toBe(200);
      expect((await fetch(`${gw.hostHttp}/readyz`)).status).toBe(200);
      const metrics = await fetch(`${gw.hostHttp}/metrics`);
      // /metrics may be loopback-only by default: open or refused, never a server error.
      expect([200, 401, 403, 404]).toContain(metrics.status);
    }
  });

  it.runIf(cli === "real")("both gateways report SERVING on the gRPC health service", async () => {
    expect(await grpcHealth(a.hostGrpc)).toBe("SERVING");
    expect(await grpcHealth(b.hostGrpc)).toBe("SERVING");
  });

  it("each gateway reaches the other by its alias", async () => {
    expect(await a.httpGet(`${b.httpUrl}/livez`)).toMatchObject({ status: 200 });
    expect(await b.httpGet(`${a.httpUrl}/livez`)).toMatchObject({ status: 200 });
  });

  it("isolating gw-b from the network cuts it off; healing restores the path", async () => {
    const heal = await mesh.isolate(b);
    const cut = await a.httpGet(`${b.httpUrl}/livez`, { timeoutMs: 1_500 });
    expect(cut).toHaveProperty("error"); // alias gone: ENOTFOUND (or a timeout)
    await heal();
    expect(await a.httpGet(`${b.httpUrl}/livez`)).toMatchObject({ status: 200 });
    expect(await b.httpGet(`${a.httpUrl}/livez`)).toMatchObject({ status: 200 });
  });

  it("a pairwise cut separates gw-a and gw-b while both stay reachable from the host", async () => {
    const heal = await mesh.cut(a, b);
    expect(await a.httpGet(`${b.httpUrl}/livez`, { timeoutMs: 1_000 })).toEqual({ error: "TimeoutError" });
    expect(await b.httpGet(`${a.httpUrl}/livez`, { timeoutMs: 1_000 })).toEqual({ error: "TimeoutError" });
    expect((await fetch(`${a.hostHttp}/readyz`)).status).toBe(200);
    expect((await fetch(`${b.hostHttp}/readyz`)).status).toBe(200);
    await heal();
    expect(await a.httpGet(`${b.httpUrl}/livez`)).toMatchObject({ status: 200 });
  });

  it("kill -9 and a restart on the same volume keep the gateway id", async () => {
    const before = await a.gatewayId();
    expect(before).toBe("gw-a");
    await a.crash();
    expect(a.running).toBe(false);
    expect(await b.httpGet(`${a.httpUrl}/livez`, { timeoutMs: 1_000 })).toHaveProperty("error");
    // No --id this time: the id can only come from the volume.
    await a.restartWith({ id: null });
    console.log(`[smoke] restart after kill -9 (ready) ms: ${a.startDurationsMs.at(-1)}`);
    expect(await a.gatewayId()).toBe(before);
    expect((await fetch(`${a.hostHttp}/readyz`)).status).toBe(200);
    expect(await b.httpGet(`${a.httpUrl}/livez`)).toMatchObject({ status: 200 });
  });
});
