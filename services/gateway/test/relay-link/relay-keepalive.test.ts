import { connect, createServer, type Server, type Socket } from "node:net";
import { createLogger, systemClock } from "@hermes/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { envelope, FakeGateway } from "../../../relay/test/support/fake-gateway.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import { RelayClient, type RelayIngress, relayChannel } from "../../src/relay-link/app/relay-client.js";
import { TunnelHandlers } from "../../src/relay-link/app/tunnel-handlers.js";

/**
 * A NAT mapping that dies silently: the proxy stops forwarding the bytes of the connections it has
 * (no FIN, no RST), like a router that forgot the mapping, while new connections work. Keepalive
 * pings on both sides must notice: the gateway reconnects by itself, and the relay tells a sender
 * whose delivery was in flight on the dead path `runtime_offline`.
 */
class BlackholeProxy {
  private server: Server | undefined;
  private readonly pairs = new Set<[Socket, Socket]>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      client.pipe(upstream);
      upstream.pipe(client);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on("error", drop);
      upstream.on("error", drop);
      client.on("close", drop);
      upstream.on("close", drop);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    const addr = this.server.address();
    this.port = typeof addr === "object" && addr ? addr.port : 0;
  }

  /** Existing connections go silent in both directions; their sockets stay open. */
  blackhole(): number {
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
    return this.pairs.size;
  }

  async close(): Promise<void> {
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

let relay: TestRelay;
let proxy: BlackholeProxy;
const keys: Record<string, string> = {};

beforeAll(async () => {
  // The relay pings every second and tolerates client pings every 200 ms.
  relay = await startTestRelay({ settings: { keepaliveMs: 1000, minClientPingMs: 200 } });
  for (const c of ["home", "vps"]) keys[c] = relay.relay.keys.add(c).key;
  const [host, port] = relay.relay.grpcAddress.split(":");
  proxy = new BlackholeProxy({ host: host!, port: Number(port) });
  await proxy.start();
});

afterAll(async () => {
  await proxy?.close();
  await relay?.destroy();
});

function homeClient(keepaliveMs: number, ingress: RelayIngress): RelayClient {
  return new RelayClient({
    channel: relayChannel({ url: `grpc://127.0.0.1:${proxy.port}`, key: keys["home"] }, { keepaliveMs, keepaliveTimeoutMs: 500 }),
    connection: "home",
    gatewayId: "gw-home",
    version: "test",
    logger: createLogger("relay-client", "silent"),
    clock: systemClock,
    localBots: () => [{ handle: "bob", display_name: "Bob", title: "", description: "" }],
    ingress,
    tunnel: new TunnelHandlers(),
    backoff: { initialMs: 100, maxMs: 500 },
    outcomeTimeoutMs: 60_000,
  });
}

describe("keepalive over a dead NAT path", () => {
  it("the gateway's pings notice first: it reconnects on a fresh path and gets its in-flight delivery again", async () => {
    const deliveries: string[] = [];
    // The turn never finishes: the delivery stays in flight.
    const client = homeClient(500, (d) => {
      deliveries.push(d.envelope.delivery_id);
      return new Promise<never>(() => undefined);
    });
    client.start();
    const vps = await FakeGateway.connect(relay.relay.grpcAddress, keys["vps"]!, "vps");
    try {
      await eventually(() => expect(client.state).toBe("connected"));
      await vps.next("roster", (r) => r.bots.some((b) => b.bot?.handle === "bob" && b.online));
      const env = envelope({ profile: "alice", gateway: "gw-vps" }, "bob@home", "are you still there?");
      vps.send(env, { connection: "home", handle: "bob" });
      await eventually(() => expect(deliveries).toEqual([env.delivery_id]));

      expect(proxy.blackhole()).toBeGreaterThan(0);
      await eventually(() => expect(client.state).not.toBe("connected"), { timeoutMs: 10_000 });
      await eventually(() => expect(client.state).toBe("connected"), { timeoutMs: 10_000 });
      // The new stream replaced the dead one at the relay: the delivery is forwarded again (the
      // ingress deduplicates by id), and the sender was not told anything.
      await eventually(() => expect(deliveries).toEqual([env.delivery_id, env.delivery_id]), { timeoutMs: 10_000 });
      expect(vps.all("outcome")).toHaveLength(0);
    } finally {
      await vps.close();
      await client.stop();
    }
  }, 40_000);

  it("the relay's pings notice a gateway that does not: the sender is told runtime_offline", async () => {
    let started = 0;
    // This gateway pings only every minute: only the relay's keepalive can find the dead path.
    const client = homeClient(60_000, () => {
      started++;
      return new Promise<never>(() => undefined);
    });
    client.start();
    const vps = await FakeGateway.connect(relay.relay.grpcAddress, keys["vps"]!, "vps");
    try {
      await eventually(() => expect(client.state).toBe("connected"));
      const env = envelope({ profile: "alice", gateway: "gw-vps" }, "bob@home", "hello?");
      vps.send(env, { connection: "home", handle: "bob" });
      await eventually(() => expect(started).toBe(1));
      expect(proxy.blackhole()).toBeGreaterThan(0);
      const outcome = await vps.next("outcome", (o) => o.delivery_id === env.delivery_id, 10_000);
      expect(outcome.result).toMatchObject({ $case: "error", value: { reason: "runtime_offline" } });
      await eventually(() => expect(relay.relay.sessions.isOnline("home")).toBe(false));
    } finally {
      await vps.close();
      await client.stop();
    }
  }, 40_000);
});
