import { describe, expect, it } from "vitest";
import { parseAnnounce, RosterBook, type RosterBot } from "./roster.js";

const bot = (handle: string, title = ""): RosterBot => ({ handle, display_name: handle, title, description: "" });

describe("RosterBook", () => {
  it("raises the epoch on appear, rename, disappear and online changes, and only then", () => {
    const r = new RosterBook(7);
    expect(r.setOnline("a", true)).toBe(true);
    expect(r.epoch).toBe(8);
    expect(r.announce("a", [bot("bob")])).toBe(true);
    expect(r.epoch).toBe(9);
    expect(r.announce("a", [bot("bob")])).toBe(false);
    expect(r.epoch).toBe(9);
    expect(r.announce("a", [bot("robert")])).toBe(true); // rename
    expect(r.announce("a", [bot("robert", "Reviewer")])).toBe(true); // title change
    expect(r.announce("a", [])).toBe(true); // disappear
    expect(r.setOnline("a", false)).toBe(true);
    expect(r.setOnline("a", false)).toBe(false);
    expect(r.epoch).toBe(13);
    expect(r.remove("a")).toBe(true);
    expect(r.remove("a")).toBe(false);
    expect(r.epoch).toBe(14);
  });

  it("shows each connection the bots on the others, with their online flag", () => {
    const r = new RosterBook(0, [["c", [bot("carol")]]]);
    r.setOnline("a", true);
    r.announce("a", [bot("alice")]);
    r.setOnline("b", true);
    r.announce("b", [bot("bob"), bot("bea")]);
    expect(r.viewFor("a").bots).toEqual([
      { connection: "b", bot: bot("bob"), online: true },
      { connection: "b", bot: bot("bea"), online: true },
      { connection: "c", bot: bot("carol"), online: false },
    ]);
    expect(r.viewFor("c").bots.map((b) => `${b.bot.handle}@${b.connection}`)).toEqual(["alice@a", "bob@b", "bea@b"]);
    expect(r.isOnline("c")).toBe(false);
    expect(r.bots("b")).toHaveLength(2);
  });

  it("keeps an offline connection's bots", () => {
    const r = new RosterBook(0);
    r.setOnline("a", true);
    r.announce("a", [bot("alice")]);
    r.setOnline("a", false);
    expect(r.viewFor("b").bots).toEqual([{ connection: "a", bot: bot("alice"), online: false }]);
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
