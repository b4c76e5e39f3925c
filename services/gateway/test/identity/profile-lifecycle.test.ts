import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { botChat, createBot, rpc, transcript, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { call, startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * Live rename and delete with work in flight: turns held at a gated provider while the profile is
 * renamed (they finish under the new name) or deleted (every open delivery ends, typed, and every
 * sender hears it).
 */

const KEY_A = "key-a-0123456789abcdef";
const KEY_P = "key-p-0123456789abcdef";
const GATED = { provider: "gated", model: "gated-model" };
let gated: GatedProvider;
let a: TestGateway;
let p: TestGateway;
let gw: GatewayServiceClient;

beforeAll(async () => {
  gated = await startGatedProvider();
  const homeA = mkdtempSync(join(tmpdir(), "hermes-life-a-"));
  writeHomeConfig(homeA, {
    providers: { gated: { base_url: gated.url, api_key_env: "GATED_KEY" } },
    delivery: { retry_delay_seconds: 0 },
  });
  writeHomeEnv(homeA, { GATED_KEY: "sk-gated-000" });
  a = await startTestGateway({ home: homeA, key: KEY_A });
  gw = a.client(GatewayServiceClient);
  createBot(a, "alice", { title: "Sender" });
  // A second gateway whose bot sends to A's bots through a peer link (a remote sender).
  const homeP = mkdtempSync(join(tmpdir(), "hermes-life-p-"));
  writeHomeConfig(homeP, { bot_peers: { a: { url: `grpc://${a.gateway.grpcAddress}` } }, delivery: { retry_delay_seconds: 0 } });
  writeHomeEnv(homeP, { HERMES_PEER_A_KEY: KEY_A });
  p = await startTestGateway({ home: homeP, key: KEY_P });
  createBot(p, "pat", { title: "Remote sender" });
});
afterAll(async () => {
  gated.open();
  await p?.destroy();
  await a?.destroy();
  await gated?.close();
});

function obligationStates(profile: string): string[] {
  const db = new Database(join(a.home, "state.db"), { readonly: true });
  try {
    return db
      .prepare("SELECT state FROM delivery_obligations WHERE adapter_profile = ? ORDER BY created_at")
      .pluck()
      .all(profile) as string[];
  } finally {
    db.close();
  }
}

describe("rename with a turn held at the provider", () => {
  it("a delivery running during the rename settles and its reply lands in the renamed profile's transcript", async () => {
    createBot(a, "bob", GATED);
    const ack = await a.gateway.deliveries.send("alice", "bob", "review this please");
    await eventually(() => expect(gated.held()).toBe(1));
    const queued = await a.gateway.deliveries.send("alice", "bob", "and this one");
    const renamed = await call(gw, gw.renameProfile, { old_name: "bob", new_name: "robert" }, KEY_A);
    expect(renamed.warning).toBe("");
    // Mail sent after the rename queues behind mail sent before it.
    const after = await a.gateway.deliveries.send("alice", "robert", "one more after the rename");
    // Answers go to requests in the order they reach the provider.
    for (const text of ["reviewed: looks good", "second reviewed", "third reviewed"]) gated.release(text);
    const receipt = await a.gateway.deliveries.wait(ack.delivery_id);
    expect(receipt).toMatchObject({ state: "settled", reply: "reviewed: looks good", attempts: 1 });
    expect(await a.gateway.deliveries.wait(queued.delivery_id)).toMatchObject({ state: "settled", reply: "second reviewed" });
    expect(await a.gateway.deliveries.wait(after.delivery_id)).toMatchObject({ state: "settled", reply: "third reviewed" });
    const session = a.gateway.sessions.botChat("robert");
    expect(transcript(a, "robert", session.session_id).map((m) => [m.role, m.content])).toEqual([
      ["user", "Message from 🤖 alice (@alice): review this please"],
      ["assistant", "reviewed: looks good"],
      ["user", "Message from 🤖 alice (@alice): and this one"],
      ["assistant", "second reviewed"],
      ["user", "Message from 🤖 alice (@alice): one more after the rename"],
      ["assistant", "third reviewed"],
    ]);
    await eventually(() => expect(botChat(a, "alice").filter((m) => m.role === "notification")).toHaveLength(3));
    expect(botChat(a, "alice").find((m) => m.meta["delivery_id"] === ack.delivery_id)).toMatchObject({ content: "reviewed: looks good" });
    // The turn's activity went to the new name only: nothing was written back under the old one.
    expect(a.gateway.routing.keysOf("bob")).toEqual([]);
  });

  it("a chat turn running during the rename returns its reply, stored under the new name", async () => {
    createBot(a, "cleo", GATED);
    const reply = rpc.chat(gw, { profile: "cleo", text: "hello there" }, KEY_A);
    await eventually(() => expect(gated.held()).toBe(1));
    await call(gw, gw.renameProfile, { old_name: "cleo", new_name: "cleopatra" }, KEY_A);
    gated.release("hi from the new name");
    expect(await reply).toMatchObject({ reply: "hi from the new name", profile: "cleopatra" });
    expect(botChat(a, "cleopatra").map((m) => m.content)).toEqual(["hello there", "hi from the new name"]);
    expect(obligationStates("cleopatra")).toEqual(["delivered"]);
    expect(a.gateway.routing.keysOf("cleo")).toEqual([]);
  });
});

describe("delete with deliveries open in both directions", () => {
  it("ends every open delivery with unknown_target naming the deletion, notifies local and remote senders, keeps delivered obligations", async () => {
    createBot(a, "carl", GATED);
    createBot(a, "dana", GATED);
    // An earlier chat turn of carl's: its obligation is delivered and must stay so.
    gated.release("earlier answer");
    await rpc.chat(gw, { profile: "carl", text: "before the delete" }, KEY_A);
    expect(obligationStates("carl")).toEqual(["delivered"]);

    const running = await a.gateway.deliveries.send("alice", "carl", "first, running");
    await eventually(() => expect(gated.held()).toBe(1));
    const queued = await a.gateway.deliveries.send("alice", "carl", "second, queued");
    const remote = await p.gateway.deliveries.send("pat", "a/carl", "from another gateway");
    await eventually(() => expect(a.gateway.deliveries.store.ingress(remote.delivery_id)?.state).toBe("queued"));
    // Mail carl sent that is still running at its target.
    const sent = await a.gateway.deliveries.send("carl", "dana", "carl asks dana");
    await eventually(() => expect(gated.held()).toBe(2));

    await call(gw, gw.deleteProfile, { name: "carl" }, KEY_A);

    for (const id of [running.delivery_id, queued.delivery_id]) {
      const receipt = await a.gateway.deliveries.wait(id);
      expect(receipt).toMatchObject({ state: "failed", reason: "unknown_target", target: "carl" });
      expect(receipt.error).toContain("carl was deleted");
      // The sender's receipt survives the purge.
      expect(a.gateway.deliveries.get(id)).toMatchObject({ state: "failed", reason: "unknown_target" });
    }
    const remoteReceipt = await p.gateway.deliveries.wait(remote.delivery_id);
    expect(remoteReceipt).toMatchObject({ state: "failed", reason: "unknown_target", target: "a/carl" });
    expect(remoteReceipt.error).toContain("carl was deleted");
    // Mail from carl: its target's turn was stopped, the ingress row there ended the same way.
    expect(a.gateway.deliveries.get(sent.delivery_id)).toMatchObject({ state: "failed", reason: "unknown_target" });
    expect(a.gateway.deliveries.get(sent.delivery_id).error).toContain("carl was deleted");
    await eventually(() => expect(gated.held()).toBe(0));

    const notifications = () => botChat(a, "alice").filter((m) => m.role === "notification" && m.meta["target"] === "carl");
    await eventually(() => expect(notifications()).toHaveLength(2));
    for (const n of notifications()) {
      expect(n.content).toMatch(/^Delivery to carl failed \[reason: unknown_target\]: carl was deleted/);
    }
    await eventually(() =>
      expect(botChat(p, "pat").at(-1)).toMatchObject({
        role: "notification",
        content: expect.stringMatching(/^Delivery to a\/carl failed \[reason: unknown_target\]: carl was deleted/),
      }),
    );
    // Nothing the deleted turn produced landed anywhere, and dana's stopped turn stored nothing.
    expect(botChat(a, "dana").filter((m) => m.role === "assistant")).toEqual([]);
    expect(obligationStates("carl")).toEqual(["delivered"]);
  });
});
