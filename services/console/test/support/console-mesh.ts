import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "../../../../test/support/eventually.js";
import { memberSpecs, planMesh } from "../../../cli/src/up/demo-plan.js";
import { addPeer } from "../../../gateway/src/index.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "../../../gateway/test/support/gateway-harness.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";

export { TEST_KEY };

/** Markup where a bot, a room and a message keep their names: the console must show it as text. */
export const HOSTILE = {
  displayName: `<script>window.__pwned = "display"</script>Mallory`,
  title: `<img src=x onerror="window.__pwned='title'">Evil title`,
  roomName: `<b onmouseover="window.__pwned='room'">Bold</b><script>window.__pwned='room'</script>`,
  message: `<img src=x onerror="window.__pwned='message'"> & <i>hi</i>`,
};

export interface ConsoleMesh {
  relay: TestRelay;
  /** gw-1, gw-2, gw-3 with the demo bots of `hermes up`. */
  gateways: TestGateway[];
  gw(name: string): TestGateway;
  origin(name: string): string;
  stop(): Promise<void>;
}

/**
 * `hermes up`'s mesh in process: a relay and three gateways (gw-1..3) on it, each with its two
 * demo bots, every gateway a registered peer of the others, and the demo room `lobby` led by gw-1
 * (members alice@gw-1, carol@gw-2, erin@gw-3) followed by the other two. Besides: bob's provider
 * is not configured (mail to him fails), and gw-1 has a bot and a room whose names are markup.
 */
export async function startConsoleMesh(): Promise<ConsoleMesh> {
  const plan = planMesh(3);
  const relay = await startTestRelay();
  const gateways: TestGateway[] = [];
  for (const g of plan.gateways) {
    gateways.push(await startTestGateway({ overrides: { id: g.name, relayUrl: relay.url, relayKey: relay.relay.keys.add(g.name).key } }));
  }
  const byName = new Map(plan.gateways.map((g, i) => [g.name, gateways[i]!]));
  for (const g of plan.gateways) {
    const gw = byName.get(g.name)!;
    for (const bot of g.bots) {
      gw.gateway.profiles.create(bot.name, {
        title: bot.title,
        description: bot.description,
        ...(bot.name === "bob" ? { provider: "not-configured" } : {}),
      });
    }
    for (const other of plan.gateways) {
      if (other.name !== g.name)
        addPeer(gw.gateway.home, { name: other.name, url: `grpc://${byName.get(other.name)!.gateway.grpcAddress}`, key: TEST_KEY });
    }
  }
  const gw1 = byName.get("gw-1")!;
  gw1.gateway.profiles.create("mallory", { title: HOSTILE.title });
  writeFileSync(join(gw1.gateway.home.profileDir("mallory"), "profile.yaml"), `display_name: ${JSON.stringify(HOSTILE.displayName)}\n`);
  await eventually(() => gateways.every((g) => g.gateway.relay?.status().state === "connected"), {
    timeoutMs: 20_000,
    what: "every gateway on the relay",
  });
  await eventually(() => gateways.every((g) => g.gateway.relay!.remoteRoster().length >= 4), {
    timeoutMs: 20_000,
    what: "the relay rosters",
  });

  const members = memberSpecs(plan, "gw-1").map((spec) => {
    const [profile, gateway] = spec.split("@") as [string, string | undefined];
    return { member_id: spec, profile, ...(gateway ? { gateway_id: gateway } : {}) };
  });
  gw1.gateway.rooms.create({ room_id: "lobby", name: "Lobby", members });
  gw1.gateway.rooms.create({
    room_id: "markup",
    name: HOSTILE.roomName,
    members: [
      { member_id: "alice", profile: "alice" },
      { member_id: "mallory", profile: "mallory" },
    ],
  });
  for (const name of ["gw-2", "gw-3"]) {
    await byName.get(name)!.gateway.rooms.replicate({ room_id: "lobby", from: { peer: "gw-1" }, follow: true });
  }
  return {
    relay,
    gateways,
    gw: (name) => byName.get(name)!,
    origin: (name) => `http://${byName.get(name)!.gateway.httpAddress}`,
    async stop() {
      for (const g of [...gateways].reverse()) await g.destroy();
      await relay.destroy();
    },
  };
}
