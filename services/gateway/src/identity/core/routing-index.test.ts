import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { type RoutingEntry, RoutingIndex } from "./routing-index.js";
import { routingKey } from "./routing-key.js";

function entry(profile: string, chat: string): RoutingEntry {
  const key = routingKey({ profile, platform: "api", chat_type: "dm", chat_id: chat });
  return {
    routing_key: key,
    session_key: key,
    session_id: `s-${profile}-${chat}`,
    origin: { profile, platform: "api", chat_type: "dm", chat_id: chat },
    updated_at: "t",
  };
}

const index = () => new RoutingIndex();

describe("RoutingIndex", () => {
  it("rekeys keys, session keys and origin.profile after the store did; nothing is written again", () => {
    const index = RoutingIndex.from([entry("bob", "1"), entry("bob", "2"), entry("bobcat", "1")]);
    expect(index.rekeyProfile("bob", "rob")).toBe(2);
    expect(index.get("agent:bob:api:dm:1")).toBeUndefined();
    expect(index.get("agent:rob:api:dm:1")).toMatchObject({
      routing_key: "agent:rob:api:dm:1",
      session_key: "agent:rob:api:dm:1",
      origin: { profile: "rob" },
      session_id: "s-bob-1",
    });
    expect(index.get("agent:bobcat:api:dm:1")).toBeDefined();
    expect(index.keysOf("rob").sort()).toEqual(["agent:rob:api:dm:1", "agent:rob:api:dm:2"]);
    expect(index.hasChanges).toBe(false);
  });

  it("changes not persisted before the rekey are written under the new name", () => {
    const index = RoutingIndex.from([entry("bob", "1"), entry("bob", "2"), entry("bob", "3")]);
    index.upsert({ ...entry("bob", "2"), updated_at: "later" });
    index.delete("agent:bob:api:dm:3");
    expect(index.rekeyProfile("bob", "rob")).toBe(2);
    const changes = index.takeChanges();
    expect(changes.deletes).toEqual(["agent:rob:api:dm:3"]);
    expect(changes.upserts).toEqual([{ ...entry("rob", "2"), session_id: "s-bob-2", updated_at: "later" }]);
  });

  it("merges onto a profile that has entries of its own", () => {
    const index = RoutingIndex.from([entry("bob", "1"), entry("rob", "2")]);
    index.upsert({ ...entry("bob", "1"), updated_at: "later" });
    expect(index.rekeyProfile("bob", "rob")).toBe(1);
    expect(index.keysOf("rob").sort()).toEqual(["agent:rob:api:dm:1", "agent:rob:api:dm:2"]);
    expect(index.keysOf("bob")).toEqual([]);
    expect(index.takeChanges().upserts.map((e) => e.routing_key)).toEqual(["agent:rob:api:dm:1"]);
  });

  it("refuses an entry whose key is not its session's and profile's", () => {
    const e = entry("bob", "1");
    expect(() => index().upsert({ ...e, origin: { ...e.origin, profile: "rob" } })).toThrow(/not keyed by its session and profile/);
    expect(() => index().upsert({ ...e, session_key: "agent:bob:api:dm:2" })).toThrow(HermesError);
  });

  it("refuses a collision before mutating anything", () => {
    const index = RoutingIndex.from([entry("bob", "1"), entry("bob", "2"), entry("rob", "2")]);
    expect(() => index.rekeyProfile("bob", "rob")).toThrow(HermesError);
    expect(index.keysOf("bob").length).toBe(2);
    expect(index.hasChanges).toBe(false);
  });

  it("a second rekey is a no-op", () => {
    const index = RoutingIndex.from([entry("bob", "1")]);
    index.rekeyProfile("bob", "rob");
    index.takeChanges();
    expect(index.rekeyProfile("bob", "rob")).toBe(0);
    expect(index.hasChanges).toBe(false);
  });

  it("restores changes after a failed persist", () => {
    const index = new RoutingIndex();
    index.upsert(entry("a", "1"));
    const changes = index.takeChanges();
    index.restoreChanges(changes);
    expect(index.takeChanges().upserts).toHaveLength(1);
  });

  it("removes a profile's entries", () => {
    const index = RoutingIndex.from([entry("a", "1"), entry("b", "1")]);
    expect(index.removeProfile("a")).toBe(1);
    expect(index.size).toBe(1);
    expect(index.takeChanges().deletes).toEqual(["agent:a:api:dm:1"]);
  });
});
