import { type Db, statement } from "@hermes/common";
import { type RoutingChanges, type RoutingEntry, splitRoutingEntry } from "../core/routing-index.js";
import { originOf, profileKeyPrefix, type StoredOrigin, splitProfileKey } from "../core/routing-key.js";
import { ensureProfileId } from "./profile-ids.js";

/**
 * The persisted routing index (`routing_records`, home/store/migrations/010-profile-ids.ts): the
 * profile as its id and the key without its `agent:<name>:` prefix; entries are given and taken
 * with their names, so a rename never touches these rows.
 */

export function loadRoutingEntries(db: Db): RoutingEntry[] {
  const rows = db
    .prepare(
      `SELECT p.name, r.chat_key, r.session_id, r.origin_json, r.updated_at
       FROM routing_records r JOIN profiles p ON p.id = r.profile_id`,
    )
    .all() as { name: string; chat_key: string; session_id: string; origin_json: string; updated_at: string }[];
  return rows.map((r) => {
    const key = profileKeyPrefix(r.name) + r.chat_key;
    const origin = originOf(r.name, JSON.parse(r.origin_json) as StoredOrigin);
    return { routing_key: key, session_key: key, session_id: r.session_id, origin, updated_at: r.updated_at };
  });
}

type PersistTransaction = (changes: RoutingChanges) => void;

function makePersistTransaction(db: Db): PersistTransaction {
  const upsert = statement(
    db,
    `INSERT INTO routing_records (profile_id, chat_key, session_id, origin_json, updated_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (profile_id, chat_key) DO UPDATE SET session_id = excluded.session_id, origin_json = excluded.origin_json,
       updated_at = excluded.updated_at`,
  );
  const remove = statement(db, "DELETE FROM routing_records WHERE profile_id = (SELECT id FROM profiles WHERE name = ?) AND chat_key = ?");
  const tx = db.transaction((changes: RoutingChanges) => {
    for (const deleted of changes.deletes) {
      const key = splitProfileKey(deleted);
      if (key) remove.run(key.profile, key.chatKey);
    }
    for (const e of changes.upserts) {
      const { profile, chatKey, stored } = splitRoutingEntry(e);
      upsert.run(ensureProfileId(db, profile), chatKey, stored.session_id, JSON.stringify(stored.origin), stored.updated_at);
    }
  });
  return (changes) => tx.immediate(changes);
}

/** Each connection's persist transaction, made once (a settled delivery persists its touched entry in its commit). */
const persistTransactions = new WeakMap<Db, PersistTransaction>();

/** Writes what changed in the routing index, in one transaction. */
export function persistRoutingChanges(db: Db, changes: RoutingChanges): void {
  if (changes.upserts.length === 0 && changes.deletes.length === 0) return;
  let tx = persistTransactions.get(db);
  if (!tx) {
    tx = makePersistTransaction(db);
    persistTransactions.set(db, tx);
  }
  tx(changes);
}
