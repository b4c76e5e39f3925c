// NAT: a home gateway behind a router container (masquerade, no inbound), a public gateway ("vps")
// and the relay on the wan. home → vps works, vps → home does not; bot-to-bot delivery (both ways)
// and the replication of a room whose authority is at home still work, through the relay (tunnel).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  eventually,
  type GatewayNode,
  Ledger,
  type NatTopology,
  observed,
  type RelayNode,
  RoomsClient,
  sendMany,
  useMesh,
} from "../harness/index.js";

interface Receipt {
  delivery_id: string;
  from: string;
  target: string;
  state: string;
  reason: string | null;
  attempts: number;
  reply: string | null;
}

describe("scenario: NAT — home behind a router, a public gateway and the relay", () => {
  const mesh = useMesh("nat-relay");
  let nat: NatTopology;
  let relay: RelayNode;
  let vps: GatewayNode;
  let home: GatewayNode;
  let rHome: RoomsClient;
  let rVps: RoomsClient;

  beforeAll(async () => {
    nat = await mesh.nat("home");
    relay = await mesh.relay({ name: "relay", networks: [nat.wan] });
    const [vpsKey, homeKey] = await Promise.all([relay.addKey("vps"), relay.addKey("home")]);
    [vps, home] = await Promise.all([
      mesh.gateway({ name: "vps", networks: [nat.wan], relay: { url: relay.grpcUrl, key: vpsKey } }),
      mesh.gateway({ name: "home", networks: [nat.lan], relay: { url: relay.grpcUrl, key: homeKey } }),
    ]);
    // From now on home's only way out is the router; it dials the relay (retrying until this is in place).
    await nat.placeBehind(home, { resolve: [relay, vps] });
    for (const [gw, bot, title] of [
      [home, "hbot", "Home helper"],
      [vps, "vbot", "VPS helper"],
    ] as const) {
      const created = await gw.hermes(["profile", "create", bot, "--title", title]);
      expect(created.exitCode, created.stderr).toBe(0);
    }
    await eventually(
      async () => {
        const states = await Promise.all(
          [home, vps].map(async (gw) => (await gw.hermesJson<{ relay?: { state: string } }>(["gateway", "status"])).relay?.state),
        );
        return states.every((s) => s === "connected");
      },
      { what: "both gateways connected to the relay" },
    );
    rHome = RoomsClient.of(home);
    rVps = RoomsClient.of(vps);
  });

  afterAll(() => {
    rHome?.close();
    rVps?.close();
  });

  it("home reaches vps, vps cannot reach home", async () => {
    expect(await home.httpGet("http://vps:7441/livez")).toMatchObject({ status: 200 });
    const homeIp = await home.ipOn(nat.lan);
    expect(await vps.httpGet(`http://${homeIp}:7441/livez`, { timeoutMs: 1_500 })).toHaveProperty("error");
    expect(await vps.httpGet(`http://${await nat.routerWanIp()}:7441/livez`, { timeoutMs: 1_500 })).toHaveProperty("error");

    // The same at the application level: home pulls a room from vps directly; vps cannot dial home.
    await rVps.create("public", "Public", ["vbot", "hbot@home"]);
    await rVps.send("public", "p1", "posted on the vps");
    const pulled = await home.hermesJson<{ stored_seq: number; caught_up: boolean }>([
      "groups",
      "replicate",
      "public",
      "--from",
      vps.grpcUrl,
      "--from-key",
      mesh.apiKey,
    ]);
    // The room's discussion driver may already have logged turns for its members: at least 2 events.
    expect(pulled.caught_up).toBe(true);
    expect(pulled.stored_seq).toBeGreaterThanOrEqual(2);
    await rHome.create("den", "Den", ["hbot", "vbot@vps"]);
    // No path: the dial hangs (packets go nowhere) until its own deadline; 5 s is plenty to know.
    const direct = await vps.hermesWithin(
      ["groups", "replicate", "den", "--from", `grpc://${homeIp}:7440`, "--from-key", mesh.apiKey],
      5_000,
    );
    expect(direct.exitCode).not.toBe(0);
    expect((await vps.hermes(["groups", "state", "den"])).exitCode).toBe(1); // nothing arrived: no room den on vps
  });

  it("delivers bot-to-bot both ways through the relay", async () => {
    const toHome = await vps.hermes(["--json", "-p", "vbot", "message", "hbot@home", "what is on your plate today?", "--wait"]);
    expect(toHome.exitCode, toHome.stderr).toBe(0);
    const r1 = JSON.parse(toHome.stdout) as Receipt;
    expect(r1).toMatchObject({ state: "settled", target: "hbot@home", attempts: 1 });
    expect(r1.reply).toBeTruthy();
    const toVps = await home.hermes(["--json", "-p", "hbot", "message", "vbot@vps", "and yours?", "--wait"]);
    expect(toVps.exitCode, toVps.stderr).toBe(0);
    expect(JSON.parse(toVps.stdout) as Receipt).toMatchObject({ state: "settled", target: "vbot@vps" });
    // The home bot ran exactly one turn for the vps bot's message; the sender sees the same receipt.
    const chat = await home.botChat("hbot");
    expect(chat.filter((m) => m.role === "user" && m.content.endsWith("what is on your plate today?"))).toHaveLength(1);
    expect(await vps.hermesJson<Receipt>(["deliveries", "show", r1.delivery_id])).toMatchObject({ state: "settled", reply: r1.reply });
  });

  it("replicates the home room onto vps through the relay tunnel, then follows it", async () => {
    const ledger = new Ledger("nat");
    await sendMany(ledger, rHome, "den", "den", 150);
    const replicated = await vps.hermesJson<{ stored_seq: number; caught_up: boolean; following: boolean; authority: unknown }>([
      "groups",
      "replicate",
      "den",
      "--from",
      "relay://home",
      "--follow",
    ]);
    expect(replicated).toMatchObject({ caught_up: true, following: true, authority: { gateway_id: "home", epoch: 1 } });
    expect(replicated.stored_seq).toBeGreaterThanOrEqual(151);
    // The live tail comes through the tunnel too (with the turns the room's members take: hbot at
    // home, vbot on the vps through the relay).
    await sendMany(ledger, rHome, "den", "live", 50);
    const logVps = await eventually(
      async () => {
        const [logHome, logVps] = await Promise.all([rHome.fullLog("den"), rVps.fullLog("den")]);
        const same = logHome.length === logVps.length && logHome.every((e, i) => e.hash === logVps[i]!.hash);
        return same ? logVps : false;
      },
      { what: "vps to follow the home room's live tail" },
    );
    const verdict = ledger.verify({ main: observed(logVps, "vps") });
    ledger.assertClean(verdict);
    expect((await vps.hermesJson<{ following: { source: string } }>(["groups", "replica-state", "den"])).following.source).toContain(
      "relay://home",
    );
  });
});
