/**
 * §2.1 The identity registry: every column that holds a profile name, or a key or JSON document
 * with one embedded. Rename and delete act on exactly these columns, so a module that adds such a
 * column adds its table to IDENTITY_REGISTRY below (and nothing else needs to know).
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
 * What happens to a table's rows when their profile is deleted (§2.2): most identity rows are
 * deleted; delivery obligations are kept but marked abandoned.
 */
export type PurgeAction = { kind: "delete" } | { kind: "set"; column: string; value: string };

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
}

export const IDENTITY_REGISTRY: IdentityTable[] = [
  {
    table: "sessions",
    columns: [
      { table: "sessions", column: "profile_name", kind: "plain" },
      { table: "sessions", column: "session_key", kind: "key-prefix", unique: true },
      { table: "sessions", column: "origin_json", kind: "json-path", path: "$.profile", value: "plain" },
    ],
    purge: { kind: "delete" },
  },
  {
    table: "gateway_routing",
    columns: [
      { table: "gateway_routing", column: "routing_key", kind: "key-prefix", unique: true },
      { table: "gateway_routing", column: "entry_json", kind: "json-path", path: "$.routing_key", value: "key-prefix" },
      { table: "gateway_routing", column: "entry_json", kind: "json-path", path: "$.session_key", value: "key-prefix" },
      { table: "gateway_routing", column: "entry_json", kind: "json-path", path: "$.origin.profile", value: "plain" },
    ],
    purge: { kind: "delete" },
  },
  {
    table: "gateway_heartbeats",
    columns: [{ table: "gateway_heartbeats", column: "profile", kind: "plain" }],
    purge: { kind: "delete" },
  },
  {
    table: "delivery_obligations",
    columns: [
      { table: "delivery_obligations", column: "adapter_profile", kind: "plain" },
      { table: "delivery_obligations", column: "session_key", kind: "key-prefix", unique: false },
    ],
    purge: { kind: "set", column: "state", value: "abandoned" },
  },
  {
    table: "profile_aliases",
    columns: [{ table: "profile_aliases", column: "profile_name", kind: "plain" }],
    purge: { kind: "delete" },
  },
];
