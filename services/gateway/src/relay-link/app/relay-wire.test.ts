import { fromWireError, toWireError } from "@hermes/common";
import { describe, expect, it } from "vitest";
import { receiptFromWire, receiptToWire } from "../../delivery/app/receipt-wire.js";
import { RemoteRoster } from "./remote-roster.js";
import { TunnelHandlers } from "./tunnel-handlers.js";

describe("receipts on the wire", () => {
  it("round-trips a receipt; nulls travel as absent fields", () => {
    const receipt = {
      delivery_id: "d1",
      from: "alice@a",
      target: "bob@b",
      state: "failed" as const,
      reason: "provider_rate_limit" as const,
      error: "slow down",
      attempts: 2,
      created_at: "2030-01-01T00:00:00.000Z",
      settled_at: "2030-01-01T00:00:01.000Z",
      reply: null,
    };
    const wire = receiptToWire(receipt);
    expect("reply" in wire).toBe(false);
    expect(receiptFromWire(wire)).toEqual(receipt);
  });

  it("refuses an unknown state and maps an unknown reason to unknown", () => {
    const base = { delivery_id: "d1", from: "a", target: "b", attempts: 1, created_at: "x" };
    expect(() => receiptFromWire({ ...base, state: "exploded" })).toThrow(/unknown delivery state/);
    expect(receiptFromWire({ ...base, state: "failed", reason: "cosmic_rays" }).reason).toBe("unknown");
    // The refusals a hop may end a delivery with stay typed.
    expect(receiptFromWire({ ...base, state: "failed", reason: "unknown_target" }).reason).toBe("unknown_target");
    expect(receiptFromWire({ ...base, state: "failed", reason: "idempotency_conflict" }).reason).toBe("idempotency_conflict");
    expect(() => receiptFromWire(undefined)).toThrow(/without a receipt/);
  });

  it("keeps typed errors typed, and falls back for reasons this build does not know", () => {
    const e = fromWireError({ reason: "idempotency_conflict", message: "other payload", data_json: '{"delivery_id":"d1"}' });
    expect(e).toMatchObject({ reason: "idempotency_conflict", message: "other payload", data: { delivery_id: "d1" } });
    expect(fromWireError({ reason: "new_reason", message: "m", data_json: "not json" })).toMatchObject({ reason: "unknown", data: {} });
    expect(toWireError(e)).toEqual({ reason: "idempotency_conflict", message: "other payload", data_json: '{"delivery_id":"d1"}' });
  });
});

describe("RemoteRoster", () => {
  const bot = (connection: string, handle: string, online = true, gateway_id = `gw-${connection}`) => ({
    connection,
    bot: { handle, display_name: handle.toUpperCase(), title: `${handle} title`, description: `${handle} does things` },
    online,
    gateway_id,
  });

  it("applies only newer epochs, drops its own connection, and resets per stream", () => {
    const r = new RemoteRoster();
    expect(r.update(3, [bot("b", "bob"), bot("a", "self")], "a")).toBe(true);
    expect(r.bots()).toEqual([
      { handle: "bob", connection: "b", display_name: "BOB", title: "bob title", description: "bob does things", online: true },
    ]);
    expect(r.update(2, [bot("b", "old")], "a")).toBe(false);
    expect(r.update(3, [bot("b", "old")], "a")).toBe(false);
    expect(r.entries()[0]).toMatchObject({ handle: "bob", online: true, gateway_id: "gw-b" });
    r.resetEpoch();
    expect(r.update(1, [bot("c", "carol", false)], "a")).toBe(true);
    expect(r.entries()).toEqual([
      {
        connection: "c",
        gateway_id: "gw-c",
        handle: "carol",
        display_name: "CAROL",
        title: "carol title",
        description: "carol does things",
        online: false,
      },
    ]);
    // Offline bots stay in the delivery roster (mail to them waits at the relay), marked as such.
    expect(r.bots()).toEqual([expect.objectContaining({ handle: "carol", online: false, description: "carol does things" })]);
    expect(r.epoch).toBe(1);
  });

  it("finds a gateway's connection by gateway id, whatever the connection is called", () => {
    const r = new RemoteRoster();
    r.update(1, [bot("vps", "nora", true, "gw-469bc200"), bot("vps", "ned", true, "gw-469bc200"), bot("b", "bob")], "a");
    expect(r.connectionOf("gw-469bc200")).toBe("vps");
    expect(r.connectionOf("gw-b")).toBe("b");
    // Not in the roster (or no id at all): the caller decides the fallback.
    expect(r.connectionOf("vps")).toBeUndefined();
    expect(r.connectionOf("gw-nowhere")).toBeUndefined();
    expect(r.connectionOf("")).toBeUndefined();
    // A relay too old to send gateway ids lists every bot with "": that matches nothing.
    r.update(2, [bot("old", "olga", true, "")], "a");
    expect(r.connectionOf("")).toBeUndefined();
    expect(r.connectionOf("gw-old")).toBeUndefined();
  });

  it("picks deterministically when several connections claim one gateway id: online, then named like it, then by name", () => {
    const r = new RemoteRoster();
    const id = "gw-1";
    r.update(1, [bot("zeta", "z", false, id), bot("gw-1", "g", false, id), bot("alpha", "a1", false, id)], "self");
    expect(r.connectionOf(id)).toBe("gw-1"); // all offline: the one named like the id
    r.update(2, [bot("zeta", "z", true, id), bot("gw-1", "g", false, id), bot("alpha", "a1", false, id)], "self");
    expect(r.connectionOf(id)).toBe("zeta"); // online beats the name
    r.update(3, [bot("zeta", "z", true, id), bot("alpha", "a1", false, id), bot("alpha", "a2", true, id)], "self");
    expect(r.connectionOf(id)).toBe("alpha"); // both online (alpha through one of its bots): first by name
  });
});

describe("TunnelHandlers", () => {
  it("serves what was registered and refuses the rest with method_not_found naming what it serves", () => {
    const h = new TunnelHandlers();
    h.register("groups.log", { kind: "unary", run: async () => 1 });
    expect(h.get("groups.log").kind).toBe("unary");
    expect(() => h.register("groups.log", { kind: "unary", run: async () => 2 })).toThrow(
      expect.objectContaining({ reason: "already_exists" }),
    );
    expect(() => h.get("shell.exec")).toThrow(
      expect.objectContaining({ reason: "method_not_found", data: { method: "shell.exec", methods: ["groups.log"] } }),
    );
    h.unregister("groups.log");
    expect(h.methods()).toEqual([]);
  });
});
