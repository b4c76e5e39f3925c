import type { Db } from "@hermes/common";
import type { RoutingChanges, RoutingEntry } from "../core/identity/routing-index.js";

export function loadRoutingEntries(db: Db): RoutingEntry[] {
  return (db.prepare("SELECT entry_json FROM gateway_routing").all() as { entry_json: string }[]).map(
    (r) => JSON.parse(r.entry_json) as RoutingEntry,
  );
}

/** Writes what changed in the routing index, in one transaction. */
export function persistRoutingChanges(db: Db, changes: RoutingChanges): void {
  if (changes.upserts.length === 0 && changes.deletes.length === 0) return;
  const upsert = db.prepare(
    `INSERT INTO gateway_routing (routing_key, entry_json, updated_at) VALUES (?, ?, ?)
     ON CONFLICT(routing_key) DO UPDATE SET entry_json = excluded.entry_json, updated_at = excluded.updated_at`,
  );
  const remove = db.prepare("DELETE FROM gateway_routing WHERE routing_key = ?");
  db.transaction(() => {
    for (const key of changes.deletes) remove.run(key);
    for (const e of changes.upserts) upsert.run(e.routing_key, JSON.stringify(e), e.updated_at);
  }).immediate();
}
