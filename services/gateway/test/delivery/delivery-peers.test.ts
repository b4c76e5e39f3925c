import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { HermesError } from "@hermes/common";
import { DeliveryServiceClient } from "@hermes/proto/hermes/v1/delivery";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { botChat, createBot, rpc, sendAndWait, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * `<peer>/<profile>` delivery between two real gateways over real gRPC with keys: A (the sender)
 * has B registered as peer `b` (bot_peers.b.url in config.yaml, HERMES_PEER_B_KEY in .env).
 */

const KEY_A = "key-a-0123456789abcdef";
const KEY_B = "key-b-0123456789abcdef";
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  b = await startTestGateway({ key: KEY_B });
  createBot(b, "bob", { title: "Remote reviewer" });
  const homeA = mkdtempSync(join(tmpdir(), "hermes-peer-a-"));
  writeHomeConfig(homeA, {
    bot_peers: {
      b: { url: `grpc://${b.gateway.grpcAddress}` },
      bwrong: { url: `grpc://${b.gateway.grpcAddress}` },
      nokey: { url: `grpc://${b.gateway.grpcAddress}` },
      dead: { url: "grpc://127.0.0.1:1" },
    },
    delivery: { retry_delay_seconds: 0 },
  });
  writeHomeEnv(homeA, {
    HERMES_PEER_B_KEY: KEY_B,
    HERMES_PEER_BWRONG_KEY: "not-the-key-of-b-000",
    HERMES_PEER_DEAD_KEY: "whatever-key-000",
  });
  a = await startTestGateway({ home: homeA, key: KEY_A });
  createBot(a, "alice", { title: "Local researcher" });
});
afterAll(async () => {
  await a?.destroy();
  await b?.destroy();
});

async function failure(p: Promise<unknown>): Promise<HermesError> {
  try {
    await p;
  } catch (err) {
    return err as HermesError;
  }
  throw new Error("expected a failure");
}

describe("peer transport", () => {
  it("delivers <peer>/<profile> over gRPC: the turn runs on the peer, the reply comes back to the sender", async () => {
    const receipt = await sendAndWait(a, "alice", "b/bob", "hello from the other gateway");
    expect(receipt).toMatchObject({ state: "settled", target: "b/bob", from: `alice@${a.gateway.id}`, attempts: 1 });
    expect(receipt.reply).toContain("Hi alice, bob (Remote reviewer) here.");
    // The peer ran it: an ingress row under the same id, and the turn in bob's Bot Chat there.
    const remote = b.gateway.deliveries.store.ingress(receipt.delivery_id)!;
    expect(remote).toMatchObject({ source: "peer", state: "settled", from: `alice@${a.gateway.id}`, target_profile: "bob" });
    expect(botChat(b, "bob").at(-2)!.content).toBe(`Message from 🤖 alice (@alice@${a.gateway.id}): hello from the other gateway`);
    await eventually(() => expect(botChat(a, "alice").at(-1)).toMatchObject({ role: "notification", content: receipt.reply }));
    // The peer can show its side of the receipt too.
    expect(b.gateway.deliveries.get(receipt.delivery_id)).toMatchObject({ state: "settled", reply: receipt.reply });
  });

  it("a bare peer name means the peer's default bot", async () => {
    const receipt = await sendAndWait(a, "alice", "b", "hi default");
    expect(receipt).toMatchObject({ state: "settled", target: "b/default" });
  });

  it("an unknown profile on the peer fails unknown_target naming the peer's bots, without retrying", async () => {
    const receipt = await sendAndWait(a, "alice", "b/zed", "anyone?");
    expect(receipt).toMatchObject({ state: "failed", reason: "unknown_target", attempts: 1 });
    expect(receipt.error).toContain('no bot called "zed" here; this gateway has: default, bob');
  });

  it("a key the peer refuses is provider_auth_or_access, never retried", async () => {
    const receipt = await sendAndWait(a, "alice", "bwrong/bob", "let me in");
    expect(receipt).toMatchObject({ state: "failed", reason: "provider_auth_or_access", attempts: 1 });
    expect(receipt.error).toContain("HERMES_PEER_BWRONG_KEY");
    expect(b.gateway.deliveries.store.ingress(receipt.delivery_id)).toBeUndefined();
  });

  it("a peer without a key configured is missing_config", async () => {
    const receipt = await sendAndWait(a, "alice", "nokey/bob", "hi");
    expect(receipt).toMatchObject({ state: "failed", reason: "missing_config", attempts: 1 });
    expect(receipt.error).toContain("HERMES_PEER_NOKEY_KEY");
  });

  it("an unreachable peer is runtime_offline, retried exactly once, and the sender is told", async () => {
    const receipt = await sendAndWait(a, "alice", "dead/bob", "are you there?");
    expect(receipt).toMatchObject({ state: "failed", reason: "runtime_offline", attempts: 2 });
    await eventually(() =>
      expect(botChat(a, "alice").at(-1)!.content).toMatch(
        /^Delivery to dead\/bob failed \[reason: runtime_offline\]: peer dead is unreachable/,
      ),
    );
  });

  it("Deliver is idempotent by id: the same envelope answers with the stored result, another payload is refused", async () => {
    const client = b.client(DeliveryServiceClient);
    const envelope = {
      delivery_id: "dlv_direct_1",
      from_profile: "zoe",
      from_gateway: "elsewhere",
      target: "b/bob",
      message: "direct",
      created_at: new Date().toISOString(),
      ttl_seconds: 900,
    };
    const first = await rpc.deliver(client, { envelope, target_profile: "bob", sender_name: "Zoe" }, KEY_B);
    const again = await rpc.deliver(client, { envelope, target_profile: "bob", sender_name: "Zoe" }, KEY_B);
    expect(first.receipt).toMatchObject({ state: "settled", attempts: 1 });
    expect(again.receipt).toEqual(first.receipt);
    expect(botChat(b, "bob").filter((m) => m.content.endsWith(": direct"))).toHaveLength(1);
    const e = await failure(
      rpc.deliver(client, { envelope: { ...envelope, message: "changed" }, target_profile: "bob", sender_name: "" }, KEY_B),
    );
    expect(e.reason).toBe("idempotency_conflict");
    // Two identical Deliver calls in flight run the turn once; both get the outcome.
    const env2 = { ...envelope, delivery_id: "dlv_direct_2", message: "twice in flight" };
    const [x, y] = await Promise.all([
      rpc.deliver(client, { envelope: env2, target_profile: "bob", sender_name: "" }, KEY_B),
      rpc.deliver(client, { envelope: env2, target_profile: "bob", sender_name: "" }, KEY_B),
    ]);
    expect(x.receipt).toEqual(y.receipt);
    expect(botChat(b, "bob").filter((m) => m.content.endsWith("twice in flight"))).toHaveLength(1);
  });

  it("Deliver needs the peer's key", async () => {
    const client = b.client(DeliveryServiceClient);
    const envelope = {
      delivery_id: "dlv_nokey",
      from_profile: "zoe",
      from_gateway: "elsewhere",
      target: "bob",
      message: "sneaky",
      created_at: new Date().toISOString(),
      ttl_seconds: 900,
    };
    expect((await failure(rpc.deliver(client, { envelope, target_profile: "bob", sender_name: "" }, null))).reason).toBe("unauthenticated");
    expect((await failure(rpc.deliver(client, { envelope, target_profile: "bob", sender_name: "" }, KEY_A))).reason).toBe(
      "unauthenticated",
    );
    expect(b.gateway.deliveries.store.ingress("dlv_nokey")).toBeUndefined();
  });

  it("refuses a malformed envelope with invalid_params naming the field", async () => {
    const client = b.client(DeliveryServiceClient);
    const envelope = {
      delivery_id: "bad id with spaces",
      from_profile: "zoe",
      from_gateway: "elsewhere",
      target: "bob",
      message: "x",
      created_at: "yesterday",
      ttl_seconds: 900,
    };
    const e = await failure(rpc.deliver(client, { envelope, target_profile: "bob", sender_name: "" }, KEY_B));
    expect(e.reason).toBe("invalid_params");
    expect(e.message).toContain("delivery_id");
  });
});
