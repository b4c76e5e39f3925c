import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  assertBuilt,
  type GatewayProcess,
  hermes,
  holdWriteLock,
  removeHome,
  rowsMentioning,
  startGatewayProcess,
  tempHome,
} from "./support/cli-harness.js";

/**
 * The recovery the rename warning prescribes after a failed live migration: "restart the gateway
 * (or stop it), then run: hermes profile migrate-identity OLD NEW". Each test runs
 * its own gateway, since it stops it.
 */

const ENV = { HERMES_DB_BUSY_TIMEOUT_MS: "200" };
let homes: string[] = [];
let gateways: GatewayProcess[] = [];

beforeAll(() => assertBuilt());
afterEach(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  for (const h of homes) removeHome(h);
  homes = [];
  gateways = [];
});

async function gateway(home: string): Promise<GatewayProcess> {
  const gw = await startGatewayProcess(home, ENV);
  gateways.push(gw);
  return gw;
}

/** A live gateway renames `mybot` → `assistant` while state.db is locked: the migration fails. */
async function failedLiveRename(): Promise<{ home: string; stateDb: string; gw: GatewayProcess }> {
  const home = tempHome();
  homes.push(home);
  const stateDb = join(home, "state.db");
  // The profile exists before the gateway starts, as any profile older than one heartbeat period
  // does: the gateway has written its heartbeat row.
  expect((await hermes(["profile", "create", "mybot"], { home })).code).toBe(0);
  const gw = await gateway(home);
  expect((await hermes(["-p", "mybot", "chat", "-q", "hello"], { home })).code).toBe(0);
  expect(rowsMentioning(stateDb, "mybot")).toMatchObject({ gateway_heartbeats: 1 });
  const lock = holdWriteLock(stateDb);
  let r: Awaited<ReturnType<typeof hermes>>;
  try {
    r = await hermes(["profile", "rename", "mybot", "assistant"], { home });
  } finally {
    lock.release();
  }
  expect(r.code).toBe(0);
  expect(r.stderr).toContain("hermes profile migrate-identity mybot assistant");
  expect(rowsMentioning(stateDb, "mybot")).toMatchObject({ sessions: 1, gateway_routing: 1, gateway_heartbeats: 1 });
  return { home, stateDb, gw };
}

describe("after a failed live migration", () => {
  it("stop the gateway, then migrate-identity (the CLI rewrites the DB itself) completes it; a second run is a no-op", async () => {
    const { home, stateDb, gw } = await failedLiveRename();
    expect(await gw.stop()).toEqual({ code: 0, signal: null });
    expect(existsSync(join(home, "gateway.sock"))).toBe(false);

    const m = await hermes(["--json", "profile", "migrate-identity", "mybot", "assistant"], { home, env: ENV });
    expect(m.stderr, m.stderr).toBe("");
    expect(m.code).toBe(0);
    expect(JSON.parse(m.stdout)).toMatchObject({ ok: true, counts: { sessions: 1, gateway_routing: 1 } });
    expect(rowsMentioning(stateDb, "mybot")).toEqual({});
    const again = await hermes(["--json", "profile", "migrate-identity", "mybot", "assistant"], { home, env: ENV });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ ok: true, counts: {} });
  });

  it("restart the gateway, then migrate-identity (through the restarted gateway) completes it; a second run is a no-op", async () => {
    const { home, stateDb, gw } = await failedLiveRename();
    expect(await gw.stop()).toEqual({ code: 0, signal: null });
    await gateway(home);

    const m = await hermes(["--json", "profile", "migrate-identity", "mybot", "assistant"], { home });
    expect(m.stderr, m.stderr).toBe("");
    expect(m.code).toBe(0);
    expect(JSON.parse(m.stdout)).toMatchObject({ ok: true, counts: { sessions: 1, gateway_routing: 1 }, routing_in_memory: 1 });
    expect(rowsMentioning(stateDb, "mybot")).toEqual({});
    const again = await hermes(["--json", "profile", "migrate-identity", "mybot", "assistant"], { home });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ ok: true, counts: {}, routing_in_memory: 0 });
    // The Bot Chat followed the rename: a turn through the new name continues the old transcript.
    const r = await hermes(["--json", "-p", "assistant", "chat", "-q", "back"], { home });
    expect(r.code).toBe(0);
    const shown = JSON.parse((await hermes(["--json", "profile", "show", "mybot"], { home })).stdout) as {
      name: string;
      bot_chat_session_id: string;
    };
    expect(shown.name).toBe("assistant");
    expect(JSON.parse(r.stdout).session_id).toBe(shown.bot_chat_session_id);
  });
});
