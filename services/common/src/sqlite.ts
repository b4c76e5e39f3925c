import Database from "better-sqlite3";
import { diskFullError, isDiskFull, makeDatabaseFilesPrivate } from "./files.js";
import { HermesError } from "./pure/errors.js";
import type { MigrationStep } from "./pure/migration-step.js";

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
  /** Told before and after each migration an existing file needs (not when a new file is created): an upgrade of a large file takes seconds, and says so. */
  onMigration?: (step: MigrationStep) => void;
  /** Bytes per page of a file this call creates (an existing file keeps its own). */
  pageSize?: number;
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
  if (isDiskFull(err)) return diskFullError(err, `${label} at ${path}`, { database: path });
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
export function migrate(
  db: Db,
  migrations: readonly Migration[],
  label: string,
  path: string,
  onMigration?: (step: MigrationStep) => void,
): number {
  assertKnownSchema(db, migrations, label, path);
  const current = db.pragma("user_version", { simple: true }) as number;
  // A new file (version 0) is created, not upgraded: only an existing file's upgrade is reported.
  const report = current > 0 ? onMigration : undefined;
  for (const m of migrations.filter((x) => x.version > current)) {
    const step = { label, path, version: m.version, name: m.name };
    report?.({ ...step, phase: "start" });
    const started = performance.now();
    db.transaction(() => {
      m.up(db);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
    report?.({ ...step, phase: "done", ms: Math.round(performance.now() - started) });
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
      if (options.pageSize !== undefined) db.pragma(`page_size = ${options.pageSize}`);
      const mode = db.pragma("journal_mode = WAL", { simple: true });
      if (mode !== "wal") throw new Error(`could not switch to WAL (journal_mode is ${String(mode)})`);
      const wanted = options.synchronous ?? "FULL";
      db.pragma(`synchronous = ${wanted}`);
      const sync = db.pragma("synchronous", { simple: true });
      if (sync !== (wanted === "FULL" ? 2 : 1)) throw new Error(`synchronous=${wanted} did not take (got ${String(sync)})`);
    }
    db.pragma("foreign_keys = ON");
    if (!options.readonly) {
      watchWrites(db, options.label, path);
      migrate(db, options.migrations, options.label, path, options.onMigration);
    }
    return db;
  } catch (err) {
    db?.close();
    throw databaseError(err, options.label, path);
  }
}

/** Per connection: the `disk_full` its last write failed with, until a write commits again. */
const failingWrites = new WeakMap<Db, HermesError>();

/** The full-disk failure of the connection's last write, while writes fail (undefined once one commits). */
export function writeFailure(db: Db): HermesError | undefined {
  return failingWrites.get(db);
}

/**
 * Every write path of a connection (statements' `run`, transactions, `exec`): a full disk is the
 * typed `disk_full` naming the database instead of a bare SqliteError, and is remembered
 * (`writeFailure`) until a later write commits, so readiness can follow it.
 */
function watchWrites(db: Db, label: string, path: string): void {
  const guard = <T>(write: () => T): T => {
    let result: T;
    try {
      result = write();
    } catch (err) {
      if (!isDiskFull(err)) throw err;
      const full = diskFullError(err, `${label} at ${path}`, { database: path });
      failingWrites.set(db, full);
      throw full;
    }
    // Inside a transaction nothing is on disk yet: only a commit (or an autocommit write) counts.
    if (!db.inTransaction) failingWrites.delete(db);
    return result;
  };
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    const stmt = prepare(sql);
    const run = stmt.run.bind(stmt);
    stmt.run = (...params: unknown[]) => guard(() => run(...params));
    return stmt;
  }) as Db["prepare"];
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn: (...args: unknown[]) => unknown) => {
    const tx = transaction(fn);
    const guarded =
      (variant: (...args: unknown[]) => unknown) =>
      (...args: unknown[]) =>
        guard(() => variant(...args));
    const main = guarded(tx);
    return Object.assign(main, {
      default: main,
      deferred: guarded(tx.deferred),
      immediate: guarded(tx.immediate),
      exclusive: guarded(tx.exclusive),
      database: db,
    });
  }) as Db["transaction"];
  const exec = db.exec.bind(db);
  db.exec = ((sql: string) => guard(() => exec(sql))) as Db["exec"];
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
