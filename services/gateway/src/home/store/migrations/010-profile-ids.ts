import { type Db, HermesError, type Migration } from "@hermes/common";

/**
 * Profile ids: a profile's name becomes an attribute of one `profiles` row (`id`, `name` UNIQUE),
 * and the two big identity tables store the id instead of the name, so a rename changes one row
 * instead of every session and routing entry (identity/README.md, "Profile ids").
 *
 * - `session_records`: `sessions` with `profile_id` for `profile_name`, `chat_key` for the session
 *   key (the key without its `agent:<name>:` prefix) and the origin without its `profile`;
 * - `routing_records`: `gateway_routing` as columns: `profile_id`, `chat_key`, the session id, the
 *   origin without its `profile`, `updated_at` (the entry's routing and session keys are the same
 *   key, `agent:<name>:<chat_key>`).
 *
 * `profiles` also counts each profile's rows of both (`session_rows`, `routing_rows`, kept by
 * triggers). `sessions` and `gateway_routing` stay as read-only views that show the rows with
 * their names, as they looked before, for operators and tests; the stores read and write the
 * tables. The rows move in this migration's one transaction (a kill -9 part way leaves the database at version 9, as
 * it was). A row whose key names another profile than its own cannot be kept under one id: it is
 * refused, the database needs a look before anything rewrites it.
 */
const STEPS: readonly string[] = [
  `CREATE TABLE profiles (
     id INTEGER PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     session_rows INTEGER NOT NULL DEFAULT 0,
     routing_rows INTEGER NOT NULL DEFAULT 0
   )`,
  `INSERT INTO profiles (name)
     SELECT profile_name FROM sessions
     UNION SELECT json_extract(entry_json, '$.origin.profile') FROM gateway_routing`,
  `CREATE TABLE session_records (
     session_id TEXT PRIMARY KEY,
     profile_id INTEGER NOT NULL REFERENCES profiles (id),
     chat_key TEXT NOT NULL,
     title TEXT NOT NULL,
     kind TEXT NOT NULL,
     origin_json TEXT NOT NULL,
     model_override TEXT,
     provider_override TEXT,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   )`,
  `INSERT INTO session_records (session_id, profile_id, chat_key, title, kind, origin_json, model_override, provider_override, created_at, updated_at)
     SELECT s.session_id, p.id, substr(s.session_key, length(p.name) + 8), s.title, s.kind, json_remove(s.origin_json, '$.profile'),
            s.model_override, s.provider_override, s.created_at, s.updated_at
     FROM sessions s JOIN profiles p ON p.name = s.profile_name
     ORDER BY s.rowid`,
  "DROP TABLE sessions",
  "CREATE UNIQUE INDEX session_records_by_key ON session_records (profile_id, chat_key)",
  `CREATE TABLE routing_records (
     profile_id INTEGER NOT NULL REFERENCES profiles (id),
     chat_key TEXT NOT NULL,
     session_id TEXT NOT NULL,
     origin_json TEXT NOT NULL,
     updated_at TEXT NOT NULL
   )`,
  `INSERT INTO routing_records (profile_id, chat_key, session_id, origin_json, updated_at)
     SELECT p.id, substr(r.routing_key, length(p.name) + 8), json_extract(r.entry_json, '$.session_id'),
            json_remove(json_extract(r.entry_json, '$.origin'), '$.profile'), r.updated_at
     FROM gateway_routing r JOIN profiles p ON p.name = json_extract(r.entry_json, '$.origin.profile')
     ORDER BY r.rowid`,
  "DROP TABLE gateway_routing",
  "CREATE UNIQUE INDEX routing_records_by_key ON routing_records (profile_id, chat_key)",
  // The row counts follow every insert, delete and move, so a rename can say how many rows now
  // answer to the new name without counting a million of them.
  "UPDATE profiles SET session_rows = (SELECT count(*) FROM session_records WHERE profile_id = profiles.id)",
  "UPDATE profiles SET routing_rows = (SELECT count(*) FROM routing_records WHERE profile_id = profiles.id)",
  ...["session", "routing"].flatMap((t) => [
    `CREATE TRIGGER ${t}_records_counted_in AFTER INSERT ON ${t}_records
       BEGIN UPDATE profiles SET ${t}_rows = ${t}_rows + 1 WHERE id = NEW.profile_id; END`,
    `CREATE TRIGGER ${t}_records_counted_out AFTER DELETE ON ${t}_records
       BEGIN UPDATE profiles SET ${t}_rows = ${t}_rows - 1 WHERE id = OLD.profile_id; END`,
    `CREATE TRIGGER ${t}_records_counted_moved AFTER UPDATE OF profile_id ON ${t}_records
       BEGIN
         UPDATE profiles SET ${t}_rows = ${t}_rows - 1 WHERE id = OLD.profile_id;
         UPDATE profiles SET ${t}_rows = ${t}_rows + 1 WHERE id = NEW.profile_id;
       END`,
  ]),
  `CREATE VIEW sessions AS
     SELECT s.session_id, 'agent:' || p.name || ':' || s.chat_key AS session_key, p.name AS profile_name, s.title, s.kind,
            json_patch(json_object('profile', p.name), s.origin_json) AS origin_json, s.model_override, s.provider_override,
            s.created_at, s.updated_at
     FROM session_records s JOIN profiles p ON p.id = s.profile_id`,
  `CREATE VIEW gateway_routing AS
     SELECT 'agent:' || p.name || ':' || r.chat_key AS routing_key,
            json_object('routing_key', 'agent:' || p.name || ':' || r.chat_key, 'session_key', 'agent:' || p.name || ':' || r.chat_key,
                        'session_id', r.session_id, 'origin', json_patch(json_object('profile', p.name), r.origin_json),
                        'updated_at', r.updated_at) AS entry_json,
            r.updated_at
     FROM routing_records r JOIN profiles p ON p.id = r.profile_id`,
];

/** The first session (or routing entry) whose key does not start with `agent:<its profile>:`. */
function strayKey(db: Db): { table: string; key: string } | undefined {
  const session = db
    .prepare(
      `SELECT session_key AS key FROM sessions
       WHERE substr(session_key, 1, length(profile_name) + 7) IS NOT 'agent:' || profile_name || ':' LIMIT 1`,
    )
    .get() as { key: string } | undefined;
  if (session) return { table: "sessions", key: session.key };
  const route = db
    .prepare(
      `SELECT routing_key AS key
       FROM (SELECT routing_key, entry_json, json_extract(entry_json, '$.origin.profile') AS profile FROM gateway_routing)
       WHERE substr(routing_key, 1, length(profile) + 7) IS NOT 'agent:' || profile || ':'
          OR json_extract(entry_json, '$.session_key') IS NOT routing_key LIMIT 1`,
    )
    .get() as { key: string } | undefined;
  return route && { table: "gateway_routing", key: route.key };
}

export const profileIdsMigration: Migration = {
  version: 10,
  name: "profile-ids",
  up(db) {
    const stray = strayKey(db);
    if (stray) {
      throw new HermesError(
        "database_corrupt",
        `${stray.table}: the key ${stray.key} does not belong to its row's profile; the database was not upgraded (still version 9): restore it from a backup or move it aside`,
        { data: stray },
      );
    }
    for (const step of STEPS) db.exec(step);
  },
};
