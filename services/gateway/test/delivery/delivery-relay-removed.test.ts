import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { FakeGateway } from "../../../relay/test/support/fake-gateway.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import { createBot, writeHomeConfig } from "../support/delivery-fixtures.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * `<handle>@<connection>` mail needs the relay: a gateway restarted without one (relay.url removed)
 * still holds the open outbox rows of its relayed mail, and ends them typed instead of keeping them
 * open forever.
 */

let relay: TestRelay;
let laptop: FakeGateway;
let a: TestGateway;

beforeAll(async () => {
  relay = await startTestRelay();
  const homeKey = relay.relay.keys.add("home").key;
  laptop = await FakeGateway.connect(relay.relay.grpcAddress, relay.relay.keys.add("laptop").key, "laptop");
  laptop.announce([{ handle: "zed", title: "Remote" }]);
  a = await startTestGateway({ overrides: { relayUrl: relay.url, relayKey: homeKey, relayConnection: "home" } });
  writeHomeConfig(a.home, { delivery: { retry_delay_seconds: 0 } });
  createBot(a, "alice", { title: "Local researcher" });
});
afterAll(async () => {
  await a?.destroy();
  await laptop?.close();
  await relay?.destroy();
});

describe("relay routes without a relay", () => {
  it("a relay route fails runtime_offline (retried once) while no relay is connected", async () => {
    // The relay's roster knows zed@laptop; laptop takes the delivery and never answers.
    await eventually(() => expect(a.gateway.deliveries.roster("alice").map((e) => e.target)).toContain("zed@laptop"));
    const ack = await a.gateway.deliveries.send("alice", "zed@laptop", "hello via relay");
    await laptop.next("deliver", (d) => d.envelope?.delivery_id === ack.delivery_id);
    // Restarted without relay.url: the open row is sent again, and there is no relay to send it to.
    await a.stop();
    a = await startTestGateway({ home: a.home });
    const receipt = await a.gateway.deliveries.wait(ack.delivery_id);
    expect(receipt).toMatchObject({ state: "failed", reason: "runtime_offline", attempts: 2, target: "zed@laptop" });
    expect(receipt.error).toContain("no relay is connected");
  });
});
