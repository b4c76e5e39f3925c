import { type Db, HermesError, tableExists } from "@hermes/common";
import { IDENTITY_REGISTRY, type IdentityColumn, type IdentityTable, PROFILE_ID_TABLES } from "../core/registry.js";
import { prefixUpperBound, profileKeyPrefix } from "../core/routing-key.js";
import { profileId } from "./profile-ids.js";
import { forgetSessionRows } from "./sessions-store.js";

/** Rows rewritten (or purged) per table; tables with nothing to do are omitted. */
export type TableCounts = Record<string, number>;

interface Bounds {
  old: string;
  new: string;
  op: string;
  opEnd: string;
  np: string;
  npEnd: string;
  opLen: number;
}

function bounds(oldName: string, newName: string): Bounds {
  const op = profileKeyPrefix(oldName);
  const np = profileKeyPrefix(newName);
  return { old: oldName, new: newName, op, opEnd: prefixUpperBound(op), np, npEnd: prefixUpperBound(np), opLen: op.length };
}

const q = (name: string) => `"${name.replace(/"/g, '""')}"`;

function inOldRange(expr: string): string {
  return `(${expr} >= @op AND ${expr} < @opEnd)`;
}

/** The WHERE term that selects a column's rows belonging to `old`. */
function matchesOld(c: IdentityColumn): string {
  const col = q(c.column);
  if (c.kind === "plain") return `${col} = @old`;
  if (c.kind === "key-prefix") return inOldRange(col);
  const extracted = `json_extract(${col}, '${c.path}')`;
  return c.value === "plain" ? `${extracted} = @old` : inOldRange(extracted);
}

/**
 * The WHERE that selects the rows to rewrite. JSON documents are written together with the plain
 * and key columns of the same row, so when a table has such columns only those (indexed) terms
 * select the rows and the JSON paths are rewritten inside them; a table of JSON alone is scanned.
 */
function rowsOfOld(columns: IdentityColumn[]): string {
  const indexed = columns.filter((c) => c.kind !== "json-path");
  return (indexed.length > 0 ? indexed : columns).map(matchesOld).join(" OR ");
}

/** The new value of one column, with every registered rewrite of that column applied. */
function rewriteExpression(column: string, entries: IdentityColumn[]): string {
  const col = q(column);
  let expr = col;
  for (const c of entries) {
    if (c.kind === "plain") expr = `CASE WHEN ${col} = @old THEN @new ELSE ${expr} END`;
    else if (c.kind === "key-prefix") expr = `CASE WHEN ${inOldRange(col)} THEN @np || substr(${col}, @opLen + 1) ELSE ${expr} END`;
    else {
      const extracted = `json_extract(${col}, '${c.path}')`;
      const value = c.value === "plain" ? "@new" : `@np || substr(${extracted}, @opLen + 1)`;
      expr = `CASE WHEN ${matchesOld(c)} THEN json_set(${expr}, '${c.path}', ${value}) ELSE ${expr} END`;
    }
  }
  return expr;
}

function existingColumns(db: Db, table: IdentityTable): IdentityColumn[] {
  const names = new Set((db.prepare(`PRAGMA table_info(${q(table.table)})`).all() as { name: string }[]).map((c) => c.name));
  return table.columns.filter((c) => names.has(c.column));
}

function findCollision(db: Db, table: IdentityTable, columns: IdentityColumn[], b: Bounds): string | undefined {
  for (const c of columns) {
    if (c.kind !== "key-prefix" || !c.unique) continue;
    const col = q(c.column);
    // Fast path: `new` owns no keys at all (the usual rename), so nothing can collide.
    if (!db.prepare(`SELECT 1 FROM ${q(table.table)} WHERE ${col} >= @np AND ${col} < @npEnd LIMIT 1`).get(b)) continue;
    const hit = db
      .prepare(
        `SELECT a.${col} AS k FROM ${q(table.table)} a WHERE ${inOldRange(`a.${col}`)}
         AND EXISTS (SELECT 1 FROM ${q(table.table)} b WHERE b.${col} = @np || substr(a.${col}, @opLen + 1)) LIMIT 1`,
      )
      .get(b) as { k: string } | undefined;
    if (hit) return `profile routing collision in ${table.table}: ${b.np}${hit.k.slice(b.opLen)} already exists (rekeyed from ${hit.k})`;
  }
  if (table.binding) {
    const p = q(table.binding.profileColumn);
    const join = table.binding.bindingColumns.map((x) => `a.${q(x)} IS b.${q(x)}`).join(" AND ");
    const hit = db
      .prepare(`SELECT ${table.binding.bindingColumns.map((x) => `a.${q(x)}`).join(", ")} FROM ${q(table.table)} a
        JOIN ${q(table.table)} b ON b.${p} = @new AND ${join} WHERE a.${p} = @old LIMIT 1`)
      .get(b) as Record<string, unknown> | undefined;
    if (hit) return `profile identity collision in ${table.table}: ${b.new} already owns ${JSON.stringify(hit)}`;
  }
  return undefined;
}

/**
 * What a rekey old → new does to the id tables (PROFILE_ID_TABLES): nothing when `old` never wrote
 * a row; a rename of the id when `new` owns no rows (the usual rename: one UPDATE of `profiles`,
 * whatever the number of sessions); else a merge that moves `old`'s rows onto `new`'s id.
 */
type IdPlan = { kind: "none" } | { kind: "rename"; oldId: number; emptyNewId?: number } | { kind: "merge"; oldId: number; newId: number };

function ownsRows(db: Db, id: number): boolean {
  return PROFILE_ID_TABLES.some((t) => db.prepare(`SELECT 1 FROM ${q(t.table)} WHERE profile_id = ? LIMIT 1`).get(id) !== undefined);
}

function planIds(db: Db, b: Bounds): IdPlan {
  const oldId = profileId(db, b.old);
  if (oldId === undefined) return { kind: "none" };
  const newId = profileId(db, b.new);
  if (newId === undefined || !ownsRows(db, newId)) return { kind: "rename", oldId, emptyNewId: newId };
  return { kind: "merge", oldId, newId };
}

/** A key both profiles own in an id table, which a merge would overwrite. */
function findIdCollision(db: Db, plan: IdPlan, b: Bounds): string | undefined {
  if (plan.kind !== "merge") return undefined;
  for (const t of PROFILE_ID_TABLES) {
    const key = q(t.key);
    const hit = db
      .prepare(
        `SELECT a.${key} AS k FROM ${q(t.table)} a WHERE a.profile_id = ?
         AND EXISTS (SELECT 1 FROM ${q(t.table)} x WHERE x.profile_id = ? AND x.${key} = a.${key}) LIMIT 1`,
      )
      .get(plan.oldId, plan.newId) as { k: string } | undefined;
    if (hit) return `profile routing collision in ${t.shownAs}: ${b.np}${hit.k} already exists (rekeyed from ${b.op}${hit.k})`;
  }
  return undefined;
}

/** Carries out the plan; returns the rows that now answer to `new` instead of `old`, per table. */
function moveIds(db: Db, plan: IdPlan, newName: string): TableCounts {
  const counts: TableCounts = {};
  if (plan.kind === "none") return counts;
  for (const t of PROFILE_ID_TABLES) {
    const rows =
      plan.kind === "rename"
        ? (db
            .prepare(`SELECT ${q(t.counted)} FROM profiles WHERE id = ?`)
            .pluck()
            .get(plan.oldId) as number)
        : db.prepare(`UPDATE ${q(t.table)} SET profile_id = ? WHERE profile_id = ?`).run(plan.newId, plan.oldId).changes;
    if (rows > 0) counts[t.shownAs] = rows;
  }
  if (plan.kind === "merge") {
    db.prepare("DELETE FROM profiles WHERE id = ?").run(plan.oldId);
  } else {
    // A name with a row but nothing under it (everything was moved or purged) gives the name up.
    if (plan.emptyNewId !== undefined) db.prepare("DELETE FROM profiles WHERE id = ?").run(plan.emptyNewId);
    db.prepare("UPDATE profiles SET name = ? WHERE id = ?").run(newName, plan.oldId);
  }
  return counts;
}

/**
 * rekeyProfileState: moves every identity row from `old` to `new` in ONE transaction: the id
 * tables by renaming the profile's id (or merging it into `new`'s), the registered name columns by
 * rewriting them. Collisions are checked first and refused with nothing written
 * (identity_collision, naming table and key). A second run finds nothing to move and succeeds.
 * Tables that do not exist yet are skipped.
 */
export function rekeyProfileState(db: Db, oldName: string, newName: string, registry = IDENTITY_REGISTRY): TableCounts {
  if (oldName === newName) return {};
  const b = bounds(oldName, newName);
  const run = db.transaction(() => {
    const plan = registry.filter((t) => tableExists(db, t.table)).map((t) => ({ table: t, columns: existingColumns(db, t) }));
    const ids = planIds(db, b);
    const idCollision = findIdCollision(db, ids, b);
    if (idCollision) throw new HermesError("identity_collision", idCollision, { data: { table: "profiles", database: db.name } });
    for (const { table, columns } of plan) {
      const collision = findCollision(db, table, columns, b);
      if (collision) throw new HermesError("identity_collision", collision, { data: { table: table.table, database: db.name } });
    }
    const counts = moveIds(db, ids, newName);
    for (const { table, columns } of plan) {
      if (columns.length === 0) continue;
      if (table.replaceable) {
        for (const c of columns.filter((x) => x.kind === "plain")) {
          const col = q(c.column);
          db.prepare(
            `DELETE FROM ${q(table.table)} WHERE ${col} = @old AND EXISTS (SELECT 1 FROM ${q(table.table)} WHERE ${col} = @new)`,
          ).run(b);
        }
      }
      const byColumn = new Map<string, IdentityColumn[]>();
      for (const c of columns) byColumn.set(c.column, [...(byColumn.get(c.column) ?? []), c]);
      const sets = [...byColumn].map(([column, entries]) => `${q(column)} = ${rewriteExpression(column, entries)}`).join(", ");
      const where = rowsOfOld(columns);
      const rows = (db.prepare(`SELECT count(*) AS n FROM ${q(table.table)} WHERE ${where}`).get(b) as { n: number }).n;
      if (rows === 0) continue;
      const changed = withIndexesRebuiltIfLarge(
        db,
        table.table,
        rows,
        () => db.prepare(`UPDATE ${q(table.table)} SET ${sets} WHERE ${where}`).run(b).changes,
      );
      if (changed > 0) counts[table.table] = changed;
    }
    return counts;
  });
  try {
    return run.immediate();
  } finally {
    forgetSessionRows(db);
  }
}

/**
 * Above this many rows, a table's secondary indexes are dropped and rebuilt around the rewrite:
 * one sorted build is cheaper than a million scattered index updates (1M rows: 6.4 s → 5.0 s, measured
 * when sessions were still keyed by name).
 */
const REBUILD_INDEXES_ABOVE_ROWS = 50_000;

/** Runs `rewrite` on a table, rebuilding its explicit indexes around it when many rows change. */
function withIndexesRebuiltIfLarge(db: Db, table: string, rows: number, rewrite: () => number): number {
  if (rows < REBUILD_INDEXES_ABOVE_ROWS) return rewrite();
  const indexes = db
    .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL")
    .all(table) as {
    name: string;
    sql: string;
  }[];
  for (const index of indexes) db.exec(`DROP INDEX ${q(index.name)}`);
  const changed = rewrite();
  for (const index of indexes) db.exec(index.sql);
  return changed;
}

/**
 * Purge on delete: removes the profile's identity rows (or marks them, e.g. open obligations
 * become `abandoned`) and its id in one transaction; returns per-table counts. A profile created
 * again under the name gets a new id.
 */
export function purgeProfileState(db: Db, name: string, registry = IDENTITY_REGISTRY): TableCounts {
  const b = bounds(name, name);
  const run = db.transaction(() => {
    const counts: TableCounts = {};
    const id = profileId(db, name);
    if (id !== undefined) {
      for (const t of PROFILE_ID_TABLES) {
        const changed = db.prepare(`DELETE FROM ${q(t.table)} WHERE profile_id = ?`).run(id).changes;
        if (changed > 0) counts[t.shownAs] = changed;
      }
      db.prepare("DELETE FROM profiles WHERE id = ?").run(id);
    }
    for (const table of registry) {
      if (!tableExists(db, table.table)) continue;
      const purge = table.purge;
      const columns = existingColumns(db, table).filter(
        (c) => c.kind !== "json-path" && (purge.kind !== "delete" || purge.by === undefined || purge.by.includes(c.column)),
      );
      if (columns.length === 0) continue;
      const where = columns.map(matchesOld).join(" OR ");
      const sql =
        purge.kind === "delete"
          ? `DELETE FROM ${q(table.table)} WHERE ${where}`
          : `UPDATE ${q(table.table)} SET ${q(purge.column)} = @value WHERE (${where}) AND ${q(purge.column)} ${purge.when === undefined ? "IS NOT @value" : "= @when"}`;
      const params = { ...b, value: purge.kind === "set" ? purge.value : null, when: purge.kind === "set" ? (purge.when ?? null) : null };
      const changed = db.prepare(sql).run(params).changes;
      if (changed > 0) counts[table.table] = changed;
    }
    return counts;
  });
  try {
    return run.immediate();
  } finally {
    forgetSessionRows(db);
  }
}
