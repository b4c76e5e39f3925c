import type { Clock, Db } from "@hermes/common";
import type { ModelConfigSource } from "../../agents/app/model-config.js";
import { type RosterEntry, relayTeammate } from "../../agents/core/system-prompt.js";
import type { Events } from "../../home/app/events.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import { allAliases } from "../../identity/store/profiles-store.js";
import type { RemoteBot, Roster } from "../core/targets.js";

/** Bots on other gateways known through the relay, and when that list changes. */
export interface RemoteRosterSource {
  bots(): readonly RemoteBot[];
  readonly changes: Events<{ changed: [] }>;
}

export interface DeliveryRosterDeps {
  db: Db;
  profiles: ProfileService;
  config: ModelConfigSource;
  clock: Clock;
  /** The relay's roster, when this gateway has a relay. */
  remote?: RemoteRosterSource | undefined;
  /** This gateway's relay connection name, so `bob@<it>` means the local bob. */
  relayConnection?: string | undefined;
}

const ROSTER_TTL_MS = 10_000;

interface RosterCache {
  at: number;
  roster: Roster;
  everyone: RosterEntry[];
  teammates: Map<string, RosterEntry[]>;
  /** Display names, for attribution. */
  names: Map<string, string>;
}

/**
 * Who can be messaged: local profiles (with former names and personas), peers, A2A agents, relay bots.
 * Target resolution, attribution and the teammate roster of Bot Chat system prompts read it.
 * Cached; a profile change or a relay roster update invalidates it at once, and it is rebuilt every
 * ROSTER_TTL_MS anyway to pick up hand edits of titles, descriptions and bot_peers.
 */
export class DeliveryRoster {
  private cache: RosterCache | undefined;

  constructor(private readonly deps: DeliveryRosterDeps) {
    deps.profiles.events.on("changed", () => this.invalidate());
    deps.remote?.changes.on("changed", () => this.invalidate());
  }

  /** Rebuilt on next use. */
  invalidate(): void {
    this.cache = undefined;
  }

  /** The roster targets are resolved against. */
  targets(): Roster {
    return this.current().roster;
  }

  /** The teammate roster in a bot's canonical Bot Chat system prompt. */
  teammates(profile: string): RosterEntry[] {
    const cache = this.current();
    let list = cache.teammates.get(profile);
    if (!list) {
      list = cache.everyone.filter((e) => e.target !== profile);
      cache.teammates.set(profile, list);
    }
    return list;
  }

  /** A bot's display name for attribution (a rename of the label shows within seconds). */
  displayName(profile: string): string {
    return this.current().names.get(profile) ?? profile;
  }

  private current(): RosterCache {
    const now = this.deps.clock.now();
    if (this.cache && now - this.cache.at < ROSTER_TTL_MS) return this.cache;
    const names = this.deps.profiles.names();
    const aliases = allAliases(this.deps.db);
    const config = this.deps.config;
    const personas = new Map(
      names.map((n) => {
        try {
          return [n, config.forProfile(n).persona] as const;
        } catch {
          // A profile whose config does not validate still receives mail (its turns will say why).
          return [n, { display_name: n, handle: n, title: "", description: "", soul: "" }] as const;
        }
      }),
    );
    const file = config.gatewayConfig();
    const peers = Object.keys(file.bot_peers ?? {}).sort();
    const agents = Object.entries(file.a2a?.peers ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
    const remote = this.deps.remote?.bots() ?? [];
    const roster: Roster = {
      local: names.map((n) => ({ profile: n, aliases: aliases.get(n) ?? [], title: personas.get(n)?.title ?? "" })),
      remote,
      peers: [...peers.map((name) => ({ name })), ...agents.map(([name]) => ({ name, a2a: true }))],
      ...(this.deps.relayConnection ? { local_connection: this.deps.relayConnection } : {}),
    };
    // Everyone's teammates but the bot itself, built once per rebuild and shared (the per-bot list
    // is this one without the bot, made on first use).
    const everyone: RosterEntry[] = [
      ...names.map((n) => ({ target: n, title: personas.get(n)!.title, description: personas.get(n)!.description })),
      ...remote.map(relayTeammate),
      ...peers.map((peer) => ({ target: `${peer}/<profile>`, where: `peer gateway ${peer}; ${peer} alone means its default bot` })),
      ...agents.map(([name, agent]) => ({ target: name, where: `an A2A agent at ${agent.url}`, description: agent.note })),
    ];
    const displayNames = new Map(names.map((n) => [n, personas.get(n)!.display_name]));
    this.cache = { at: now, roster, everyone, teammates: new Map(), names: displayNames };
    return this.cache;
  }
}
