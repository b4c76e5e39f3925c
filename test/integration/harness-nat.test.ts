// Self-test of the NAT topology helper, on stand-in daemons so it checks the network plumbing
// and nothing else: home -> vps works and is seen from the router's address, vps -> home does
// not, and a port forward opens exactly one path.
import { beforeAll, describe, expect, it } from "vitest";
import { type GatewayNode, type NatTopology, type RelayNode, useMesh } from "./harness/index.js";

describe("harness: NAT topology", () => {
  const mesh = useMesh("nat", { cli: "standin" });
  let nat: NatTopology;
  let vps: GatewayNode;
  let home: GatewayNode;
  let relay: RelayNode;
  let relayKey: string;

  beforeAll(async () => {
    nat = await mesh.nat("home");
    [vps, relay] = await Promise.all([
      mesh.gateway({ name: "vps", networks: [nat.wan] }),
      mesh.relay({ name: "relay", networks: [nat.wan] }),
    ]);
    relayKey = await relay.addKey("home");
    home = await mesh.gateway({ name: "home", networks: [nat.lan], relay: { url: relay.grpcUrl, key: relayKey } });
    await nat.placeBehind(home, { resolve: [vps, relay] });
  });

  it("home reaches vps by name, and vps sees the router's public address (SNAT)", async () => {
    const res = await home.httpGet("http://vps:7441/whoami");
    expect(res).toMatchObject({ status: 200 });
    if (!("status" in res)) throw new Error(res.error);
    expect(JSON.parse(res.body).remote).toBe(await nat.routerWanIp());
  });

  it("vps cannot reach home: no route to the lan, no inbound through the router", async () => {
    const homeIp = await home.ipOn(nat.lan);
    expect(await vps.httpGet(`http://${homeIp}:7441/livez`, { timeoutMs: 1_000 })).toHaveProperty("error");
    const routerIp = await nat.routerWanIp();
    expect(await vps.httpGet(`http://${routerIp}:7441/livez`, { timeoutMs: 1_000 })).toEqual({ error: "ECONNREFUSED" });
  });

  it("a port forward opens wan:8441 -> home:7441 (no SNAT on that path) until removed", async () => {
    const routerIp = await nat.routerWanIp();
    const remove = await nat.forwardPort(8441, home, 7441);
    const res = await vps.httpGet(`http://${routerIp}:8441/whoami`);
    expect(res).toMatchObject({ status: 200 });
    if (!("status" in res)) throw new Error(res.error);
    expect(JSON.parse(res.body).remote).toBe(await vps.ipOn(nat.wan));
    await remove();
    expect(await vps.httpGet(`http://${routerIp}:8441/livez`, { timeoutMs: 1_000 })).toHaveProperty("error");
  });

  it("the NAT path survives a kill -9 and restart of the home node", async () => {
    await home.crash();
    await home.restart();
    const res = await home.httpGet("http://vps:7441/whoami");
    expect(res).toMatchObject({ status: 200 });
    if (!("status" in res)) throw new Error(res.error);
    expect(JSON.parse(res.body).remote).toBe(await nat.routerWanIp());
  });

  it("home dials out to a relay on the wan; a graceful relay restart keeps its volume", async () => {
    expect(relayKey).toMatch(/^\S{16,}$/);
    expect(await home.httpGet("http://relay:7451/readyz")).toMatchObject({ status: 200 });
    await relay.restart();
    const keys = await relay.execOk(["cat", "/data/standin-relay-keys.json"]);
    expect(JSON.parse(keys)).toEqual({ home: relayKey });
    // The relay may have a new address now: re-resolve it for home (restart re-applies hooks).
    await home.restart();
    expect(await home.httpGet("http://relay:7451/livez")).toMatchObject({ status: 200 });
  });
});
