import Database from "better-sqlite3";
import { HermesError } from "./errors.js";
import { makeDatabaseFilesPrivate } from "./files.js";

export type Db = Database.Database;

export interface Migration {
  /** 1, 2, 3 … dense; stored in PRAGMA user_version once applied. */
  version: number;
  name: string;
  up(db: Db): void;
}

export interface OpenOptions {
  /** Human name for messages, e.g. "gateway state.db". */
  label: string;
  migrations: readonly Migration[];
  busyTimeoutMs?: number;
  readonly?: boolean;
  /** FULL fsyncs the WAL at every commit (acknowledged = durable). */
  synchronous?: "FULL" | "NORMAL";
}

function sqliteCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
}

/** Maps SQLite failures to typed errors that tell the operator what to do; never resets data. */
export function databaseError(err: unknown, label: string, path: string): HermesError {
  if (err instanceof HermesError) return err;
  const code = sqliteCode(err) ?? "";
  const message = err instanceof Error ? err.message : String(err);
  if (code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT" || code.startsWith("SQLITE_CORRUPT")) {
    return new HermesError(
      "database_corrupt",
      `${label} at ${path} is not a readable SQLite database (${message}). Nothing was changed: move the file aside and restore it from a backup, or move it aside to start empty.`,
      { data: { database: path }, cause: err },
    );
  }
  if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED" || code.startsWith("SQLITE_BUSY")) {
    return new HermesError("database_busy", `${label} at ${path} is locked by another process (${message}); retry when it is free`, {
      data: { database: path },
      cause: err,
    });
  }
  return new HermesError("internal", `${label} at ${path}: ${message}`, { data: { database: path }, cause: err });
}

function knownVersion(migrations: readonly Migration[], label: string): number {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`${label}: migrations must be numbered 1..n in order (found ${m.version} at ${i + 1})`);
  });
  return migrations.length;
}

/** Refuses a file whose schema is newer than this build knows, before anything touches it. */
function assertKnownSchema(db: Db, migrations: readonly Migration[], label: string, path: string): void {
  const known = knownVersion(migrations, label);
  const current = db.pragma("user_version", { simple: true }) as number;
  if (current > known) {
    throw new HermesError(
      "unsupported_schema",
      `${label} at ${path} has schema version ${current}, but this build knows versions up to ${known}. Upgrade hermes, or restore a backup made by this version; nothing was changed.`,
      { data: { database: path, version: current, known } },
    );
  }
}

/** Applies pending migrations, each in its own transaction; refuses a schema newer than this build. */
export function migrate(db: Db, migrations: readonly Migration[], label: string, path: string): number {
  assertKnownSchema(db, migrations, label, path);
  const current = db.pragma("user_version", { simple: true }) as number;
  for (const m of migrations.filter((x) => x.version > current)) {
    db.transaction(() => {
      m.up(db);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
  }
  return knownVersion(migrations, label);
}

/**
 * Opens a SQLite file in WAL mode with the given durability, verifies that the settings took, and
 * migrates it. A corrupt or newer-than-known file is refused with a clear message, never reset.
 */
export function openDatabase(path: string, options: OpenOptions): Db {
  let db: Db | undefined;
  try {
    if (!options.readonly) makeDatabaseFilesPrivate(path);
    db = new Database(path, { readonly: options.readonly ?? false });
    db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
    // Reading the version also proves the file is a database; both before any write to it.
    assertKnownSchema(db, options.migrations, options.label, path);
    if (!options.readonly) {
      const mode = db.pragma("journal_mode = WAL", { simple: true });
      if (mode !== "wal") throw new Error(`could not switch to WAL (journal_mode is ${String(mode)})`);
      const wanted = options.synchronous ?? "FULL";
      db.pragma(`synchronous = ${wanted}`);
      const sync = db.pragma("synchronous", { simple: true });
      if (sync !== (wanted === "FULL" ? 2 : 1)) throw new Error(`synchronous=${wanted} did not take (got ${String(sync)})`);
    }
    db.pragma("foreign_keys = ON");
    if (!options.readonly) migrate(db, options.migrations, options.label, path);
    return db;
  } catch (err) {
    db?.close();
    throw databaseError(err, options.label, path);
  }
}

const statements = new WeakMap<Db, Map<string, Database.Statement>>();

/**
 * A prepared statement for this connection, prepared once and reused: preparing costs tens of
 * microseconds, which adds up on hot paths (a delivery prepares about ten).
 */
export function statement(db: Db, sql: string): Database.Statement {
  let cache = statements.get(db);
  if (!cache) {
    cache = new Map();
    statements.set(db, cache);
  }
  let stmt = cache.get(sql);
  if (!stmt) {
    stmt = db.prepare(sql);
    cache.set(sql, stmt);
  }
  return stmt;
}

/** True when a table exists (identity rekeys skip tables a module has not created yet). */
export function tableExists(db: Db, table: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) !== undefined;
}

export function columnExists(db: Db, table: string, column: string): boolean {
  return (db.prepare(`PRAGMA table_info(${JSON.stringify(table)})`).all() as { name: string }[]).some((c) => c.name === column);
}
