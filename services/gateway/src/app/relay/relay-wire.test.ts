import { describe, expect, it } from "vitest";
import { RemoteRoster } from "./remote-roster.js";
import { TunnelHandlers } from "./tunnel-handlers.js";
import { errorFromWire, errorToWire, receiptFromWire, receiptToWire } from "./wire.js";

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
    expect(() => receiptFromWire(undefined)).toThrow(/without a receipt/);
  });

  it("keeps typed errors typed, and falls back for reasons this build does not know", () => {
    const e = errorFromWire({ reason: "idempotency_conflict", message: "other payload", data_json: '{"delivery_id":"d1"}' });
    expect(e).toMatchObject({ reason: "idempotency_conflict", message: "other payload", data: { delivery_id: "d1" } });
    expect(errorFromWire({ reason: "new_reason", message: "m", data_json: "not json" })).toMatchObject({ reason: "unknown", data: {} });
    expect(errorToWire(e)).toEqual({ reason: "idempotency_conflict", message: "other payload", data_json: '{"delivery_id":"d1"}' });
  });
});

describe("RemoteRoster", () => {
  const bot = (connection: string, handle: string, online = true) => ({
    connection,
    bot: { handle, display_name: handle, title: `${handle} title`, description: "" },
    online,
  });

  it("applies only newer epochs, drops its own connection, and resets per stream", () => {
    const r = new RemoteRoster();
    expect(r.update(3, [bot("b", "bob"), bot("a", "self")], "a")).toBe(true);
    expect(r.bots()).toEqual([{ handle: "bob", connection: "b", title: "bob title" }]);
    expect(r.update(2, [bot("b", "old")], "a")).toBe(false);
    expect(r.update(3, [bot("b", "old")], "a")).toBe(false);
    expect(r.entries()[0]).toMatchObject({ handle: "bob", online: true });
    r.resetEpoch();
    expect(r.update(1, [bot("c", "carol", false)], "a")).toBe(true);
    expect(r.entries()).toEqual([
      { connection: "c", handle: "carol", display_name: "carol", title: "carol title", description: "", online: false },
    ]);
    expect(r.epoch).toBe(1);
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
