import { existsSync, readFileSync } from "node:fs";
import { assertApiKey, HermesError, parseGrpcUrl, peerKeyVariable } from "@hermes/common";
import { assertProfileName, DEFAULT_PROFILE } from "@hermes/contract";
import { type Document, isMap, isScalar, parseDocument } from "yaml";
import type { ModelConfigSource } from "../../agents/app/model-config.js";
import type { HermesHome } from "../../home/store/home.js";
import { peerDirectory } from "./peer-directory.js";

/**
 * The peer registry on disk, edited by `hermes peer add/remove`: name, url and note in
 * HERMES_HOME/config.yaml under `bot_peers` (edited through the yaml Document API, so the rest of
 * the file and its comments stay as they were), the key in HERMES_HOME/.env as
 * `HERMES_PEER_<NAME>_KEY` (mode 0600, written atomically, other lines kept). A running gateway
 * sees the change on its next use (it re-reads both files when they change).
 */

export interface PeerSettings {
  name: string;
  url: string;
  key: string;
  note?: string | undefined;
}

export interface PeerListing {
  name: string;
  /** `gateway`: a Hermes gateway over gRPC (bot_peers); `a2a`: an A2A agent (a2a.peers). */
  kind: "gateway" | "a2a";
  url: string;
  note: string | null;
  key_variable: string;
  /** Whether the key is set (HERMES_HOME/.env or the environment). The key itself is never shown. */
  key_set: boolean;
}

/** An A2A agent as a peer: its URL (its card's, or the base its card is under) and where its key is. */
export interface A2aPeerSettings {
  name: string;
  url: string;
  /** The variable holding its bearer key (default HERMES_PEER_<NAME>_KEY); none needed when the agent is open. */
  key_env?: string | undefined;
  /** A key to write into that variable in HERMES_HOME/.env. */
  key?: string | undefined;
  note?: string | undefined;
}

const NOTE_MAX_CHARS = 500;

export function assertPeerName(name: string): string {
  return assertProfileName(name, "peer name");
}

/** The peer's API_SERVER_KEY, under the same rule as every API key (it goes on one .env line and into a Bearer header). */
export function assertPeerKey(key: string | undefined): string {
  if (key === undefined || key === "") {
    throw new HermesError("invalid_params", "a key is required: --key KEY (the peer's API_SERVER_KEY)");
  }
  return assertApiKey(key, "--key (the peer's API_SERVER_KEY)", "invalid_params");
}

export function assertPeerUrl(url: string | undefined): string {
  if (!url) throw new HermesError("invalid_params", "a URL is required: --url grpc://HOST:PORT (grpcs:// for TLS)");
  parseGrpcUrl(url);
  return url.trim();
}

function assertNote(note: string | undefined): string | undefined {
  if (note === undefined) return undefined;
  if (note.length > NOTE_MAX_CHARS || /[\r\n\0]/.test(note)) {
    throw new HermesError("invalid_params", `--note must be one line of at most ${NOTE_MAX_CHARS} characters`);
  }
  return note;
}

function loadDocument(home: HermesHome): Document {
  const file = home.configFile;
  const doc = parseDocument(existsSync(file) ? readFileSync(file, "utf8") : "", { intAsBigInt: true });
  if (doc.errors.length > 0) {
    throw new HermesError("invalid_config", `${file}: not valid YAML: ${doc.errors[0]!.message}; fix it before adding or removing peers`, {
      data: { file },
    });
  }
  if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) {
    doc.contents = doc.createNode({}) as unknown as typeof doc.contents;
  }
  if (!isMap(doc.contents)) throw new HermesError("invalid_config", `${file}: the top level must be a map of keys`, { data: { file } });
  const peers = doc.get("bot_peers", true);
  if (peers === undefined || (isScalar(peers) && peers.value === null)) return doc;
  if (!isMap(peers)) throw new HermesError("invalid_config", `${file}: bot_peers must be a map of peer names`, { data: { file } });
  return doc;
}

function keysOf(node: unknown): string[] {
  if (!isMap(node)) return [];
  return node.items.map((pair) => String(isScalar(pair.key) ? pair.key.value : pair.key));
}

function peerNames(doc: Document): string[] {
  return keysOf(doc.get("bot_peers", true));
}

function a2aPeerNames(doc: Document): string[] {
  return keysOf(doc.getIn(["a2a", "peers"], true));
}

/**
 * Refuses a name another peer of either kind holds, or whose key variable another's is: `a-b` and
 * `a_b` would share HERMES_PEER_A_B_KEY and one would silently use the other's key.
 */
function assertFreeName(doc: Document, name: string, kind: "gateway" | "a2a"): void {
  const other = kind === "gateway" ? a2aPeerNames(doc) : peerNames(doc);
  if (other.includes(name)) {
    throw new HermesError(
      "already_exists",
      `peer ${name} is already registered as ${kind === "gateway" ? "an A2A agent" : "a gateway"}; remove it first (hermes peer remove ${name})`,
      { data: { peer: name } },
    );
  }
  const variable = peerKeyVariable(name);
  const clash = [...peerNames(doc), ...a2aPeerNames(doc)].find((o) => o !== name && peerKeyVariable(o) === variable);
  if (clash) {
    throw new HermesError(
      "already_exists",
      `peer ${clash} already uses ${variable}; pick a name that differs in more than "-" versus "_"`,
      {
        data: { peer: clash, key_variable: variable },
      },
    );
  }
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** An A2A agent's URL: http(s), where its card is (the card's own URL, or the base it is under). */
export function assertA2aUrl(url: string | undefined): string {
  const value = url?.trim() ?? "";
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:") || parsed.username || parsed.password) {
    throw new HermesError(
      "invalid_params",
      `--a2a needs the agent's http(s) URL (where its card is, e.g. https://agent.example.com/ or …/.well-known/agent-card.json), got ${JSON.stringify(url ?? "")}`,
    );
  }
  return value;
}

/** .env text with `name` set to `value` (first assignment replaced, repeats dropped) or removed (value undefined). */
export function editEnvText(text: string, name: string, value: string | undefined): { text: string; changed: boolean } {
  const assignment = new RegExp(`^\\s*(?:export\\s+)?${name}\\s*=`);
  const lines = text === "" ? [] : text.replace(/\r?\n$/, "").split(/\r?\n/);
  const out: string[] = [];
  let placed = false;
  let changed = false;
  for (const line of lines) {
    if (!assignment.test(line)) {
      out.push(line);
      continue;
    }
    changed = true;
    if (value !== undefined && !placed) {
      out.push(`${name}=${value}`);
      placed = true;
    }
  }
  if (value !== undefined && !placed) {
    out.push(`${name}=${value}`);
    changed = true;
  }
  return { text: out.length === 0 ? "" : `${out.join("\n")}\n`, changed };
}

function writeEnv(home: HermesHome, name: string, value: string | undefined): boolean {
  const file = home.envFile;
  const before = existsSync(file) ? readFileSync(file, "utf8") : "";
  const { text, changed } = editEnvText(before, name, value);
  if (changed || (value !== undefined && !existsSync(file))) home.writeFile(file, text, 0o600);
  return changed;
}

/** Registers (or updates) a peer. Returns whether it was new. */
export function addPeer(home: HermesHome, settings: PeerSettings): { created: boolean; key_variable: string } {
  const name = assertPeerName(settings.name);
  const url = assertPeerUrl(settings.url);
  const key = assertPeerKey(settings.key);
  const note = assertNote(settings.note);
  const variable = peerKeyVariable(name);
  home.ensureRoot();
  const doc = loadDocument(home);
  assertFreeName(doc, name, "gateway");
  const created = !peerNames(doc).includes(name);
  if (!isMap(doc.get("bot_peers", true))) doc.set("bot_peers", doc.createNode({}));
  doc.setIn(["bot_peers", name], doc.createNode(note === undefined ? { url } : { url, note }));
  // Key first: a peer whose url is registered without a key would fail with missing_config.
  writeEnv(home, variable, key);
  home.writeFile(home.configFile, doc.toString());
  return { created, key_variable: variable };
}

/**
 * Registers (or updates) an A2A agent as a peer under `a2a.peers` in config.yaml; with `key`, the
 * key goes into HERMES_HOME/.env as `key_env` (default HERMES_PEER_<NAME>_KEY). Returns whether it was new.
 */
export function addA2aPeer(home: HermesHome, settings: A2aPeerSettings): { created: boolean; key_variable: string } {
  const name = assertPeerName(settings.name);
  const url = assertA2aUrl(settings.url);
  const note = assertNote(settings.note);
  if (settings.key_env !== undefined && !ENV_NAME.test(settings.key_env)) {
    throw new HermesError(
      "invalid_params",
      `--key-env must name an environment variable (letters, digits, _), got ${JSON.stringify(settings.key_env)}`,
    );
  }
  const key = settings.key === undefined ? undefined : assertApiKey(settings.key, "--key (the agent's key)", "invalid_params");
  const variable = settings.key_env ?? peerKeyVariable(name);
  home.ensureRoot();
  const doc = loadDocument(home);
  assertFreeName(doc, name, "a2a");
  const created = !a2aPeerNames(doc).includes(name);
  const a2a = doc.get("a2a", true);
  if (a2a !== undefined && !(isScalar(a2a) && a2a.value === null) && !isMap(a2a)) {
    throw new HermesError("invalid_config", `${home.configFile}: a2a must be a map of keys`, { data: { file: home.configFile } });
  }
  if (!isMap(a2a)) doc.set("a2a", doc.createNode({}));
  if (!isMap(doc.getIn(["a2a", "peers"], true))) doc.setIn(["a2a", "peers"], doc.createNode({}));
  const entry = { url, ...(settings.key_env !== undefined ? { key_env: settings.key_env } : {}), ...(note !== undefined ? { note } : {}) };
  doc.setIn(["a2a", "peers", name], doc.createNode(entry));
  if (key !== undefined) writeEnv(home, variable, key);
  home.writeFile(home.configFile, doc.toString());
  return { created, key_variable: variable };
}

/** Removes a peer's config entry (a gateway or an A2A agent) and its HERMES_PEER_<NAME>_KEY. Unknown names are not_found (exit 1). */
export function removePeer(home: HermesHome, rawName: string): { key_removed: boolean; key_variable: string } {
  const name = assertPeerName(rawName);
  const variable = peerKeyVariable(name);
  const doc = loadDocument(home);
  if (a2aPeerNames(doc).includes(name)) {
    doc.deleteIn(["a2a", "peers", name]);
    if (a2aPeerNames(doc).length === 0) doc.deleteIn(["a2a", "peers"]);
    const a2a = doc.get("a2a", true);
    if (isMap(a2a) && a2a.items.length === 0) doc.delete("a2a");
    home.writeFile(home.configFile, doc.toString());
    return { key_removed: writeEnv(home, variable, undefined), key_variable: variable };
  }
  if (!peerNames(doc).includes(name)) {
    const known = [...peerNames(doc), ...a2aPeerNames(doc)].sort();
    throw new HermesError(
      "not_found",
      `no peer called ${name}${known.length ? ` (peers: ${known.join(", ")})` : ""}; list them with: hermes peer list`,
      {
        data: { peer: name, peers: known },
      },
    );
  }
  doc.deleteIn(["bot_peers", name]);
  const peers = doc.get("bot_peers", true);
  if (isMap(peers) && peers.items.length === 0) doc.delete("bot_peers");
  home.writeFile(home.configFile, doc.toString());
  const keyRemoved = writeEnv(home, variable, undefined);
  return { key_removed: keyRemoved, key_variable: variable };
}

/** Registered peers (gateways and A2A agents), sorted by name, without their keys. */
export function listPeers(config: ModelConfigSource): PeerListing[] {
  const directory = peerDirectory(config);
  const file = config.gatewayConfig();
  const gateways = file.bot_peers ?? {};
  const agents = file.a2a?.peers ?? {};
  const secrets = config.forProfile(DEFAULT_PROFILE);
  return [
    ...Object.entries(gateways).map(([name, p]) => ({
      name,
      kind: "gateway" as const,
      url: p.url,
      note: p.note ?? null,
      key_variable: peerKeyVariable(name),
      key_set: directory.key(name) !== undefined,
    })),
    ...Object.entries(agents).map(([name, p]) => {
      const variable = p.key_env ?? peerKeyVariable(name);
      return {
        name,
        kind: "a2a" as const,
        url: p.url,
        note: p.note ?? null,
        key_variable: variable,
        key_set: secrets.secret(variable) !== undefined,
      };
    }),
  ].sort((a, b) => (a.name < b.name ? -1 : 1));
}
