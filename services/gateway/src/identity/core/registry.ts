/**
 * The identity registry: every column that holds a profile name, or a key or JSON document
 * with one embedded. Rename and delete act on exactly these columns, so a module that adds such a
 * column adds its table to IDENTITY_REGISTRY below (and nothing else needs to know).
 *
 * The big tables hold a profile's immutable id instead (PROFILE_ID_TABLES): a rename changes the
 * name of that id in `profiles` and leaves their rows alone.
 */
export type IdentityColumn =
  /** The column holds the profile name itself. */
  | { table: string; column: string; kind: "plain" }
  /**
   * The column holds a key that starts with `agent:<profile>:`. `unique` columns are checked for
   * collisions before anything is written.
   */
  | { table: string; column: string; kind: "key-prefix"; unique: boolean }
  /** A JSON document with the profile name (plain) or a key (key-prefix) at `path` (`$.origin.profile`). */
  | { table: string; column: string; kind: "json-path"; path: string; value: "plain" | "key-prefix" };

/**
 * What happens to a table's rows when their profile is deleted: most identity rows are
 * deleted; delivery obligations are kept, the open ones marked abandoned. `by` narrows which
 * columns make a row the profile's own (default: any of its plain and key-prefix columns); `when`
 * narrows a `set` to rows whose column holds that value.
 */
export type PurgeAction = { kind: "delete"; by?: string[] } | { kind: "set"; column: string; value: string; when?: string };

export interface IdentityTable {
  table: string;
  columns: IdentityColumn[];
  /** Rows of the profile are those matching the first plain or key-prefix column. */
  purge: PurgeAction;
  /**
   * Per-chat bindings: rows whose `bindingColumns` (besides the profile column) must be unique per
   * profile; if `new` already owns the same binding, the rekey is refused.
   */
  binding?: { profileColumn: string; bindingColumns: string[] };
  /**
   * Rows are derived status (heartbeats) keyed by the profile alone: when `new` already has its
   * own row, the old one is dropped instead of colliding with it.
   */
  replaceable?: boolean;
}

/**
 * A table that holds the profile as `profile_id` (profiles.id, home/store/migrations/010-profile-ids.ts)
 * and `key` unique per profile. Counts name it `shownAs`, the view that shows its rows with names.
 * A rename leaves its rows alone; a migration onto a profile that already has rows of its own
 * moves them (refused if a key collides); a delete purges them.
 */
export interface ProfileIdTable {
  table: string;
  shownAs: string;
  key: string;
  /** The column of `profiles` that counts the profile's rows of this table (kept by triggers). */
  counted: string;
}

export const PROFILE_ID_TABLES: readonly ProfileIdTable[] = [
  // Sessions: the key `agent:<name>:<chat_key>` and the origin's profile are the name of the id.
  { table: "session_records", shownAs: "sessions", key: "chat_key", counted: "session_rows" },
  // The persisted routing index, keyed like the sessions.
  { table: "routing_records", shownAs: "gateway_routing", key: "chat_key", counted: "routing_rows" },
];

export const IDENTITY_REGISTRY: IdentityTable[] = [
  {
    table: "gateway_heartbeats",
    columns: [{ table: "gateway_heartbeats", column: "profile", kind: "plain" }],
    purge: { kind: "delete" },
    replaceable: true,
  },
  {
    table: "delivery_obligations",
    columns: [
      { table: "delivery_obligations", column: "adapter_profile", kind: "plain" },
      { table: "delivery_obligations", column: "session_key", kind: "key-prefix", unique: false },
    ],
    // Only a pending obligation is open; a delivered or failed one is history and stays as it was.
    purge: { kind: "set", column: "state", value: "abandoned", when: "pending" },
  },
  {
    table: "profile_aliases",
    columns: [{ table: "profile_aliases", column: "profile_name", kind: "plain" }],
    purge: { kind: "delete" },
  },
  // Rooms (home/store/migrations/002-rooms.ts): the membership handles of this gateway's profiles.
  // The room log (room.created / members_changed payloads) is hash-chained and never rewritten; old
  // names keep resolving as aliases there. A deleted profile leaves the rooms (rows deleted).
  {
    table: "room_members",
    columns: [{ table: "room_members", column: "profile", kind: "plain" }],
    purge: { kind: "delete" },
  },
  // Deliveries (home/store/migrations/003-deliveries.ts). The outbox names its sender, the sender's
  // Bot Chat (where the completion notification goes) and, for local routes, the target profile.
  // The ingress names the target profile and the session its turn runs in; its sender is stored
  // qualified (`<profile>@<gateway>`), the sending gateway's statement, so it is not rekeyed here.
  // A deleted profile's deliveries are purged after the open ones were ended: what it sent, and
  // what it received. Mail other local bots sent to it stays: those rows are their receipts.
  {
    table: "delivery_outbox",
    columns: [
      { table: "delivery_outbox", column: "from_profile", kind: "plain" },
      { table: "delivery_outbox", column: "sender_session_key", kind: "key-prefix", unique: false },
      { table: "delivery_outbox", column: "target_profile", kind: "plain" },
    ],
    purge: { kind: "delete", by: ["from_profile", "sender_session_key"] },
  },
  {
    table: "delivery_ingress",
    columns: [
      { table: "delivery_ingress", column: "target_profile", kind: "plain" },
      { table: "delivery_ingress", column: "session_key", kind: "key-prefix", unique: false },
    ],
    purge: { kind: "delete" },
  },
  // Peer runs (home/store/migrations/004-peer-runs.ts): the profile whose Bot Chat runs them. The
  // sender is the calling gateway's statement, not rekeyed. A deleted profile's runs are purged
  // (queued ones were dropped from its lanes first).
  {
    table: "peer_runs",
    columns: [{ table: "peer_runs", column: "profile", kind: "plain" }],
    purge: { kind: "delete" },
  },
  // A2A tasks (home/store/migrations/012-a2a-tasks.ts): the bot whose Bot Chat runs them (and so
  // the bot a conversation, a contextId, belongs to). The caller is the key's name, not a profile.
  // A deleted profile's tasks are purged (its running turns were stopped first).
  {
    table: "a2a_tasks",
    columns: [{ table: "a2a_tasks", column: "profile", kind: "plain" }],
    purge: { kind: "delete" },
  },
  // Telegram (home/store/migrations/007-telegram.ts): the session of each chat and forum topic. A rename
  // carries the bindings (and so every topic's conversation); a profile that already serves the same
  // chat or topic makes the rename refuse. A delete drops them with the sessions.
  {
    table: "telegram_topics",
    columns: [
      { table: "telegram_topics", column: "profile", kind: "plain" },
      { table: "telegram_topics", column: "session_key", kind: "key-prefix", unique: true },
    ],
    purge: { kind: "delete" },
    binding: { profileColumn: "profile", bindingColumns: ["chat_id", "topic_id"] },
  },
  // Routines (home/store/migrations/008-routines.ts): a profile's routines and their run history follow
  // a rename; a routine name is a per-profile binding, so renaming onto a profile that has a
  // routine of the same name is refused before anything is written. A delete purges both (the
  // runs first, so their count is reported; the scheduler dropped the routines before).
  {
    table: "routine_runs",
    columns: [{ table: "routine_runs", column: "profile", kind: "plain" }],
    purge: { kind: "delete" },
  },
  {
    table: "routines",
    columns: [{ table: "routines", column: "profile", kind: "plain" }],
    purge: { kind: "delete" },
    binding: { profileColumn: "profile", bindingColumns: ["name_key"] },
  },
];
