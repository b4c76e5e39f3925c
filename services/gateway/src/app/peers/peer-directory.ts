import { DEFAULT_PROFILE } from "@hermes/common";
import type { ModelConfigSource } from "../model-config.js";

/** Where peers are and their keys: `bot_peers.<name>.url` in config.yaml, `HERMES_PEER_<NAME>_KEY` in HERMES_HOME/.env. */
export interface PeerDirectory {
  url(peer: string): string | undefined;
  key(peer: string): string | undefined;
}

/** The .env variable holding a peer's key: `HERMES_PEER_<NAME>_KEY` (upper case, `-` → `_`). */
export function peerKeyName(peer: string): string {
  return `HERMES_PEER_${peer.toUpperCase().replace(/-/g, "_")}_KEY`;
}

/**
 * The one peer lookup (deliveries to `<peer>/<profile>`, room sources, member turns, `hermes peer`):
 * `bot_peers.<name>.url` from HERMES_HOME/config.yaml, the key `HERMES_PEER_<NAME>_KEY` from
 * HERMES_HOME/.env, then the process environment. Both files are re-read when they change, so a
 * `hermes peer add` shows up without a restart.
 */
export function peerDirectory(config: ModelConfigSource): PeerDirectory {
  return {
    url: (peer) => config.gatewayConfig().bot_peers?.[peer]?.url,
    key: (peer) => config.forProfile(DEFAULT_PROFILE).secret(peerKeyName(peer)),
  };
}

/** Names and URLs of the registered peers, for `gateway status`; an unreadable config lists none. */
export function peerLinks(config: ModelConfigSource): { name: string; url: string }[] {
  try {
    const peers = config.gatewayConfig().bot_peers ?? {};
    return Object.keys(peers)
      .sort()
      .map((name) => ({ name, url: peers[name]!.url }));
  } catch {
    return [];
  }
}
