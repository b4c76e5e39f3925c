import { describe, expect, it } from "vitest";
import { botCard, botCardUrl, botEndpoint, type CardBot, indexCard, isServedVersion, requestedVersion } from "./card.js";

const site = { base_url: "http://127.0.0.1:7441", version: "0.1.0", gateway_id: "gw-1" };
const alice: CardBot = { profile: "alice", display_name: "Alice", title: "Researcher", description: "Finds papers" };
const bob: CardBot = { profile: "bob", display_name: "bob", title: "", description: "" };

describe("A2A versions", () => {
  it.each([
    [undefined, "0.3"],
    ["", "0.3"],
    ["0.3", "0.3"],
    ["0.3.0", "0.3"],
    ["1", "1.0"],
    ["1.0", "1.0"],
    [" 1.0.0 ", "1.0"],
    ["2.0", "2.0"],
    ["v1", "v1"],
  ])("A2A-Version %j asks for %s", (header, version) => {
    expect(requestedVersion(header)).toBe(version);
  });

  it("serves 1.0 and 0.3 only", () => {
    expect(["1.0", "0.3", "2.0", "0.2"].filter(isServedVersion)).toEqual(["1.0", "0.3"]);
  });
});

describe("a bot's card", () => {
  it("1.0: interfaces for both versions at the bot's endpoint, streaming, bearer auth, one chat skill", () => {
    expect(botCard(alice, site, "1.0")).toEqual({
      name: "Alice",
      description: "Researcher. Finds papers",
      skills: [expect.objectContaining({ id: "chat", name: "Chat with Alice", tags: ["chat"] })],
      version: "0.1.0",
      provider: { organization: "Hermes Mesh gateway gw-1", url: "http://127.0.0.1:7441" },
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      supportedInterfaces: [
        { url: "http://127.0.0.1:7441/a2a/alice/", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: "http://127.0.0.1:7441/a2a/alice/", protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ],
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer", description: expect.any(String) } } },
      securityRequirements: [{ schemes: { bearer: {} } }],
    });
  });

  it("0.3: url, protocolVersion, http security scheme", () => {
    expect(botCard(alice, site, "0.3")).toMatchObject({
      protocolVersion: "0.3",
      url: "http://127.0.0.1:7441/a2a/alice/",
      preferredTransport: "JSONRPC",
      securitySchemes: { bearer: { type: "http", scheme: "Bearer" } },
      security: [{ bearer: [] }],
      capabilities: { streaming: true },
    });
  });

  it("describes a bot without title or description by its name", () => {
    expect(botCard(bob, site, "1.0")["description"]).toBe("bob, a Hermes Mesh bot");
  });

  it("names endpoints with the trailing slash the SDK's resolver needs", () => {
    expect(botEndpoint("https://x.example/hermes", "a b")).toBe("https://x.example/hermes/a2a/a%20b/");
    expect(botCardUrl("https://x.example", "alice")).toBe("https://x.example/a2a/alice/.well-known/agent-card.json");
  });
});

describe("the gateway's index card", () => {
  it("is a card for the default bot's endpoint with one skill and one entry per listed bot", () => {
    const index = indexCard([alice, bob], site, "1.0", "default");
    expect(index).toMatchObject({
      name: "Hermes Mesh gateway gw-1",
      supportedInterfaces: [{ url: "http://127.0.0.1:7441/a2a/default/" }, { url: "http://127.0.0.1:7441/a2a/default/" }],
      skills: [
        { id: "bot-alice", name: "Alice" },
        { id: "bot-bob", name: "bob" },
      ],
      bots: [
        {
          profile: "alice",
          name: "Alice",
          url: "http://127.0.0.1:7441/a2a/alice/",
          card_url: "http://127.0.0.1:7441/a2a/alice/.well-known/agent-card.json",
        },
        { profile: "bob", name: "bob", description: "bob, a Hermes Mesh bot" },
      ],
    });
  });
});
