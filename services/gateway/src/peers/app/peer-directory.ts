import { type PeerLookup, peerKeyVariable } from "@hermes/common";
import { DEFAULT_PROFILE } from "@hermes/contract";
import type { ModelConfigSource } from "../../agents/app/model-config.js";

/** Where peers are and their keys: `bot_peers.<name>.url` in config.yaml, `HERMES_PEER_<NAME>_KEY` in HERMES_HOME/.env. */
export type PeerDirectory = PeerLookup;

/**
 * The one peer lookup (deliveries to `<peer>/<profile>`, room sources, member turns, `hermes peer`):
 * `bot_peers.<name>.url` from HERMES_HOME/config.yaml, the key `HERMES_PEER_<NAME>_KEY` from
 * HERMES_HOME/.env, then the process environment. Both files are re-read when they change, so a
 * `hermes peer add` shows up without a restart.
 */
export function peerDirectory(config: ModelConfigSource): PeerDirectory {
  return {
    url: (peer) => config.gatewayConfig().bot_peers?.[peer]?.url,
    key: (peer) => config.forProfile(DEFAULT_PROFILE).secret(peerKeyVariable(peer)),
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
