import { existsSync } from "node:fs";
import { join } from "node:path";
import type { HermesError } from "@hermes/common";
import { HealthCheckResponse_ServingStatus, HealthClient } from "@hermes/proto/grpc/health/v1/health";
import { ControlServiceClient, GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, startTestGateway, type TestGateway } from "../support/gateway-harness.js";

let t: TestGateway;
let gw: GatewayServiceClient;
let control: ControlServiceClient;

beforeAll(async () => {
  t = await startTestGateway({ env: { HERMES_DB_BUSY_TIMEOUT_MS: "200" } });
  gw = t.client(GatewayServiceClient);
  control = t.client(ControlServiceClient, "control");
});
afterAll(() => t.destroy());

const create = (name: string, title = "") =>
  call(gw, gw.createProfile, { name, title, description: "", model: "", provider: "", clone_from: "", soul: "" });

function rows(sql: string, ...params: unknown[]): unknown[] {
  const db = new Database(join(t.home, "state.db"), { readonly: true });
  try {
    return db
      .prepare(sql)
      .pluck()
      .all(...params);
  } finally {
    db.close();
  }
}

async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as HermesError).reason;
  }
  return "none";
}

describe("gateway over real gRPC", () => {
  it("answers the standard health service", async () => {
    const health = t.client(HealthClient);
    const r = await call(health, health.check, { service: "" }, null);
    expect(r.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it("refuses calls without a key or with a wrong key, and does nothing", async () => {
    expect(
      await reason(
        call(gw, gw.createProfile, { name: "sneaky", title: "", description: "", model: "", provider: "", clone_from: "", soul: "" }, null),
      ),
    ).toBe("unauthenticated");
    expect(
      await reason(
        call(
          gw,
          gw.createProfile,
          { name: "sneaky", title: "", description: "", model: "", provider: "", clone_from: "", soul: "" },
          "wrong-key-wrong-key",
        ),
      ),
    ).toBe("unauthenticated");
    expect(existsSync(join(t.home, "profiles", "sneaky"))).toBe(false);
  });

  it("creates profiles with their Bot Chat and runs turns that are stored", async () => {
    const alice = await create("alice", "Researcher");
    expect(alice.bot_chat_session_id).toMatch(/^ses_/);
    const r1 = await call(gw, gw.chat, { profile: "alice", text: "hello", session_id: "" });
    const r2 = await call(gw, gw.chat, { profile: "alice", text: "second", session_id: "" });
    expect(r1.session_id).toBe(alice.bot_chat_session_id);
    expect(r2.session_id).toBe(alice.bot_chat_session_id);
    const profileDb = new Database(join(t.home, "profiles", "alice", "state.db"), { readonly: true });
    const messages = profileDb
      .prepare("SELECT role, content FROM messages WHERE session_id = ? ORDER BY seq")
      .all(alice.bot_chat_session_id);
    profileDb.close();
    expect(messages).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: r1.reply },
      { role: "user", content: "second" },
      { role: "assistant", content: r2.reply },
    ]);
    expect(rows("SELECT state FROM delivery_obligations WHERE adapter_profile = 'alice'")).toEqual(["delivered", "delivered"]);
    t.gateway.writeHeartbeats("running");
    expect(rows("SELECT profile FROM gateway_heartbeats ORDER BY profile")).toContain("alice");
  });

  it("prunes turn obligations that ended more than a week ago, and keeps the recent ones", async () => {
    await call(gw, gw.chat, { profile: "alice", text: "recent", session_id: "" });
    const db = new Database(join(t.home, "state.db"));
    try {
      db.prepare(
        `INSERT INTO delivery_obligations (obligation_id, adapter_profile, session_key, kind, state, payload_json, created_at, updated_at)
         VALUES ('obl_ancient', 'alice', 'agent:alice:bot:dm:bot-chat', 'turn_reply', 'delivered', '{}', '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z')`,
      ).run();
    } finally {
      db.close();
    }
    const before = rows("SELECT count(*) FROM delivery_obligations WHERE adapter_profile = 'alice'")[0] as number;
    expect(t.gateway.pruneObligations()).toBe(1);
    expect(rows("SELECT count(*) FROM delivery_obligations WHERE obligation_id = 'obl_ancient'")).toEqual([0]);
    expect(rows("SELECT count(*) FROM delivery_obligations WHERE adapter_profile = 'alice'")).toEqual([before - 1]);
  });

  it("renames while running: the in-memory index and every DB row move, and a persist cannot resurrect the old name", async () => {
    await create("bob");
    await call(gw, gw.chat, { profile: "bob", text: "hi", session_id: "" });
    expect(t.gateway.routing.keysOf("bob")).toHaveLength(1);
    const r = await call(gw, gw.renameProfile, { old_name: "bob", new_name: "robert" });
    expect(r.warning).toBe("");
    expect(r.migration?.ok).toBe(true);
    expect(r.migration?.routing_in_memory).toBe(1);
    expect(t.gateway.routing.keysOf("bob")).toEqual([]);
    expect(t.gateway.routing.keysOf("robert")).toEqual(["agent:robert:bot:dm:bot-chat"]);
    // A later turn and the periodic persist write only the new name.
    await call(gw, gw.chat, { profile: "robert", text: "after", session_id: "" });
    t.gateway.writeHeartbeats("running");
    await new Promise((resolve) => setImmediate(resolve));
    expect(rows("SELECT routing_key FROM gateway_routing WHERE routing_key LIKE 'agent:bob:%'")).toEqual([]);
    expect(rows("SELECT count(*) FROM sessions WHERE profile_name = 'bob'")).toEqual([0]);
    expect(rows("SELECT count(*) FROM gateway_heartbeats WHERE profile = 'bob'")).toEqual([0]);
    expect(rows("SELECT count(*) FROM delivery_obligations WHERE adapter_profile = 'bob' OR session_key LIKE 'agent:bob:%'")).toEqual([0]);
    // The old name keeps resolving as an alias.
    const viaAlias = await call(gw, gw.chat, { profile: "bob", text: "old name", session_id: "" });
    expect(viaAlias.profile).toBe("robert");
    expect((await call(gw, gw.getProfile, { name: "bob" })).name).toBe("robert");
  });

  it("a failed migration does not fail the rename; migrate-identity completes it and a second run is a no-op", async () => {
    await create("carol");
    await call(gw, gw.chat, { profile: "carol", text: "hi", session_id: "" });
    const lock = new Database(join(t.home, "state.db"));
    lock.exec("BEGIN EXCLUSIVE");
    let r: Awaited<ReturnType<typeof call>>;
    try {
      r = await call(gw, gw.renameProfile, { old_name: "carol", new_name: "caroline" });
    } finally {
      lock.exec("ROLLBACK");
      lock.close();
    }
    const renamed = r as { warning: string; migration: { ok: boolean; database: string } };
    expect(renamed.migration.ok).toBe(false);
    expect(renamed.warning).toMatch(/hermes profile migrate-identity carol caroline/);
    expect(renamed.warning).toContain(join(t.home, "state.db"));
    expect(existsSync(join(t.home, "profiles", "caroline"))).toBe(true);
    expect(rows("SELECT count(*) FROM sessions WHERE profile_name = 'carol'")).toEqual([1]);

    const m = await call(control, control.migrateProfileIdentity, { old_name: "carol", new_name: "caroline" }, null);
    expect(m.ok).toBe(true);
    expect(m.counts).toMatchObject({ sessions: 1, gateway_routing: 1 });
    expect(m.routing_in_memory).toBe(1);
    expect(rows("SELECT count(*) FROM sessions WHERE profile_name = 'carol'")).toEqual([0]);
    const again = await call(control, control.migrateProfileIdentity, { old_name: "carol", new_name: "caroline" }, null);
    expect(again.counts).toEqual({});
    expect(again.routing_in_memory).toBe(0);
  });

  it("refuses a rename onto an existing profile and changes nothing", async () => {
    await create("dave");
    await create("erin");
    expect(await reason(call(gw, gw.renameProfile, { old_name: "dave", new_name: "erin" }))).toBe("already_exists");
    expect(existsSync(join(t.home, "profiles", "dave"))).toBe(true);
    expect(t.gateway.routing.keysOf("dave")).toHaveLength(1);
  });

  it("deletes with a tombstone; a late turn cannot recreate the profile; explicit create brings it back", async () => {
    await create("frank");
    await call(gw, gw.chat, { profile: "frank", text: "hi", session_id: "" });
    const d = await call(gw, gw.deleteProfile, { name: "frank" });
    expect(d.purged).toMatchObject({ sessions: 1 });
    expect(existsSync(join(t.home, "profiles", "frank"))).toBe(false);
    expect(existsSync(join(t.home, "profiles", ".deleted", "frank"))).toBe(true);
    expect(t.gateway.routing.keysOf("frank")).toEqual([]);
    expect(await reason(call(gw, gw.chat, { profile: "frank", text: "late", session_id: "" }))).toBe("not_found");
    expect(existsSync(join(t.home, "profiles", "frank"))).toBe(false);
    // Its one turn was delivered before the delete: that obligation stays delivered.
    expect(rows("SELECT state FROM delivery_obligations WHERE adapter_profile = 'frank'")).toEqual(["delivered"]);
    await create("frank");
    expect(existsSync(join(t.home, "profiles", ".deleted", "frank"))).toBe(false);
    expect((await call(gw, gw.chat, { profile: "frank", text: "back", session_id: "" })).profile).toBe("frank");
  });

  it("validates names at the edge", async () => {
    for (const name of ["../x", "", "Upper", "a".repeat(65)]) expect(await reason(create(name))).toBe("invalid_name");
    expect(await reason(call(gw, gw.deleteProfile, { name: "default" }))).toBe("default_profile");
  });
});
