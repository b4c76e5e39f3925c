/**
 * Agent Cards: how an A2A client discovers a bot (its name, what it does, where to send
 * JSON-RPC, that it streams, and that it wants a bearer key), in the two shapes the SDK reads:
 * 1.0 (`supportedInterfaces`, `securityRequirements`) for callers that send `A2A-Version: 1.0`, and
 * 0.3 (`url`, `protocolVersion`, `security`) for the ones that send no version (older clients).
 */

/** The protocol versions served, newest first; a caller that names none speaks 0.3. */
export const A2A_VERSIONS = ["1.0", "0.3"] as const;
export type A2aVersion = (typeof A2A_VERSIONS)[number];

/** Where a bot's card is, under its endpoint. */
export const AGENT_CARD_PATH = ".well-known/agent-card.json";

/**
 * The version a request asks for, from its `A2A-Version` header: none is 0.3 (as the protocol
 * says), `1`, `1.0` and `1.0.0` are 1.0, `0.3.x` is 0.3; anything else is returned as sent (and
 * refused by the caller of this, naming the versions served).
 */
export function requestedVersion(header: string | undefined): string {
  const value = (header ?? "").trim();
  if (value === "") return "0.3";
  const match = /^(\d+)(?:\.(\d+))?(?:\.\d+)?$/.exec(value);
  if (!match) return value;
  const version = `${match[1]}.${match[2] ?? "0"}`;
  return version;
}

export function isServedVersion(version: string): version is A2aVersion {
  return (A2A_VERSIONS as readonly string[]).includes(version);
}

/** What a card says about a bot. */
export interface CardBot {
  profile: string;
  display_name: string;
  title: string;
  description: string;
}

export interface CardSite {
  /** `http(s)://host[:port]` the caller reached this gateway at (or the configured public URL), no trailing slash. */
  base_url: string;
  /** This gateway's version (the cards' `version`). */
  version: string;
  gateway_id: string;
}

/** A bot's JSON-RPC endpoint (the card's url): with the trailing slash the SDK's resolver expects. */
export function botEndpoint(base: string, profile: string): string {
  return `${base}/a2a/${encodeURIComponent(profile)}/`;
}

export function botCardUrl(base: string, profile: string): string {
  return `${botEndpoint(base, profile)}${AGENT_CARD_PATH}`;
}

type Json = Record<string, unknown>;

const KEY_TEXT = "the gateway's API key, or the key this gateway gave you (a2a.callers)";

function describe(bot: CardBot): string {
  const about = [bot.title, bot.description].filter((s) => s.trim().length > 0).join(". ");
  return about || `${bot.display_name}, a Hermes Mesh bot`;
}

function skills(bot: CardBot): Json[] {
  return [
    {
      id: "chat",
      name: `Chat with ${bot.display_name}`,
      description: `A message is one turn in ${bot.display_name}'s Bot Chat; the reply is the task's artifact.`,
      tags: ["chat"],
    },
  ];
}

/** A card in the shape a version reads: what it is (`about`), where its endpoint is, how it authenticates. */
function shaped(about: { name: string; description: string; skills: Json[] }, endpoint: string, site: CardSite, version: A2aVersion): Json {
  const card = {
    ...about,
    version: site.version,
    provider: { organization: `Hermes Mesh gateway ${site.gateway_id}`, url: site.base_url },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
  };
  if (version === "1.0") {
    return {
      ...card,
      supportedInterfaces: A2A_VERSIONS.map((v) => ({ url: endpoint, protocolBinding: "JSONRPC", protocolVersion: v })),
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer", description: KEY_TEXT } } },
      securityRequirements: [{ schemes: { bearer: {} } }],
    };
  }
  return {
    ...card,
    protocolVersion: "0.3",
    url: endpoint,
    preferredTransport: "JSONRPC",
    capabilities: { streaming: true, pushNotifications: false },
    securitySchemes: { bearer: { type: "http", scheme: "Bearer", description: KEY_TEXT } },
    security: [{ bearer: [] }],
    supportsAuthenticatedExtendedCard: false,
    // As the SDK's own 0.3 card: the 1.0 interfaces too, for clients that read both.
    supportedInterfaces: A2A_VERSIONS.map((v) => ({ url: endpoint, protocolBinding: "JSONRPC", protocolVersion: v })),
  };
}

/** A bot's Agent Card: its display name, title and description, one chat skill, its endpoint, bearer auth. */
export function botCard(bot: CardBot, site: CardSite, version: A2aVersion): Json {
  return shaped(
    { name: bot.display_name, description: describe(bot), skills: skills(bot) },
    botEndpoint(site.base_url, bot.profile),
    site,
    version,
  );
}

/**
 * The gateway's own card (`/.well-known/agent-card.json`): a card whose endpoint is the default
 * bot's, with one skill per visible bot, and (`bots`, which A2A clients ignore) where each bot's
 * card is.
 */
export function indexCard(bots: readonly CardBot[], site: CardSite, version: A2aVersion, defaultProfile: string): Json {
  const about = {
    name: `Hermes Mesh gateway ${site.gateway_id}`,
    description: `The bots of Hermes Mesh gateway ${site.gateway_id}; each has its own Agent Card (bots[].card_url).`,
    skills: bots.map((b) => ({
      id: `bot-${b.profile}`,
      name: b.display_name,
      description: `${describe(b)} (card: ${botCardUrl(site.base_url, b.profile)})`,
      tags: ["bot"],
    })),
  };
  return {
    ...shaped(about, botEndpoint(site.base_url, defaultProfile), site, version),
    bots: bots.map((b) => ({
      profile: b.profile,
      name: b.display_name,
      description: describe(b),
      url: botEndpoint(site.base_url, b.profile),
      card_url: botCardUrl(site.base_url, b.profile),
    })),
  };
}
