import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decideSend, forward, type NewDelivery } from "../../deliveries/core/deliveries.js";
import { hashKey } from "../../keys/core/keys.js";
import { RelayStore } from "./relay-store.js";

let dir: string;
let store: RelayStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hrelay-store-"));
  store = new RelayStore(join(dir, "relay.db"));
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

function newDelivery(id: string, target = "b"): NewDelivery {
  const d = decideSend(
    undefined,
    "a",
    {
      envelope: {
        delivery_id: id,
        from_profile: "alice",
        from_gateway: "gw-a",
        target: `bob@${target}`,
        message: "hi",
        created_at: "2030-01-01T00:00:00Z",
        ttl_seconds: 60,
      },
      target_connection: target,
      target_handle: "bob",
      sender_name: "Alice",
    },
    Date.parse("2030-01-01T00:00:00Z"),
  );
  if (d.action !== "insert") throw new Error("expected insert");
  return d.record;
}

describe("RelayStore", () => {
  it("runs with synchronous=FULL in WAL mode", () => {
    expect(store.db.pragma("synchronous", { simple: true })).toBe(2);
    expect(store.db.pragma("journal_mode", { simple: true })).toBe("wal");
  });

  it("keeps keys hashed, one per connection; revoking removes the key and the connection's roster", () => {
    store.addKey("a", hashKey("hrk_secret"), "2030-01-01T00:00:00Z");
    expect(() => store.addKey("a", hashKey("hrk_other"), "2030-01-01T00:00:00Z")).toThrow(
      expect.objectContaining({ reason: "already_exists" }),
    );
    expect(store.connectionForKeyHash(hashKey("hrk_secret"))).toBe("a");
    expect(store.connectionForKeyHash(hashKey("hrk_wrong"))).toBeUndefined();
    const raw = JSON.stringify(store.db.prepare("SELECT * FROM connection_keys").all());
    expect(raw).not.toContain("hrk_secret");
    store.saveRoster("a", [{ handle: "alice", display_name: "Alice", title: "", description: "" }], 3);
    expect(store.loadRoster()).toEqual([
      { connection: "a", gateway_id: "", bots: [{ handle: "alice", display_name: "Alice", title: "", description: "" }] },
    ]);
    // The gateway id of the last hello comes back with the roster (a restarted relay still routes by it).
    store.touchConnection("a", "gw-469bc200", "2030-01-01T00:00:01Z");
    expect(store.loadRoster()[0]).toMatchObject({ connection: "a", gateway_id: "gw-469bc200" });
    expect(store.rosterEpoch()).toBe(3);
    expect(store.revokeKey("a")).toBe(true);
    expect(store.revokeKey("a")).toBe(false);
    expect(store.loadRoster()).toEqual([]);
  });

  it("lists connections with a key but no bots as an empty roster", () => {
    store.addKey("quiet", hashKey("k"), "2030-01-01T00:00:00Z");
    expect(store.loadRoster()).toEqual([{ connection: "quiet", gateway_id: "", bots: [] }]);
  });

  it("stores deliveries in commit order; open() returns the unended ones; prune forgets old ended ones", () => {
    const one = store.insert(newDelivery("d1"));
    const two = store.insert(newDelivery("d2"));
    expect(two.seq).toBeGreaterThan(one.seq);
    expect(store.delivery("d1")).toEqual(one);
    const done = {
      ...forward(one, 1000),
      state: "done" as const,
      outcome: { kind: "error" as const, reason: "unknown", message: "x" },
      updated_at: 1000,
    };
    store.save(done);
    expect(store.delivery("d1")).toMatchObject({ state: "done", forwards: 1, outcome: { reason: "unknown" } });
    expect(store.open().map((d) => d.delivery_id)).toEqual(["d2"]);
    expect(store.countByState()).toMatchObject({ queued: 1, done: 1 });
    expect(store.prune(999)).toBe(0);
    expect(store.prune(1001)).toBe(1);
    expect(store.delivery("d1")).toBeUndefined();
    expect(store.delivery("d2")).toBeDefined();
  });

  it("survives reopening: the queue and the epoch are where they were", () => {
    store.insert(newDelivery("d1"));
    store.saveEpoch(42);
    store.close();
    store = new RelayStore(join(dir, "relay.db"));
    expect(store.open().map((d) => d.delivery_id)).toEqual(["d1"]);
    expect(store.rosterEpoch()).toBe(42);
  });
});
