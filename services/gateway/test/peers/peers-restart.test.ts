import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { createBot, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { call, startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { failure, message, withPeer } from "../support/peers-fixtures.js";

/**
 * Peer run states across a gateway's end: a run that was running becomes `interrupted` and is
 * never re-run (after a real `kill -9`, and after a graceful stop that had to cancel it); queued
 * runs survive and run after the restart; idempotency keys survive too.
 */

const KEY_B = "key-b-0123456789abcdef";
let gated: GatedProvider;
const homes: string[] = [];
const running: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  gated = await startGatedProvider();
});
afterEach(async () => {
  for (const g of running.splice(0)) await g.stop().catch(() => {});
});
afterAll(async () => {
  await gated?.close();
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

function tempHome(prefix: string): string {
  const home = mkdtempSync(join(tmpdir(), prefix));
  homes.push(home);
  return home;
}

/** B's home: the gated endpoint as provider `gated`. */
function peerHome(extra: Record<string, unknown> = {}): string {
  const home = tempHome("hpeer-rb-");
  writeHomeConfig(home, { providers: { gated: { base_url: gated.url, api_key_env: "GATED_KEY" } }, ...extra });
  writeHomeEnv(home, { GATED_KEY: "sk-gated-000" });
  return home;
}

/** A's home, pointing peer `b` at `grpc`. Rewritten when B comes back on another port. */
function pointAt(home: string, grpc: string): void {
  writeHomeConfig(home, { bot_peers: { b: { url: `grpc://${grpc}` } } });
  writeHomeEnv(home, { HERMES_PEER_B_KEY: KEY_B });
}

function runRows(home: string): { run_id: string; status: string }[] {
  const db = new Database(join(home, "state.db"), { readonly: true });
  try {
    return db.prepare("SELECT run_id, status FROM peer_runs ORDER BY id").all() as { run_id: string; status: string }[];
  } finally {
    db.close();
  }
}

const promptsFor = (text: string) => gated.prompts.filter((p) => p.endsWith(text)).length;

describe("peer runs across restarts", () => {
  it("kill -9 mid-run: the running run becomes interrupted and is never re-run; the queued one runs after the restart; keys survive", async () => {
    const homeB = peerHome();
    const homeA = tempHome("hpeer-ra-");
    let child: DaemonProcess | undefined = await startGatewayProcess(homeB, { env: { API_SERVER_KEY: KEY_B } });
    try {
      const gw = new GatewayServiceClient(child.grpc, credentials.createInsecure());
      await call(
        gw,
        gw.createProfile,
        { name: "slow", title: "", description: "", model: "", provider: "", clone_from: "", soul: "" },
        KEY_B,
      );
      gw.close();
      writeFileSync(join(homeB, "profiles", "slow", "config.yaml"), stringify({ provider: "gated", model: "gated-model" }));
      pointAt(homeA, child.grpc);

      const [first, second] = await withPeer(homeA, "b", async (c) => {
        const one = await c.startRun(message("crash job one", "slow", { idempotency_key: "crash-1" }));
        await eventually(() => expect(gated.held()).toBe(1));
        const two = await c.startRun(message("crash job two", "slow", { idempotency_key: "crash-2" }));
        return [one.run!, two.run!];
      });
      await child.kill9();
      child = undefined;
      expect(runRows(homeB)).toEqual([
        { run_id: first.run_id, status: "running" },
        { run_id: second.run_id, status: "queued" },
      ]);
      await eventually(() => expect(gated.held()).toBe(0)); // the dead gateway's request went with it

      const b = await startTestGateway({ home: homeB, key: KEY_B });
      running.push(b);
      pointAt(homeA, b.gateway.grpcAddress);
      await withPeer(homeA, "b", async (c) => {
        const interrupted = await c.getRun(first.run_id);
        expect(interrupted).toMatchObject({ status: "interrupted" });
        expect(interrupted.error).toContain("it was not re-run");
        // The queued one runs now, in order.
        await eventually(() => expect(gated.held()).toBe(1));
        gated.release("two done after the restart");
        expect(await c.getRun(second.run_id, 10)).toMatchObject({ status: "completed", reply: "two done after the restart" });
        // Same key and input after the restart: the original (interrupted) run, nothing re-run.
        const retry = await c.startRun(message("crash job one", "slow", { idempotency_key: "crash-1" }));
        expect(retry).toMatchObject({ replayed: true, run: { run_id: first.run_id, status: "interrupted" } });
        const conflict = await failure(c.startRun(message("different now", "slow", { idempotency_key: "crash-1" })));
        expect(conflict.reason).toBe("idempotency_conflict");
      });
      expect(promptsFor("crash job one")).toBe(1);
      expect(promptsFor("crash job two")).toBe(1);
    } finally {
      await child?.kill9();
    }
  }, 90_000);

  it("graceful stop mid-run: the running run ends interrupted after the grace, a waiting dm is answered, the queued one waits for the restart", async () => {
    const homeB = peerHome({ gateway: { shutdown_grace_seconds: 0.3 } });
    const homeA = tempHome("hpeer-ra-");
    const b1: TestGateway = await startTestGateway({ home: homeB, key: KEY_B });
    createBot(b1, "slow", { provider: "gated", model: "gated-model" });
    pointAt(homeA, b1.gateway.grpcAddress);
    const first = await withPeer(homeA, "b", (c) => c.startRun(message("graceful job one", "slow")));
    await eventually(() => expect(gated.held()).toBe(1));
    // A dm queued behind it, its caller waiting for the reply.
    const waitingDm = failure(withPeer(homeA, "b", (c) => c.dm(message("graceful dm two", "slow"), 60)));
    await eventually(() => expect(runRows(homeB).map((r) => r.status)).toEqual(["running", "queued"]));
    await b1.stop();
    const dmError = await waitingDm;
    expect(dmError).toMatchObject({ reason: "runtime_offline" });
    expect(dmError.exitCode).toBe(1);
    expect(dmError.message).toContain("the gateway is stopping");
    const [one, two] = runRows(homeB);
    expect(one).toEqual({ run_id: first.run!.run_id, status: "interrupted" });
    expect(two!.status).toBe("queued");
    await eventually(() => expect(gated.held()).toBe(0)); // the cancelled turn's request was abandoned

    const b2 = await startTestGateway({ home: homeB, key: KEY_B });
    running.push(b2);
    pointAt(homeA, b2.gateway.grpcAddress);
    await eventually(() => expect(gated.held()).toBe(1));
    gated.release("dm answered after the restart");
    await withPeer(homeA, "b", async (c) => {
      expect(await c.getRun(two!.run_id, 10)).toMatchObject({ status: "completed", kind: "dm", reply: "dm answered after the restart" });
      expect(await c.getRun(first.run!.run_id)).toMatchObject({ status: "interrupted" });
    });
    expect(promptsFor("graceful job one")).toBe(1);
    expect(promptsFor("graceful dm two")).toBe(1);
    expect(gated.held()).toBe(0);
  }, 60_000);
});
