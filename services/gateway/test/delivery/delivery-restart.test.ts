import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { DeliveryServiceClient } from "@hermes/proto/hermes/v1/delivery";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { botChat, createBot, rpc, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { call, startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";

/**
 * Restart mid-delivery: queued deliveries survive and run after the restart; the turn that was
 * running becomes `ambiguous` and is never replayed. Once with a real crash (a gateway in a child
 * process, `kill -9` while the provider hangs), once with a graceful stop that has to cancel it.
 */

let fake: FakeOpenAIServer;
const homes: string[] = [];
const running: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  fake = await startFakeOpenAIServer();
});
afterEach(async () => {
  for (const g of running.splice(0)) await g.stop().catch(() => {});
});
afterAll(async () => {
  await fake?.close();
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

function newHome(extra: Record<string, unknown> = {}): string {
  const home = mkdtempSync(join(tmpdir(), "hermes-restart-"));
  homes.push(home);
  writeHomeConfig(home, { providers: { fake: { base_url: fake.url, api_key_env: "FAKE_KEY", timeout_seconds: 120 } }, ...extra });
  writeHomeEnv(home, { FAKE_KEY: "sk-fake" });
  return home;
}

function rows(home: string, sql: string): Record<string, unknown>[] {
  const db = new Database(join(home, "state.db"), { readonly: true });
  try {
    return db.prepare(sql).all() as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

const bobRequests = () => fake.chatRequests().filter((r) => (r.body as { model?: string }).model === "m-bob");
const lastUser = (r: { body: unknown }) =>
  (r.body as { messages: { role: string; content: string }[] }).messages.filter((m) => m.role === "user").at(-1)!.content;

/** After the restart: #1 is ambiguous and not re-run; #2 and #3 ran, in order. */
async function expectRecovered(t: TestGateway, ids: string[], requestsBefore: number): Promise<void> {
  const receipts = await Promise.all(ids.map((id) => t.gateway.deliveries.wait(id)));
  expect(receipts.map((r) => r.state)).toEqual(["ambiguous", "settled", "settled"]);
  expect(receipts[0]).toMatchObject({ reason: "unknown", attempts: 1, reply: null });
  expect(receipts[0]!.error).toContain("It is not replayed automatically; check with bob before sending it again.");
  const after = bobRequests().slice(requestsBefore);
  expect(after.map(lastUser)).toEqual(["Message from 🤖 alice (@alice): second", "Message from 🤖 alice (@alice): third"]);
  expect(
    botChat(t, "bob")
      .filter((m) => m.role === "user")
      .map((m) => m.content),
  ).toEqual(["Message from 🤖 alice (@alice): second", "Message from 🤖 alice (@alice): third"]);
  await eventually(() => {
    const notes = botChat(t, "alice").filter((m) => m.role === "notification");
    expect(notes.map((m) => m.meta["delivery_id"])).toEqual(expect.arrayContaining(ids));
    expect(notes.find((m) => m.meta["delivery_id"] === ids[0])!.content).toMatch(
      /^Delivery to bob failed \[reason: unknown\]: outcome unknown: /,
    );
  });
}

describe("restart mid-delivery", () => {
  it("kill -9 while a turn runs: queued deliveries survive, the running one becomes ambiguous and is not replayed", async () => {
    const home = newHome({ delivery: { retry_delay_seconds: 0 } });
    let child: DaemonProcess | undefined = await startGatewayProcess(home, { env: { API_SERVER_KEY: TEST_KEY } });
    try {
      const gw = new GatewayServiceClient(child.grpc, credentials.createInsecure());
      const deliveries = new DeliveryServiceClient(child.grpc, credentials.createInsecure());
      for (const name of ["alice", "bob"]) {
        await call(gw, gw.createProfile, { name, title: "", description: "", model: "", provider: "", clone_from: "", soul: "" });
      }
      writeFileSync(join(home, "profiles", "bob", "config.yaml"), stringify({ provider: "fake", model: "m-bob" }));
      fake.failModel("m-bob", "hang");
      const before = bobRequests().length;
      const ids: string[] = [];
      for (const message of ["first", "second", "third"])
        ids.push((await rpc.send(deliveries, { profile: "alice", target: "bob", message })).delivery_id);
      await eventually(() => expect(bobRequests().length).toBe(before + 1)); // the first turn is at the provider, hanging
      await child.kill9();
      child = undefined;
      gw.close();
      deliveries.close();
      const states = rows(home, "SELECT delivery_id, state FROM delivery_ingress ORDER BY rowid");
      expect(states).toEqual([
        { delivery_id: ids[0], state: "claimed" },
        { delivery_id: ids[1], state: "queued" },
        { delivery_id: ids[2], state: "queued" },
      ]);
      fake.clearModel("m-bob");

      const t = await startTestGateway({ home });
      running.push(t);
      await expectRecovered(t, ids, before + 1);
    } finally {
      await child?.kill9();
    }
  }, 90_000);

  it("graceful stop while a turn runs: the turn is cancelled after the grace (ambiguous), queued ones wait for the restart", async () => {
    const home = newHome({ gateway: { shutdown_grace_seconds: 0.3 }, delivery: { retry_delay_seconds: 0 } });
    const t1 = await startTestGateway({ home });
    createBot(t1, "alice");
    createBot(t1, "bob", { provider: "fake", model: "m-bob" });
    fake.failModel("m-bob", "hang");
    const before = bobRequests().length;
    const acks = await Promise.all(["first", "second", "third"].map((m) => t1.gateway.deliveries.send("alice", "bob", m)));
    const ids = acks.map((ack) => ack.delivery_id);
    await eventually(() => expect(bobRequests().length).toBe(before + 1));
    await t1.stop();
    expect(rows(home, "SELECT state, reason FROM delivery_ingress ORDER BY rowid")).toEqual([
      { state: "ambiguous", reason: "unknown" },
      { state: "queued", reason: null },
      { state: "queued", reason: null },
    ]);
    fake.clearModel("m-bob");
    const t2 = await startTestGateway({ home });
    running.push(t2);
    await expectRecovered(t2, ids, before + 1);
  }, 60_000);
});
