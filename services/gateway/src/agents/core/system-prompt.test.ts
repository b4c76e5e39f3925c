import { describe, expect, it } from "vitest";
import { buildSystemPrompt, OFFLINE_NOTE, relayTeammate } from "./system-prompt.js";

const persona = {
  display_name: "Ada",
  handle: "ada",
  title: "Researcher",
  description: "finds and cites sources",
  soul: "Be brief.\nCite everything.",
};

describe("buildSystemPrompt", () => {
  it("states who the bot is, then its SOUL", () => {
    expect(buildSystemPrompt(persona)).toBe("You are Ada (@ada), Researcher.\n\nfinds and cites sources\n\nBe brief.\nCite everything.");
  });

  it("adds the teammate roster with titles, descriptions and exact targets only when given (canonical Bot Chat)", () => {
    const text = buildSystemPrompt(persona, [
      { target: "bob", title: "Reviewer", description: "reviews\ncode" },
      { target: "spark/<profile>", where: "peer gateway spark" },
    ]);
    expect(text).toContain("## Teammates");
    expect(text).toContain("message_agent tool");
    expect(text).toContain("- bob: Reviewer — reviews code");
    expect(text).toContain("- spark/<profile> (peer gateway spark)");
    expect(text).toContain("failed [reason: <code>]");
  });

  it("shows a relay teammate's display name, title, description, and marks it when its gateway is offline", () => {
    const online = relayTeammate({
      handle: "bob",
      connection: "vps",
      display_name: "Robert the Reviewer",
      title: "Reviewer",
      description: "reads every diff\ntwice",
      online: true,
    });
    const offline = relayTeammate({ handle: "nora", connection: "home", display_name: "Nora", title: "", description: "", online: false });
    const text = buildSystemPrompt(persona, [online, offline]);
    expect(text).toContain("- bob@vps (Robert the Reviewer; via the relay): Reviewer — reads every diff twice");
    // A display name that only repeats the handle is left out; offline says mail waits.
    expect(text.split("\n")).toContain(`- nora@home (via the relay; ${OFFLINE_NOTE})`);
    expect(OFFLINE_NOTE).toContain("mail waits");
    // A roster entry from a relay that sent no online flag is not called offline.
    expect(relayTeammate({ handle: "old", connection: "c", title: "T" })).toEqual({
      target: "old@c",
      title: "T",
      description: undefined,
      where: "via the relay",
    });
  });

  it("says so when there are no teammates, and falls back to the handle for a blank name", () => {
    const text = buildSystemPrompt({ display_name: " ", handle: "solo" }, []);
    expect(text.startsWith("You are solo (@solo).")).toBe(true);
    expect(text).toContain("(no teammates yet)");
  });

  it("is deterministic (the agent signature and prompt caches depend on it)", () => {
    expect(buildSystemPrompt(persona, [{ target: "bob" }])).toBe(buildSystemPrompt({ ...persona }, [{ target: "bob" }]));
  });
});
