import type { ModelConfigSource } from "../../agents/app/model-config.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import { botCardUrl, botEndpoint } from "../core/card.js";
import type { TaskSummary } from "../store/tasks-store.js";
import type { A2aPeerDirectory } from "./a2a-peer-client.js";
import type { A2aTasks } from "./a2a-tasks.js";

/** What `hermes status` and the console show of A2A: the cards served, the latest tasks, the agents called. */
export interface A2aStatus {
  enabled: boolean;
  /** The gateway's index card. */
  index_card_url: string | null;
  cards: { profile: string; name: string; url: string; card_url: string }[];
  /** Tasks in flight now. */
  active: number;
  tasks: TaskSummary[];
  /** A2A agents registered as peers. */
  peers: { name: string; url: string; key_variable: string; key_set: boolean }[];
}

export interface A2aStatusDeps {
  enabled: boolean;
  tasks: A2aTasks;
  profiles: ProfileService;
  config: ModelConfigSource;
  peers: A2aPeerDirectory;
  /** The base URL the cards name (a2a.public_url, else this gateway's HTTP address). */
  baseUrl(): string;
}

export function a2aStatus(deps: A2aStatusDeps, limit: number): A2aStatus {
  const base = deps.baseUrl();
  const cards = deps.enabled
    ? deps.profiles.names().map((profile) => {
        let name = profile;
        try {
          name = deps.config.forProfile(profile).persona.display_name;
        } catch {
          // A profile whose config does not validate keeps its name.
        }
        return { profile, name, url: botEndpoint(base, profile), card_url: botCardUrl(base, profile) };
      })
    : [];
  let peers: A2aStatus["peers"] = [];
  try {
    peers = deps.peers.names().map((name) => {
      const peer = deps.peers.get(name)!;
      return { name, url: peer.url, key_variable: peer.key_variable, key_set: peer.key !== undefined };
    });
  } catch {
    // An invalid config.yaml lists no agents (the gateway says why elsewhere).
  }
  return {
    enabled: deps.enabled,
    index_card_url: deps.enabled ? `${base}/.well-known/agent-card.json` : null,
    cards,
    active: deps.tasks.activeCount,
    tasks: deps.tasks.recent(limit),
    peers,
  };
}
