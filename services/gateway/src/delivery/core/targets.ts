import { HermesError } from "@hermes/common/pure";
import { DEFAULT_PROFILE, isValidName } from "@hermes/contract";

/**
 * Message targets:
 *   `<profile>`               a bot on this gateway (its name or a former name), or a unique bare handle elsewhere
 *   `<handle>@<connection>`   a bot on another gateway reached through the relay
 *   `<peer>/<profile>`        a bot on a directly registered peer (`<peer>` alone: its default profile)
 *   `<peer>`                  an A2A agent registered as a peer (one agent: no profile part)
 */
export const TARGET_FORMS = ["<profile>", "<handle>@<connection>", "<peer>/<profile>"] as const;

export type ParsedTarget =
  | { form: "name"; name: string }
  | { form: "relay"; handle: string; connection: string }
  | { form: "peer"; peer: string; profile: string };

export interface LocalBot {
  profile: string;
  /** Former names (after renames); they keep resolving. */
  aliases?: readonly string[];
  title?: string;
}

/** A bot on another gateway, as the relay roster describes it. */
export interface RemoteBot {
  handle: string;
  connection: string;
  display_name?: string;
  title?: string;
  description?: string;
  /** False while its gateway is disconnected from the relay (mail to it waits there, up to its TTL). */
  online?: boolean;
}

export interface PeerEntry {
  name: string;
  /** Profiles known to live on the peer; when absent any well-formed profile name is accepted. */
  profiles?: readonly string[];
  /** An A2A agent (`a2a.peers`): one agent, reached by its name alone, over A2A. */
  a2a?: boolean;
}

export interface Roster {
  local: readonly LocalBot[];
  remote: readonly RemoteBot[];
  peers: readonly PeerEntry[];
  /** This gateway's own connection name, so `bob@<self>` means the local bob. */
  local_connection?: string;
}

export type Route =
  | { kind: "local"; profile: string; target: string }
  | { kind: "relay"; connection: string; handle: string; target: string }
  | { kind: "peer"; peer: string; profile: string; target: string; a2a?: true };

function norm(text: string): string {
  return text.trim().replace(/^@+/, "").toLowerCase();
}

function formsText(): string {
  return TARGET_FORMS.join(", ");
}

/** Every target that currently reaches someone, qualified where a bare name would not be unique. */
export function listTeammates(roster: Roster, self?: string): string[] {
  const out: string[] = [];
  for (const bot of roster.local) if (bot.profile !== self) out.push(bot.profile);
  for (const bot of roster.remote) out.push(`${bot.handle}@${bot.connection}`);
  for (const peer of roster.peers) {
    if (peer.a2a) out.push(peer.name);
    else if (peer.profiles && peer.profiles.length > 0) for (const p of peer.profiles) out.push(`${peer.name}/${p}`);
    else out.push(`${peer.name}/<profile>`);
  }
  return out;
}

function unknownTarget(raw: string, roster: Roster, self: string | undefined, why: string): HermesError {
  const teammates = listTeammates(roster, self);
  const list = teammates.length > 0 ? teammates.join(", ") : "none (no teammates are known yet)";
  return new HermesError("unknown_target", `${why}. Valid targets: ${list}. Target forms: ${formsText()}.`, {
    data: { target: raw, teammates, forms: [...TARGET_FORMS] },
  });
}

/** Splits a target into its form; syntax errors name the accepted forms. */
export function parseTarget(raw: string): ParsedTarget | { form: "invalid"; why: string } {
  const text = norm(raw);
  if (text.length === 0) return { form: "invalid", why: "the target is empty" };
  const at = text.split("@");
  const slash = text.split("/");
  if (at.length === 2 && slash.length === 1) {
    const [handle, connection] = at as [string, string];
    if (isValidName(handle) && isValidName(connection)) return { form: "relay", handle, connection };
  } else if (slash.length === 2 && at.length === 1) {
    const [peer, profile] = slash as [string, string];
    if (isValidName(peer) && isValidName(profile)) return { form: "peer", peer, profile };
  } else if (at.length === 1 && slash.length === 1 && isValidName(text)) {
    return { form: "name", name: text };
  }
  return { form: "invalid", why: `${JSON.stringify(raw)} is not a valid target` };
}

/** The route to an A2A agent registered as a peer: its name is the whole target. */
function a2aRoute(peer: string): Route {
  return { kind: "peer", peer, profile: "", target: peer, a2a: true };
}

interface Candidate {
  route: Route;
  /** Exact local profile names beat everything else; every other kind of match is equal. */
  exactLocal: boolean;
}

function localCandidates(roster: Roster, name: string): Candidate[] {
  const out: Candidate[] = [];
  for (const bot of roster.local) {
    const route: Route = { kind: "local", profile: bot.profile, target: bot.profile };
    if (bot.profile === name) out.push({ route, exactLocal: true });
    else if ((bot.aliases ?? []).some((a) => norm(a) === name) || (bot.profile === DEFAULT_PROFILE && name === "hermes")) {
      out.push({ route, exactLocal: false });
    }
  }
  return out;
}

function pickOne(raw: string, candidates: Candidate[], roster: Roster, self: string | undefined): Route {
  const exact = candidates.filter((c) => c.exactLocal);
  const pool = exact.length > 0 ? exact : candidates;
  const distinct = [...new Map(pool.map((c) => [c.route.target, c.route])).values()];
  if (distinct.length === 1) return distinct[0]!;
  if (distinct.length === 0) throw unknownTarget(raw, roster, self, `no teammate is called ${JSON.stringify(norm(raw))}`);
  const options = distinct.map((r) => r.target);
  throw new HermesError(
    "ambiguous_target",
    `${JSON.stringify(norm(raw))} matches several teammates: ${options.join(", ")}. Name one of them exactly; target forms: ${formsText()}.`,
    { data: { target: raw, candidates: options, forms: [...TARGET_FORMS] } },
  );
}

/**
 * Resolves a target against the roster to a route, or a typed error: `unknown_target` (with
 * `data.teammates`, the valid targets) or `ambiguous_target` (with the candidates and the forms).
 *
 * A bare name means, first, a local profile of exactly that name. Otherwise every other match
 * counts the same (a local former name, a remote handle on any connection, a peer's name) and
 * more than one is ambiguous: guessing would deliver mail to the wrong bot.
 */
export function resolveTarget(raw: string, roster: Roster, options: { self?: string } = {}): Route {
  const { self } = options;
  const parsed = parseTarget(raw);
  let route: Route;
  switch (parsed.form) {
    case "invalid":
      throw unknownTarget(raw, roster, self, parsed.why);
    case "name": {
      const name = parsed.name;
      const candidates = localCandidates(roster, name);
      for (const bot of roster.remote) {
        if (norm(bot.handle) === name) {
          const target = `${bot.handle}@${bot.connection}`;
          candidates.push({ route: { kind: "relay", connection: bot.connection, handle: bot.handle, target }, exactLocal: false });
        }
      }
      for (const peer of roster.peers) {
        if (peer.a2a) {
          if (norm(peer.name) === name) candidates.push({ route: a2aRoute(peer.name), exactLocal: false });
          continue;
        }
        // A bare peer name means its default profile, when the peer has one.
        const hasDefault = !peer.profiles || peer.profiles.length === 0 || peer.profiles.some((p) => norm(p) === DEFAULT_PROFILE);
        if (norm(peer.name) === name && hasDefault) {
          candidates.push({
            route: { kind: "peer", peer: peer.name, profile: DEFAULT_PROFILE, target: `${peer.name}/${DEFAULT_PROFILE}` },
            exactLocal: false,
          });
        }
      }
      route = pickOne(raw, candidates, roster, self);
      break;
    }
    case "relay": {
      const { handle, connection } = parsed;
      if (roster.local_connection !== undefined && norm(roster.local_connection) === connection) {
        route = pickOne(raw, localCandidates(roster, handle), roster, self);
        break;
      }
      if (!roster.remote.some((b) => norm(b.connection) === connection)) {
        throw unknownTarget(raw, roster, self, `no connection called ${JSON.stringify(connection)} is known`);
      }
      const bot = roster.remote.find((b) => norm(b.connection) === connection && norm(b.handle) === handle);
      if (!bot)
        throw unknownTarget(raw, roster, self, `connection ${JSON.stringify(connection)} has no bot called ${JSON.stringify(handle)}`);
      route = { kind: "relay", connection: bot.connection, handle: bot.handle, target: `${bot.handle}@${bot.connection}` };
      break;
    }
    case "peer": {
      const peer = roster.peers.find((p) => norm(p.name) === parsed.peer);
      if (!peer) throw unknownTarget(raw, roster, self, `no peer called ${JSON.stringify(parsed.peer)} is registered`);
      if (peer.a2a)
        throw unknownTarget(raw, roster, self, `peer ${JSON.stringify(peer.name)} is one A2A agent: message it as ${peer.name}`);
      if (peer.profiles && peer.profiles.length > 0 && !peer.profiles.some((p) => norm(p) === parsed.profile)) {
        throw unknownTarget(raw, roster, self, `peer ${JSON.stringify(peer.name)} has no profile called ${JSON.stringify(parsed.profile)}`);
      }
      route = { kind: "peer", peer: peer.name, profile: parsed.profile, target: `${peer.name}/${parsed.profile}` };
      break;
    }
  }
  if (route.kind === "local" && self !== undefined && route.profile === self) {
    throw new HermesError("invalid_params", `${JSON.stringify(norm(raw))} is you: a bot cannot message itself. Pick a teammate.`, {
      data: { target: raw, teammates: listTeammates(roster, self) },
    });
  }
  return route;
}
