import { existsSync, readFileSync } from "node:fs";
import { assertApiKey, HermesError, parseGrpcUrl, peerKeyVariable } from "@hermes/common";
import { assertProfileName } from "@hermes/contract";
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
  url: string;
  note: string | null;
  key_variable: string;
  /** Whether the key is set (HERMES_HOME/.env or the environment). The key itself is never shown. */
  key_set: boolean;
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

function peerNames(doc: Document): string[] {
  const peers = doc.get("bot_peers", true);
  if (!isMap(peers)) return [];
  return peers.items.map((pair) => String(isScalar(pair.key) ? pair.key.value : pair.key));
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
  const existing = peerNames(doc);
  // `a-b` and `a_b` would share HERMES_PEER_A_B_KEY: one of them would silently use the other's key.
  const clash = existing.find((other) => other !== name && peerKeyVariable(other) === variable);
  if (clash) {
    throw new HermesError(
      "already_exists",
      `peer ${clash} already uses ${variable}; pick a name that differs in more than "-" versus "_"`,
      {
        data: { peer: clash, key_variable: variable },
      },
    );
  }
  const created = !existing.includes(name);
  if (!isMap(doc.get("bot_peers", true))) doc.set("bot_peers", doc.createNode({}));
  doc.setIn(["bot_peers", name], doc.createNode(note === undefined ? { url } : { url, note }));
  // Key first: a peer whose url is registered without a key would fail with missing_config.
  writeEnv(home, variable, key);
  home.writeFile(home.configFile, doc.toString());
  return { created, key_variable: variable };
}

/** Removes a peer's config entry and its key. Unknown names are not_found (exit 1). */
export function removePeer(home: HermesHome, rawName: string): { key_removed: boolean; key_variable: string } {
  const name = assertPeerName(rawName);
  const variable = peerKeyVariable(name);
  const doc = loadDocument(home);
  if (!peerNames(doc).includes(name)) {
    const known = peerNames(doc);
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

/** Registered peers, sorted by name, without their keys. */
export function listPeers(config: ModelConfigSource): PeerListing[] {
  const directory = peerDirectory(config);
  const entries = config.gatewayConfig().bot_peers ?? {};
  return Object.keys(entries)
    .sort()
    .map((name) => ({
      name,
      url: entries[name]!.url,
      note: entries[name]!.note ?? null,
      key_variable: peerKeyVariable(name),
      key_set: directory.key(name) !== undefined,
    }));
}
