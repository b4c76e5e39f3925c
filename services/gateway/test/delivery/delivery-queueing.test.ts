import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { botChat, createBot, sendAndWait, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * Platform reasons and queueing: mail to a bot busy in a turn waits behind it (never refused),
 * mail that waits past its TTL ends as queued_expired, and a turn that finds no free warm-agent
 * slot in time ends as target_busy.
 */

let fake: FakeOpenAIServer;
let t: TestGateway;

beforeAll(async () => {
  fake = await startFakeOpenAIServer();
  const home = mkdtempSync(join(tmpdir(), "hermes-queue-"));
  writeHomeConfig(home, {
    providers: { fake: { base_url: fake.url, api_key_env: "FAKE_KEY", timeout_seconds: 1.5 } },
    delivery: { retry_delay_seconds: 0, sweep_seconds: 0.1 },
    agents: { max_warm: 2, slot_wait_seconds: 0.4 },
  });
  writeHomeEnv(home, { FAKE_KEY: "sk-fake" });
  t = await startTestGateway({ home });
  createBot(t, "alice");
  createBot(t, "bob", { provider: "fake", model: "m-bob" });
  createBot(t, "carol");
  createBot(t, "dave");
});
afterAll(async () => {
  await t?.destroy();
  await fake?.close();
});

describe("queueing behind a running turn", () => {
  it("queues a delivery behind a person's running turn in the same Bot Chat instead of refusing it", async () => {
    fake.reset();
    fake.failNext("hang"); // the person's turn hangs until the provider timeout (1.5 s)
    const human = t.gateway.chat.turn({ profile: "bob", text: "a long question" }).catch((e: unknown) => e);
    await eventually(() => expect(fake.chatRequests()).toHaveLength(1));
    const ack = await t.gateway.deliveries.send("alice", "bob", "are you free?");
    // Admitted and waiting, not refused as busy: its attempt has started (it holds a lane slot) and
    // waits in bob's Bot Chat behind the person's turn, still unclaimed.
    await eventually(() => expect(t.gateway.deliveries.ingressLanes.running).toBe(1));
    expect(t.gateway.deliveries.get(ack.delivery_id)).toMatchObject({ state: "queued", attempts: 0 });
    const receipt = await t.gateway.deliveries.wait(ack.delivery_id);
    expect(receipt).toMatchObject({ state: "settled", attempts: 1, reply: "echo(m-bob): Message from 🤖 alice (@alice): are you free?" });
    expect(await human).toMatchObject({ reason: "delivery_timeout" });
  });

  it("expires mail still queued after its TTL (queued_expired) and tells the sender; later mail still runs", async () => {
    fake.reset();
    fake.failModel("m-bob", "hang");
    const first = await t.gateway.deliveries.send("alice", "bob", "this one hangs");
    const late = await t.gateway.deliveries.send("carol", "bob", "only if quick", { ttl_seconds: 1 });
    const patient = await t.gateway.deliveries.send("dave", "bob", "whenever you can");
    const expired = await t.gateway.deliveries.wait(late.delivery_id);
    expect(expired).toMatchObject({ state: "expired", reason: "queued_expired", attempts: 0 });
    expect(expired.error).toContain("not picked up within its TTL of 1 s");
    await eventually(() =>
      expect(botChat(t, "carol").at(-1)!.content).toMatch(/^Delivery to bob failed \[reason: queued_expired\]: not picked up within/),
    );
    // The hanging one times out twice (single retry) and fails; the patient one then runs.
    expect(await t.gateway.deliveries.wait(first.delivery_id)).toMatchObject({ state: "failed", reason: "delivery_timeout", attempts: 2 });
    fake.clearModel("m-bob");
    expect(await t.gateway.deliveries.wait(patient.delivery_id)).toMatchObject({ state: "settled" });
    // The expired one never reached bob.
    expect(botChat(t, "bob").some((m) => m.content.includes("only if quick"))).toBe(false);
  }, 20_000);

  it("ends as target_busy when no warm-agent slot frees up in time, without a retry", async () => {
    fake.reset();
    fake.failNext("hang", 2);
    // Two turns hold both warm slots (max_warm: 2) while their provider hangs.
    const holders = [
      t.gateway.chat.turn({ profile: "bob", text: "hold a slot" }).catch((e: unknown) => e),
      t.gateway.chat
        .turn({
          profile: "bob",
          text: "hold another",
          origin: { platform: "api", chat_type: "dm", chat_id: "slot-2" },
        })
        .catch((e: unknown) => e),
    ];
    await eventually(() => expect(fake.chatRequests()).toHaveLength(2));
    const receipt = await sendAndWait(t, "alice", "carol", "need a slot");
    expect(receipt).toMatchObject({ state: "failed", reason: "target_busy", attempts: 1 });
    expect(receipt.error).toContain("waiting for a free slot");
    await Promise.all(holders);
    // With the slots free again, the next one runs.
    expect(await sendAndWait(t, "alice", "carol", "now?")).toMatchObject({ state: "settled" });
  }, 20_000);
});
