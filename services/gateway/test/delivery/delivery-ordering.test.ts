import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeliveryServiceClient } from "@hermes/proto/hermes/v1/delivery";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { botChat, createBot, rpc, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * Delivery ordering: 1,000 messages from 5 senders to 10 bots over real gRPC. Mail to one bot runs in the
 * order it was committed, one turn at a time; different bots are served side by side (overlap is
 * measured and printed; only its existence and the cap are asserted, never a duration). The target
 * bots answer through the fake OpenAI server, so a turn waits on real HTTP as it would on a model.
 */

const SENDERS = ["s0", "s1", "s2", "s3", "s4"];
const TARGETS = Array.from({ length: 10 }, (_, i) => `t${i}`);
const PER_SENDER = 200;
const CAP = 4;
let t: TestGateway;
let fake: FakeOpenAIServer;

beforeAll(async () => {
  fake = await startFakeOpenAIServer();
  const home = mkdtempSync(join(tmpdir(), "hermes-order-"));
  writeHomeConfig(home, {
    delivery: { max_parallel_targets: CAP },
    providers: { fake: { base_url: fake.url, api_key_env: "FAKE_KEY" } },
  });
  writeHomeEnv(home, { FAKE_KEY: "sk-fake" });
  t = await startTestGateway({ home });
  for (const name of SENDERS) createBot(t, name, { title: "Sender" });
  for (const name of TARGETS) createBot(t, name, { title: "Target", provider: "fake", model: `m-${name}` });
});
afterAll(async () => {
  await t?.destroy();
  await fake?.close();
});

describe("ordering across 5 senders and 10 bots", () => {
  it("keeps per-target order and serves targets in parallel", async () => {
    const client = t.client(DeliveryServiceClient);
    const sentBy = new Map<string, string[]>(); // `${sender}>${target}` → messages in send order
    const started = Date.now();
    await Promise.all(
      SENDERS.map(async (sender, s) => {
        for (let i = 0; i < PER_SENDER; i++) {
          const target = TARGETS[(s * 7 + i) % TARGETS.length]!;
          const message = `${sender}#${i}`;
          await rpc.send(client, { profile: sender, target, message, ttl_seconds: 0, delivery_id: "", wait: false });
          const key = `${sender}>${target}`;
          sentBy.set(key, [...(sentBy.get(key) ?? []), message]);
        }
      }),
    );
    const enqueued = Date.now();
    const db = new Database(join(t.home, "state.db"), { readonly: true });
    try {
      await eventually(() => expect(db.prepare("SELECT count(*) FROM delivery_outbox WHERE state = 'settled'").pluck().get()).toBe(1000), {
        timeoutMs: 240_000,
        intervalMs: 100,
      });
      const settled = Date.now();

      for (const target of TARGETS) {
        // The commit order of the mail to this target (the order the server acknowledged it)…
        const committed = db
          .prepare("SELECT delivery_id FROM delivery_outbox WHERE target_profile = ? ORDER BY rowid")
          .pluck()
          .all(target) as string[];
        // …is the order the turns ran in its Bot Chat.
        const ran = botChat(t, target)
          .filter((m) => m.role === "user")
          .map((m) => m.meta["delivery_id"] as string);
        expect(ran).toEqual(committed);
        expect(ran).toHaveLength(100);
        // And each sender's own messages to it arrived in the order that sender sent them.
        const texts = botChat(t, target)
          .filter((m) => m.role === "user")
          .map((m) => /: (s\d#\d+)$/.exec(m.content)![1]!);
        for (const sender of SENDERS) {
          expect(texts.filter((x) => x.startsWith(`${sender}#`))).toEqual(sentBy.get(`${sender}>${target}`) ?? []);
        }
      }

      // Overlap: turns of different targets running at the same time, from the ingress rows.
      const spans = (
        db.prepare("SELECT target_profile AS target, claimed_at, settled_at FROM delivery_ingress").all() as {
          target: string;
          claimed_at: string;
          settled_at: string;
        }[]
      ).map((r) => ({ target: r.target, from: Date.parse(r.claimed_at), to: Date.parse(r.settled_at) }));
      const events = spans.flatMap((s) => [
        { at: s.from, d: 1 },
        { at: s.to, d: -1 },
      ]);
      events.sort((x, y) => x.at - y.at || x.d - y.d);
      let open = 0;
      let peakByTimestamps = 0;
      for (const e of events) {
        open += e.d;
        peakByTimestamps = Math.max(peakByTimestamps, open);
      }
      const lanes = t.gateway.deliveries.ingressLanes;
      console.log(
        `ordering: 1000 deliveries, enqueue ${enqueued - started} ms, all settled after ${settled - started} ms; ` +
          `turns in flight at once: max ${lanes.maxRunning} (cap ${CAP}); overlap seen in ms timestamps: ${peakByTimestamps}`,
      );
      expect(lanes.maxRunning).toBeGreaterThan(1);
      expect(lanes.maxRunning).toBeLessThanOrEqual(CAP);
      // Every sender got every reply as a notification, in its own Bot Chat.
      await eventually(
        () => {
          for (const sender of SENDERS) expect(botChat(t, sender).filter((m) => m.role === "notification")).toHaveLength(PER_SENDER);
        },
        { timeoutMs: 20_000 },
      );
    } finally {
      db.close();
    }
  }, 300_000);
});
