import { type Db, statement } from "@hermes/common";

/**
 * The `profiles` table: each profile's immutable id and its current name (store/migrations/010).
 * The big identity tables hold the id; the name is looked up (joined) where rows are read and
 * written, so a rename is one UPDATE here.
 */

/**
 * The id of a profile name, creating its row on first use (a session or routing entry is about to
 * be written). Looked up first: the row almost always exists, and a persist of the routing index
 * asks once per entry.
 */
export function ensureProfileId(db: Db, name: string): number {
  return profileId(db, name) ?? Number(statement(db, "INSERT INTO profiles (name) VALUES (?)").run(name).lastInsertRowid);
}

/** The id of a profile name, if anything was ever written under it. */
export function profileId(db: Db, name: string): number | undefined {
  return (statement(db, "SELECT id FROM profiles WHERE name = ?").get(name) as { id: number } | undefined)?.id;
}
