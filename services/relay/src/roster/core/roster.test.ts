import { describe, expect, it } from "vitest";
import { parseAnnounce, RosterBook, type RosterBot } from "./roster.js";

const bot = (handle: string, title = ""): RosterBot => ({ handle, display_name: handle, title, description: "" });

describe("RosterBook", () => {
  it("raises the epoch on appear, rename, disappear and online changes, and only then", () => {
    const r = new RosterBook(7);
    expect(r.connected("a", "gw-a")).toBe(true);
    expect(r.epoch).toBe(8);
    expect(r.announce("a", [bot("bob")])).toBe(true);
    expect(r.epoch).toBe(9);
    expect(r.announce("a", [bot("bob")])).toBe(false);
    expect(r.epoch).toBe(9);
    expect(r.announce("a", [bot("robert")])).toBe(true); // rename
    expect(r.announce("a", [bot("robert", "Reviewer")])).toBe(true); // title change
    expect(r.announce("a", [])).toBe(true); // disappear
    expect(r.disconnected("a")).toBe(true);
    expect(r.disconnected("a")).toBe(false);
    expect(r.disconnected("never-seen")).toBe(false);
    expect(r.epoch).toBe(13);
    expect(r.remove("a")).toBe(true);
    expect(r.remove("a")).toBe(false);
    expect(r.epoch).toBe(14);
  });

  it("shows each connection the bots on the others, with their online flag and gateway id", () => {
    const r = new RosterBook(0, [{ connection: "c", gateway_id: "gw-c", bots: [bot("carol")] }]);
    r.connected("a", "gw-a");
    r.announce("a", [bot("alice")]);
    r.connected("b", "gw-b");
    r.announce("b", [bot("bob"), bot("bea")]);
    expect(r.viewFor("a").bots).toEqual([
      { connection: "b", bot: bot("bob"), online: true, gateway_id: "gw-b" },
      { connection: "b", bot: bot("bea"), online: true, gateway_id: "gw-b" },
      { connection: "c", bot: bot("carol"), online: false, gateway_id: "gw-c" },
    ]);
    expect(r.viewFor("c").bots.map((b) => `${b.bot.handle}@${b.connection}`)).toEqual(["alice@a", "bob@b", "bea@b"]);
    expect(r.isOnline("c")).toBe(false);
    expect(r.bots("b")).toHaveLength(2);
  });

  it("keeps an offline connection's bots and gateway id", () => {
    const r = new RosterBook(0);
    r.connected("vps", "gw-469bc200");
    r.announce("vps", [bot("alice")]);
    r.disconnected("vps");
    expect(r.viewFor("b").bots).toEqual([{ connection: "vps", bot: bot("alice"), online: false, gateway_id: "gw-469bc200" }]);
    expect(r.gatewayId("vps")).toBe("gw-469bc200");
    expect(r.gatewayId("nobody")).toBe("");
  });

  it("a reconnect with the same gateway id is no change; another gateway id under the name is one", () => {
    const r = new RosterBook(0);
    r.connected("vps", "gw-one");
    r.announce("vps", [bot("alice")]);
    const epoch = r.epoch;
    expect(r.connected("vps", "gw-one")).toBe(false); // a replaced stream of the same gateway
    expect(r.epoch).toBe(epoch);
    expect(r.connected("vps", "gw-two")).toBe(true); // the key now serves another gateway
    expect(r.epoch).toBe(epoch + 1);
    expect(r.viewFor("x").bots[0]).toMatchObject({ connection: "vps", gateway_id: "gw-two", online: true });
    // Coming back online is one change, even with a new id.
    r.disconnected("vps");
    expect(r.connected("vps", "gw-three")).toBe(true);
    expect(r.epoch).toBe(epoch + 3);
  });

  it("a stored connection without a known gateway id carries an empty one until it connects", () => {
    const r = new RosterBook(5, [{ connection: "old", gateway_id: "", bots: [bot("ann")] }]);
    expect(r.viewFor("x").bots).toEqual([{ connection: "old", bot: bot("ann"), online: false, gateway_id: "" }]);
    expect(r.announce("old", [bot("ann"), bot("ben")])).toBe(true);
    expect(r.gatewayId("old")).toBe("");
    r.connected("old", "gw-old");
    expect(r.viewFor("x").bots.map((b) => b.gateway_id)).toEqual(["gw-old", "gw-old"]);
  });
});

describe("parseAnnounce", () => {
  it("sorts by handle and refuses duplicates, bad handles and over-long fields with typed errors", () => {
    expect(parseAnnounce({ bots: [bot("zed"), bot("amy")] }).map((b) => b.handle)).toEqual(["amy", "zed"]);
    expect(() => parseAnnounce({ bots: [bot("amy"), bot("amy")] })).toThrow(/listed twice/);
    expect(() => parseAnnounce({ bots: [bot("Bad Name")] })).toThrow(expect.objectContaining({ reason: "invalid_params" }));
    expect(() => parseAnnounce({ bots: [{ ...bot("amy"), title: "x".repeat(201) }] })).toThrow(/bots.0.title/);
    expect(() => parseAnnounce({ bots: "no" })).toThrow(expect.objectContaining({ reason: "invalid_params" }));
  });
});
