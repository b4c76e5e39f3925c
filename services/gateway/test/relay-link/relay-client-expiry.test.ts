import { createLogger, HermesError, systemClock } from "@hermes/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { envelope } from "../../../relay/test/support/fake-gateway.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import { RelayClient, relayChannel } from "../../src/relay-link/app/relay-client.js";
import { TunnelHandlers } from "../../src/relay-link/app/tunnel-handlers.js";

/**
 * A delivery's TTL bounds how long the relay link waits for the relay to take it. A retry that
 * starts after the TTL ran out is refused at once as `queued_expired`, in words that do not blame a
 * relay that is up and connected.
 */
let relay: TestRelay;

beforeAll(async () => {
  relay = await startTestRelay();
});

afterAll(async () => {
  await relay?.destroy();
});

describe("a relay send whose TTL already ran out", () => {
  it("is refused as queued_expired without sending, naming the TTL, not the relay", async () => {
    const client = new RelayClient({
      channel: relayChannel({ url: `grpc://${relay.relay.grpcAddress}`, key: relay.relay.keys.add("home").key }),
      connection: "home",
      gatewayId: "gw-home",
      version: "test",
      logger: createLogger("relay-client", "silent"),
      clock: systemClock,
      localBots: () => [],
      ingress: () => new Promise<never>(() => undefined),
      tunnel: new TunnelHandlers(),
      backoff: { initialMs: 100, maxMs: 500 },
      outcomeTimeoutMs: 60_000,
    });
    client.start();
    try {
      await eventually(() => expect(client.state).toBe("connected"));
      const created = new Date(Date.now() - 1000_000).toISOString();
      const env = envelope({ profile: "alice", gateway: "gw-home" }, "bob@vps", "late", { created_at: created, ttl_seconds: 900 });
      const refused = await client.send({ envelope: env, target_connection: "vps", target_handle: "bob", sender_name: "alice" }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(HermesError);
      expect(refused).toMatchObject({ reason: "queued_expired" });
      expect((refused as HermesError).message).toMatch(/TTL of 900 s ran out .* before this attempt; nothing was sent/);
      expect((refused as HermesError).message).not.toMatch(/could not be reached/);
    } finally {
      await client.stop();
    }
  });
});
