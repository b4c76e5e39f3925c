import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { listTeammates, parseTarget, type Roster, resolveTarget } from "./targets.js";

const roster: Roster = {
  local: [
    { profile: "default", title: "Main" },
    { profile: "alice", title: "Researcher", aliases: ["research-buddy"] },
    { profile: "bob", aliases: ["robert", "shared"] },
    { profile: "carol", aliases: ["shared"] },
  ],
  remote: [
    { handle: "moxie", connection: "vps" },
    { handle: "moxie", connection: "k8s-0" },
    { handle: "dixie", connection: "vps" },
    { handle: "bob", connection: "vps" },
    { handle: "robert", connection: "k8s-0" },
  ],
  peers: [{ name: "spark", profiles: ["default", "researcher"] }, { name: "edge" }],
  local_connection: "laptop",
};

function caught(fn: () => unknown): HermesError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HermesError) return err;
    throw err;
  }
  throw new Error("expected a HermesError");
}

describe("parseTarget", () => {
  it.each([
    ["bob", { form: "name", name: "bob" }],
    ["@Bob", { form: "name", name: "bob" }],
    ["  bob  ", { form: "name", name: "bob" }],
    ["moxie@vps", { form: "relay", handle: "moxie", connection: "vps" }],
    ["@moxie@vps", { form: "relay", handle: "moxie", connection: "vps" }],
    ["spark/researcher", { form: "peer", peer: "spark", profile: "researcher" }],
  ])("%s", (raw, expected) => {
    expect(parseTarget(raw)).toEqual(expected);
  });

  it.each(["", "   ", "@", "a@b@c", "a/b/c", "a@b/c", "../etc", "bob smith", "bob@", "/bob", "-bob", "x".repeat(65)])(
    "rejects %j",
    (raw) => {
      expect(parseTarget(raw).form).toBe("invalid");
    },
  );
});

describe("resolveTarget", () => {
  it("a local profile by name", () => {
    expect(resolveTarget("alice", roster)).toEqual({ kind: "local", profile: "alice", target: "alice" });
  });

  it("a local profile by former name (alias)", () => {
    expect(resolveTarget("research-buddy", roster)).toEqual({ kind: "local", profile: "alice", target: "alice" });
  });

  it("`hermes` means the default profile", () => {
    expect(resolveTarget("hermes", roster)).toEqual({ kind: "local", profile: "default", target: "default" });
  });

  it("an exact local name beats a remote bot with the same handle", () => {
    expect(resolveTarget("bob", roster)).toEqual({ kind: "local", profile: "bob", target: "bob" });
  });

  it("a unique bare remote handle goes through the relay", () => {
    expect(resolveTarget("dixie", roster)).toEqual({ kind: "relay", connection: "vps", handle: "dixie", target: "dixie@vps" });
  });

  it("a handle on several connections is ambiguous and lists the qualified forms", () => {
    const err = caught(() => resolveTarget("moxie", roster));
    expect(err.reason).toBe("ambiguous_target");
    expect(err.data["candidates"]).toEqual(["moxie@vps", "moxie@k8s-0"]);
    expect(err.message).toContain("moxie@vps, moxie@k8s-0");
    expect(err.message).toContain("<handle>@<connection>");
    expect(err.message).toContain("<peer>/<profile>");
  });

  it("a former name that is also a remote handle is ambiguous, not guessed", () => {
    const err = caught(() => resolveTarget("robert", roster));
    expect(err.reason).toBe("ambiguous_target");
    expect(err.data["candidates"]).toEqual(["bob", "robert@k8s-0"]);
  });

  it("an alias two local bots share is ambiguous", () => {
    expect(caught(() => resolveTarget("shared", roster)).data["candidates"]).toEqual(["bob", "carol"]);
  });

  it("a qualified relay target", () => {
    expect(resolveTarget("moxie@k8s-0", roster)).toEqual({ kind: "relay", connection: "k8s-0", handle: "moxie", target: "moxie@k8s-0" });
    expect(resolveTarget("bob@vps", roster)).toMatchObject({ kind: "relay", connection: "vps" });
  });

  it("a bot whose gateway is offline still resolves (its mail waits at the relay); description and name change nothing", () => {
    const offline: Roster = {
      ...roster,
      remote: [
        { handle: "nora", connection: "home", display_name: "Nora", title: "Ops", description: "keeps the lights on", online: false },
      ],
    };
    expect(resolveTarget("nora", offline)).toEqual({ kind: "relay", connection: "home", handle: "nora", target: "nora@home" });
    expect(resolveTarget("nora@home", offline)).toMatchObject({ kind: "relay", connection: "home" });
    expect(listTeammates(offline)).toContain("nora@home");
  });

  it("`<handle>@<this gateway>` is local", () => {
    expect(resolveTarget("bob@laptop", roster)).toEqual({ kind: "local", profile: "bob", target: "bob" });
    expect(resolveTarget("research-buddy@laptop", roster)).toMatchObject({ kind: "local", profile: "alice" });
  });

  it("peer targets", () => {
    expect(resolveTarget("spark/researcher", roster)).toEqual({
      kind: "peer",
      peer: "spark",
      profile: "researcher",
      target: "spark/researcher",
    });
    expect(resolveTarget("edge/anything", roster)).toMatchObject({ kind: "peer", peer: "edge", profile: "anything" });
    expect(resolveTarget("edge", roster)).toEqual({ kind: "peer", peer: "edge", profile: "default", target: "edge/default" });
  });

  it.each([
    ["nobody", "no teammate is called"],
    ["ghost@vps", 'connection "vps" has no bot called "ghost"'],
    ["moxie@mars", 'no connection called "mars"'],
    ["nope/researcher", 'no peer called "nope"'],
    ["spark/writer", 'peer "spark" has no profile called "writer"'],
    ["a@b@c", "is not a valid target"],
    ["", "the target is empty"],
  ])("%j is unknown_target with the teammates listed", (raw, why) => {
    const err = caught(() => resolveTarget(raw, roster, { self: "alice" }));
    expect(err.reason).toBe("unknown_target");
    expect(err.message).toContain(why);
    expect(err.data["teammates"]).toEqual(listTeammates(roster, "alice"));
    expect(err.data["teammates"]).toContain("moxie@vps");
    expect(err.data["teammates"]).not.toContain("alice");
    expect(err.message).toContain("Valid targets: default, bob, carol");
  });

  it("refuses a bot messaging itself, by name, alias or own connection", () => {
    for (const raw of ["alice", "research-buddy", "alice@laptop"]) {
      const err = caught(() => resolveTarget(raw, roster, { self: "alice" }));
      expect(err.reason).toBe("invalid_params");
      expect(err.message).toContain("cannot message itself");
    }
  });

  it("a bare peer name needs the peer to have a default profile", () => {
    const r: Roster = { local: [], remote: [], peers: [{ name: "solo", profiles: ["writer"] }] };
    expect(caught(() => resolveTarget("solo", r)).reason).toBe("unknown_target");
    expect(resolveTarget("solo/writer", r)).toMatchObject({ kind: "peer", profile: "writer" });
  });

  it("an empty roster still answers with a typed error", () => {
    const err = caught(() => resolveTarget("bob", { local: [], remote: [], peers: [] }));
    expect(err.reason).toBe("unknown_target");
    expect(err.data["teammates"]).toEqual([]);
    expect(err.message).toContain("none");
  });
});

describe("A2A agents as peers", () => {
  const withAgents: Roster = { ...roster, peers: [...roster.peers, { name: "weather", a2a: true }, { name: "dixie", a2a: true }] };

  it("an agent is reached by its name alone, over A2A", () => {
    expect(resolveTarget("weather", withAgents)).toEqual({ kind: "peer", peer: "weather", profile: "", target: "weather", a2a: true });
    expect(resolveTarget("@Weather", withAgents)).toMatchObject({ target: "weather", a2a: true });
  });

  it("`<agent>/<profile>` is refused (an agent has no profiles), naming the right form", () => {
    expect(caught(() => resolveTarget("weather/default", withAgents))).toMatchObject({
      reason: "unknown_target",
      message: expect.stringContaining("is one A2A agent: message it as weather"),
    });
  });

  it("an agent whose name is also a bot's elsewhere is ambiguous, not guessed", () => {
    expect(caught(() => resolveTarget("dixie", withAgents))).toMatchObject({
      reason: "ambiguous_target",
      data: { candidates: ["dixie@vps", "dixie"] },
    });
  });

  it("is listed as a teammate by its name", () => {
    expect(listTeammates(withAgents)).toEqual(expect.arrayContaining(["weather", "dixie"]));
  });
});

describe("listTeammates", () => {
  it("lists local names, qualified remote handles and peer profiles", () => {
    expect(listTeammates(roster, "bob")).toEqual([
      "default",
      "alice",
      "carol",
      "moxie@vps",
      "moxie@k8s-0",
      "dixie@vps",
      "bob@vps",
      "robert@k8s-0",
      "spark/default",
      "spark/researcher",
      "edge/<profile>",
    ]);
  });
});
