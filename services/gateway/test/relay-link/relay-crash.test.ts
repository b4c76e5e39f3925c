import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "@hermes/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DaemonProcess, startRelayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { relayDbPath } from "../../../relay/src/daemon/relay.js";
import { RelayStore } from "../../../relay/src/home/store/relay-store.js";
import { KeyAdmin } from "../../../relay/src/keys/app/key-admin.js";
import { botChat, createBot, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * The relay as its own process, killed with SIGKILL while deliveries are queued and one is
 * mid-turn, then restarted on the same data folder and port: nothing acknowledged is lost, every
 * delivery ends, the per-target order holds, and no turn runs twice (the target deduplicates by
 * delivery id and answers the relay's re-forward from its stored result).
 */

let relay: DaemonProcess;
let dataDir: string;
let port: string;
let gated: GatedProvider;
const keys: Record<string, string> = {};
const gateways: Record<string, TestGateway> = {};
const homes: Record<string, string> = {};

async function startGateway(name: string): Promise<TestGateway> {
  const t = await startTestGateway({
    home: homes[name]!,
    overrides: { id: name, relayUrl: `grpc://127.0.0.1:${port}`, relayKey: keys[name]! },
  });
  gateways[name] = t;
  return t;
}

/** Deliveries this gateway sent that the relay acked (committed) and that have not ended yet. */
function relayAcked(t: TestGateway): number {
  return t.gateway.relay!.client.pendingSummary().acked;
}

async function connected(t: TestGateway): Promise<void> {
  await eventually(() => expect(t.gateway.relay!.status().state).toBe("connected"), { timeoutMs: 20_000 });
}

beforeAll(async () => {
  gated = await startGatedProvider();
  dataDir = mkdtempSync(join(tmpdir(), "hrelay-crash-"));
  // Keys are issued on the database before the relay runs (what `hermes relay key add` does when no relay is up).
  const store = new RelayStore(relayDbPath(dataDir));
  const admin = new KeyAdmin(store, systemClock);
  for (const c of ["a", "b", "c", "d"]) keys[c] = admin.add(c).key;
  store.close();
  // Expiry sweeps every 100 ms, so TTL checks do not wait a second.
  writeFileSync(join(dataDir, "relay.yaml"), "sweep_seconds: 0.1\n");
  relay = await startRelayProcess(dataDir);
  port = relay.grpc.split(":").at(-1)!;
  for (const name of ["a", "b", "c", "d"]) {
    homes[name] = mkdtempSync(join(tmpdir(), `hrc-${name}-`));
    writeHomeConfig(homes[name], {
      gateway: { shutdown_grace_seconds: 1 },
      delivery: { retry_delay_seconds: 0 },
      providers: { gated: { base_url: gated.url, api_key_env: "GATED_KEY" } },
    });
    writeHomeEnv(homes[name], { GATED_KEY: "sk-gated-000" });
  }
  const a = await startGateway("a");
  const b = await startGateway("b");
  const c = await startGateway("c");
  const d = await startGateway("d");
  createBot(a, "alice");
  createBot(b, "slowbot", { provider: "gated", model: "gated-model" });
  createBot(c, "carol");
  createBot(d, "dora");
  await Promise.all([a, b, c, d].map(connected));
  for (const t of [a, d]) {
    await eventually(() =>
      expect(t.gateway.relay!.remoteRoster().map((x) => x.handle)).toEqual(expect.arrayContaining(["slowbot", "carol"])),
    );
  }
}, 120_000);

afterAll(async () => {
  for (const t of Object.values(gateways)) await t.destroy().catch(() => undefined);
  await relay?.stop().catch(() => undefined);
  await gated?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("relay kill -9 and restart", () => {
  it("loses nothing, ends every delivery, keeps the order and runs no turn twice", async () => {
    const a = gateways["a"]!;
    const d = gateways["d"]!;
    // carol's gateway goes away: mail to it can only wait in the relay's queue.
    await gateways["c"]!.stop();
    const toCarol = await a.gateway.deliveries.send("alice", "carol@c", "for carol, queued at the relay");
    // slowbot: the first turn is held mid-turn; dora's message waits behind it in slowbot's lane at
    // the relay; alice's second one waits in a's own per-target lane for the first one's outcome.
    const one = await a.gateway.deliveries.send("alice", "slowbot@b", "task one");
    await eventually(() => expect(gated.held()).toBe(1));
    const two = await d.gateway.deliveries.send("dora", "slowbot@b", "task two");
    const three = await a.gateway.deliveries.send("alice", "slowbot@b", "task three");
    const slow = [
      { t: a, ack: one },
      { t: d, ack: two },
      { t: a, ack: three },
    ];
    // Acked queued by the relay (committed there) before the crash.
    await eventually(() => expect(relayAcked(a)).toBe(2));
    await eventually(() => expect(relayAcked(d)).toBe(1));

    await relay.kill9();
    await eventually(() => expect(a.gateway.relay!.status().state).not.toBe("connected"));
    // The held turn finishes while the relay is down: its result cannot reach the relay.
    gated.release("one done");
    await eventually(() => expect(gateways["b"]!.gateway.deliveries.store.ingress(one.delivery_id)?.state).toBe("settled"));

    relay = await startRelayProcess(dataDir, { grpc: `127.0.0.1:${port}` });
    await Promise.all([a, d, gateways["b"]!].map(connected));
    // The re-forwarded first task is answered from b's stored result; the next two run in order.
    await eventually(() => expect(gated.held()).toBe(1), { timeoutMs: 20_000 });
    gated.release("two done");
    await eventually(() => expect(gated.held()).toBe(1), { timeoutMs: 20_000 });
    gated.release("three done");
    const receipts = await Promise.all(slow.map((x) => x.t.gateway.deliveries.wait(x.ack.delivery_id)));
    expect(receipts.map((r) => [r.state, r.reply])).toEqual([
      ["settled", "one done"],
      ["settled", "two done"],
      ["settled", "three done"],
    ]);
    const b = gateways["b"]!;
    for (const m of ["task one", "task two", "task three"]) expect(gated.prompts.filter((p) => p.endsWith(m))).toHaveLength(1);
    expect(
      botChat(b, "slowbot")
        .filter((m) => m.role === "user")
        .map((m) => m.content.replace(/^Message from .*?\): /, "")),
    ).toEqual(["task one", "task two", "task three"]);

    // carol's gateway comes back after the crash: the acked envelope is still there and is delivered once.
    const c = await startGateway("c");
    await connected(c);
    const carol = await a.gateway.deliveries.wait(toCarol.delivery_id);
    expect(carol.state).toBe("settled");
    expect(botChat(c, "carol").filter((m) => m.role === "user" && m.content.endsWith("queued at the relay"))).toHaveLength(1);
  }, 120_000);
});
