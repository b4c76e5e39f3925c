import { HermesError } from "@hermes/common/pure";
import { originOf, profileKeyPrefix, type RoutingOrigin, type StoredOrigin, splitProfileKey, withoutProfile } from "./routing-key.js";

export interface RoutingEntry {
  routing_key: string;
  session_key: string;
  session_id: string;
  origin: RoutingOrigin;
  updated_at: string;
}

export interface RoutingChanges {
  upserts: RoutingEntry[];
  deletes: string[];
}

/** An entry as the index (and the store) keeps it: without its profile's name, which is the name of its group. */
export interface StoredEntry {
  session_id: string;
  origin: StoredOrigin;
  updated_at: string;
}

/** One profile's entries by chat key (the routing key after `agent:<name>:`), and what changed since the last persist. */
interface ProfileRoutes {
  entries: Map<string, StoredEntry>;
  dirty: Set<string>;
  removed: Set<string>;
}

const emptyRoutes = (): ProfileRoutes => ({ entries: new Map(), dirty: new Set(), removed: new Set() });

/** The index holds only keys of the form `agent:<profile>:<chat key>` whose entry is that key's session. */
export function splitRoutingEntry(entry: RoutingEntry): { profile: string; chatKey: string; stored: StoredEntry } {
  const key = splitProfileKey(entry.routing_key);
  if (key?.profile !== entry.origin.profile || entry.session_key !== entry.routing_key) {
    throw new HermesError("invalid_params", `routing entry ${entry.routing_key} is not keyed by its session and profile`, {
      data: { routing_key: entry.routing_key, session_key: entry.session_key, profile: entry.origin.profile },
    });
  }
  return { ...key, stored: { session_id: entry.session_id, origin: withoutProfile(entry.origin), updated_at: entry.updated_at } };
}

function toEntry(profile: string, chatKey: string, stored: StoredEntry): RoutingEntry {
  const key = profileKeyPrefix(profile) + chatKey;
  return {
    routing_key: key,
    session_key: key,
    session_id: stored.session_id,
    origin: originOf(profile, stored.origin),
    updated_at: stored.updated_at,
  };
}

/**
 * The gateway's in-memory routing index: routing key → session, grouped by profile the way the
 * store keeps them (profile id, chat key), and recording what changed since the last persist so
 * the store writes only that. A rename hands a profile's group to the new name in one step, like
 * the store renames the id: nothing is copied, and every key it answers with carries the new name.
 */
export class RoutingIndex {
  private readonly profiles = new Map<string, ProfileRoutes>();

  static from(entries: Iterable<RoutingEntry>): RoutingIndex {
    const index = new RoutingIndex();
    for (const e of entries) {
      const { profile, chatKey, stored } = splitRoutingEntry(e);
      index.routesOf(profile).entries.set(chatKey, stored);
    }
    return index;
  }

  private routesOf(profile: string): ProfileRoutes {
    let routes = this.profiles.get(profile);
    if (!routes) {
      routes = emptyRoutes();
      this.profiles.set(profile, routes);
    }
    return routes;
  }

  get size(): number {
    let n = 0;
    for (const routes of this.profiles.values()) n += routes.entries.size;
    return n;
  }

  get(key: string): RoutingEntry | undefined {
    const split = splitProfileKey(key);
    const stored = split && this.profiles.get(split.profile)?.entries.get(split.chatKey);
    return stored && split && toEntry(split.profile, split.chatKey, stored);
  }

  upsert(entry: RoutingEntry): void {
    const { profile, chatKey, stored } = splitRoutingEntry(entry);
    const routes = this.routesOf(profile);
    routes.entries.set(chatKey, stored);
    routes.dirty.add(chatKey);
    routes.removed.delete(chatKey);
  }

  delete(key: string): void {
    const split = splitProfileKey(key);
    const routes = split && this.profiles.get(split.profile);
    if (split && routes?.entries.delete(split.chatKey)) {
      routes.dirty.delete(split.chatKey);
      routes.removed.add(split.chatKey);
    }
  }

  keysOf(profile: string): string[] {
    const prefix = profileKeyPrefix(profile);
    return [...(this.profiles.get(profile)?.entries.keys() ?? [])].map((chatKey) => prefix + chatKey);
  }

  /** Keys that a rekey old → new would overwrite. */
  collisions(oldName: string, newName: string): string[] {
    const from = this.profiles.get(oldName)?.entries;
    const to = this.profiles.get(newName)?.entries;
    if (!from || !to || to.size === 0) return [];
    const prefix = profileKeyPrefix(newName);
    return [...from.keys()].filter((chatKey) => to.has(chatKey)).map((chatKey) => prefix + chatKey);
  }

  /**
   * Moves every entry of `old` to `new` after the store did the same (the rows are not written
   * again; changes not persisted yet stay pending, under the new name). Refuses with
   * identity_collision before mutating anything if a target key exists. Returns the count moved.
   * When `new` has no entries of its own this is one step, whatever the count.
   */
  rekeyProfile(oldName: string, newName: string): number {
    if (oldName === newName) return 0;
    const clash = this.collisions(oldName, newName);
    if (clash.length > 0) {
      throw new HermesError("identity_collision", `profile routing collision in the live routing index: ${clash[0]} already exists`, {
        data: { table: "gateway_routing (in memory)", key: clash[0] },
      });
    }
    const from = this.profiles.get(oldName);
    if (!from) return 0;
    this.profiles.delete(oldName);
    const to = this.profiles.get(newName);
    if (!to || (to.entries.size === 0 && to.dirty.size === 0 && to.removed.size === 0)) {
      this.profiles.set(newName, from);
      return from.entries.size;
    }
    for (const [chatKey, stored] of from.entries) {
      to.entries.set(chatKey, stored);
      to.removed.delete(chatKey);
      if (from.dirty.has(chatKey)) to.dirty.add(chatKey);
    }
    // Deletes not persisted yet: the store moved those rows onto `new` as well.
    for (const chatKey of from.removed) if (!to.entries.has(chatKey)) to.removed.add(chatKey);
    return from.entries.size;
  }

  removeProfile(name: string): number {
    const routes = this.profiles.get(name);
    if (!routes) return 0;
    const count = routes.entries.size;
    for (const chatKey of routes.entries.keys()) routes.removed.add(chatKey);
    routes.entries.clear();
    routes.dirty.clear();
    return count;
  }

  /** What changed since the last call; the caller persists it. */
  takeChanges(): RoutingChanges {
    const changes: RoutingChanges = { upserts: [], deletes: [] };
    for (const [profile, routes] of this.profiles) {
      for (const chatKey of routes.dirty) changes.upserts.push(toEntry(profile, chatKey, routes.entries.get(chatKey)!));
      for (const chatKey of routes.removed) changes.deletes.push(profileKeyPrefix(profile) + chatKey);
      routes.dirty.clear();
      routes.removed.clear();
      if (routes.entries.size === 0) this.profiles.delete(profile);
    }
    return changes;
  }

  /** Puts changes back after a failed persist so the next attempt writes them. */
  restoreChanges(changes: RoutingChanges): void {
    for (const e of changes.upserts) {
      const split = splitProfileKey(e.routing_key);
      const routes = split && this.profiles.get(split.profile);
      if (split && routes?.entries.has(split.chatKey)) routes.dirty.add(split.chatKey);
    }
    for (const k of changes.deletes) {
      const split = splitProfileKey(k);
      if (!split) continue;
      const routes = this.routesOf(split.profile);
      if (!routes.entries.has(split.chatKey)) routes.removed.add(split.chatKey);
    }
  }

  get hasChanges(): boolean {
    for (const routes of this.profiles.values()) if (routes.dirty.size > 0 || routes.removed.size > 0) return true;
    return false;
  }
}
