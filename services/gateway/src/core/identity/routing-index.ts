import { HermesError } from "@hermes/common/pure";
import { profileKeyPrefix, type RoutingOrigin, rekeyRoutingKey } from "./routing-key.js";

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

/**
 * The gateway's in-memory routing index: routing key → session. It records what changed
 * since the last persist, so the store writes only that. Rekeying happens here first, under the
 * same synchronous step as the DB rewrite, so no later persist can write the old name back.
 */
export class RoutingIndex {
  private readonly entries = new Map<string, RoutingEntry>();
  private readonly dirty = new Set<string>();
  private readonly removed = new Set<string>();

  static from(entries: Iterable<RoutingEntry>): RoutingIndex {
    const index = new RoutingIndex();
    for (const e of entries) index.entries.set(e.routing_key, e);
    return index;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): RoutingEntry | undefined {
    return this.entries.get(key);
  }

  values(): IterableIterator<RoutingEntry> {
    return this.entries.values();
  }

  upsert(entry: RoutingEntry): void {
    this.entries.set(entry.routing_key, entry);
    this.dirty.add(entry.routing_key);
    this.removed.delete(entry.routing_key);
  }

  delete(key: string): void {
    if (this.entries.delete(key)) {
      this.dirty.delete(key);
      this.removed.add(key);
    }
  }

  keysOf(profile: string): string[] {
    const prefix = profileKeyPrefix(profile);
    return [...this.entries.keys()].filter((k) => k.startsWith(prefix));
  }

  /** Keys that a rekey old → new would overwrite. */
  collisions(oldName: string, newName: string): string[] {
    return this.keysOf(oldName)
      .map((k) => rekeyRoutingKey(k, oldName, newName))
      .filter((k) => this.entries.has(k));
  }

  /**
   * Moves every entry of `old` to `new` (keys, session keys and origin.profile). Refuses with
   * identity_collision before mutating anything if a target key exists. Returns the count moved.
   * `persisted`: the database rows were already rewritten in the same step (a rename's rekey), so
   * only entries with unpersisted changes are written again.
   */
  rekeyProfile(oldName: string, newName: string, options: { persisted?: boolean } = {}): number {
    if (oldName === newName) return 0;
    const clash = this.collisions(oldName, newName);
    if (clash.length > 0) {
      throw new HermesError("identity_collision", `profile routing collision in the live routing index: ${clash[0]} already exists`, {
        data: { table: "gateway_routing (in memory)", key: clash[0] },
      });
    }
    const keys = this.keysOf(oldName);
    for (const key of keys) {
      const entry = this.entries.get(key)!;
      const unpersisted = this.dirty.has(key);
      this.entries.delete(key);
      this.dirty.delete(key);
      if (!options.persisted) this.removed.add(key);
      const moved: RoutingEntry = {
        ...entry,
        routing_key: rekeyRoutingKey(key, oldName, newName),
        session_key: rekeyRoutingKey(entry.session_key, oldName, newName),
        origin: { ...entry.origin, profile: entry.origin.profile === oldName ? newName : entry.origin.profile },
      };
      this.entries.set(moved.routing_key, moved);
      this.removed.delete(moved.routing_key);
      if (!options.persisted || unpersisted) this.dirty.add(moved.routing_key);
    }
    return keys.length;
  }

  removeProfile(name: string): number {
    const keys = this.keysOf(name);
    for (const key of keys) this.delete(key);
    return keys.length;
  }

  /** What changed since the last call; the caller persists it. */
  takeChanges(): RoutingChanges {
    const changes = {
      upserts: [...this.dirty].map((k) => this.entries.get(k)!).filter(Boolean),
      deletes: [...this.removed],
    };
    this.dirty.clear();
    this.removed.clear();
    return changes;
  }

  /** Puts changes back after a failed persist so the next attempt writes them. */
  restoreChanges(changes: RoutingChanges): void {
    for (const e of changes.upserts) if (this.entries.has(e.routing_key)) this.dirty.add(e.routing_key);
    for (const k of changes.deletes) if (!this.entries.has(k)) this.removed.add(k);
  }

  get hasChanges(): boolean {
    return this.dirty.size > 0 || this.removed.size > 0;
  }
}
