import { close, closeSync, fsync, fsyncSync, openSync } from "node:fs";
import { dirname, join } from "node:path";
import { type Db, databaseError, type HermesError, type MigrationStep, openDatabase, statement, writeFailure } from "@hermes/common";
import type { HermesHome } from "./home.js";
import { GATEWAY_MIGRATIONS, PROFILE_MIGRATIONS } from "./migrations/index.js";

/**
 * The page size of a state.db this gateway creates: 16 KiB, four times SQLite's default. Every page
 * a commit changes is one WAL frame, written with two system calls and copied again by the
 * checkpoint: the room log's segments are large rows, and a 1,000-event append batch is ~25 frames
 * at 16 KiB against ~100 at 4 KiB. An existing file keeps the page size it was created with
 * (changing it rewrites the whole file: docs/OPERATIONS.md).
 */
export const STATE_DB_PAGE_SIZE = 16384;

/** The gateway's state.db, migrated; `onMigration` hears of each upgrade step (they can take seconds). */
export function openGatewayDb(home: HermesHome, busyTimeoutMs = 5000, onMigration?: (step: MigrationStep) => void): Db {
  return openDatabase(home.stateDb, {
    label: "gateway state.db",
    migrations: GATEWAY_MIGRATIONS,
    busyTimeoutMs,
    pageSize: STATE_DB_PAGE_SIZE,
    ...(onMigration ? { onMigration } : {}),
  });
}

/** Reads a value of the gateway_meta table. */
export function getMeta(db: Db, key: string): string | undefined {
  return (db.prepare("SELECT value FROM gateway_meta WHERE key = ?").get(key) as { value: string } | undefined)?.value;
}

export function setMeta(db: Db, key: string, value: string): void {
  db.prepare("INSERT INTO gateway_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value").run(key, value);
}

/** Flushes a file to disk (fs.fsync's shape): the real one, or a test's. */
export type SyncFile = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void;

/**
 * Makes the commits of one profile database durable off the event loop. The database runs at
 * synchronous=NORMAL in WAL mode: a commit writes its frames into the -wal file without an fsync,
 * and this fsyncs that file on the libuv thread pool. One fsync runs at a time; the commits made
 * while it runs wait for the next one, which covers them all (an fsync that started before a
 * commit's frames were written proves nothing about them).
 *
 * A failed fsync fails every later wait too, until the database is opened again: the kernel may
 * have dropped the unwritten pages, so a later fsync that succeeds would not prove the frames
 * before it are on disk, and a WAL frame counts only with all frames before it.
 */
class WalSync {
  private running = false;
  /** Waiting for the next fsync: their commits came after the running one started. */
  private waiting: { resolve: () => void; reject: (err: HermesError) => void }[] = [];
  private closed = false;
  /** The first failed fsync; set, nothing more is reported durable. */
  failure: HermesError | undefined;

  constructor(
    private readonly fd: number,
    private readonly sync: SyncFile,
    private readonly label: string,
    private readonly path: string,
  ) {}

  durable(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    // Closed: `close` synced the file after the last commit this handle made.
    if (this.closed) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (!this.running) this.flush();
    });
  }

  private flush(): void {
    const batch = this.waiting;
    this.waiting = [];
    this.running = true;
    this.sync(this.fd, (err) => {
      this.running = false;
      if (err) {
        this.failed(err);
        batch.push(...this.waiting);
        this.waiting = [];
      }
      if (this.closed) close(this.fd, () => {});
      else if (this.waiting.length > 0) this.flush();
      this.settle(batch);
    });
  }

  /** Before the database closes: syncs what the waiters wait for now, and closes the file once no fsync uses it. */
  close(): void {
    this.closed = true;
    const batch = this.waiting;
    this.waiting = [];
    try {
      fsyncSync(this.fd);
    } catch (err) {
      this.failed(err);
    }
    if (!this.running) closeSync(this.fd);
    this.settle(batch);
  }

  private failed(err: unknown): void {
    this.failure ??= databaseError(err, `${this.label} (the fsync of its -wal file)`, this.path);
  }

  private settle(batch: readonly { resolve: () => void; reject: (err: HermesError) => void }[]): void {
    for (const waiter of batch) this.failure ? waiter.reject(this.failure) : waiter.resolve();
  }
}

/**
 * Profile state.db handles, opened lazily and kept open; the default profile shares the root
 * database. A rename closes the handle (the folder moves) and forwards the old name to the new
 * one, so work that started under the old name (a turn held at its provider) writes into the
 * renamed profile's database. A delete, or a profile created again under a forwarded name, ends
 * both (`forget`).
 *
 * Profile databases hold transcripts only, and run at synchronous=NORMAL: a writer commits, then
 * awaits `durable` (an fsync of the -wal file off the event loop) before it reports anything. The
 * root database stays at FULL: its commits are durable when they return.
 */
export class ProfileDatabases {
  private readonly open = new Map<string, Db>();
  private readonly syncs = new WeakMap<Db, WalSync>();
  /** Former name → the name its folder was renamed to. */
  private readonly renamedTo = new Map<string, string>();

  constructor(
    private readonly home: HermesHome,
    private readonly root: Db,
    private readonly busyTimeoutMs = 5000,
    private readonly syncFile: SyncFile = fsync,
  ) {}

  get(name: string): Db {
    const profile = this.current(name);
    if (profile === "default") return this.root;
    let db = this.open.get(profile);
    if (!db) {
      const dir = this.home.profileDir(profile);
      const path = join(dir, "state.db");
      const label = `profile ${profile} state.db`;
      this.home.assertWritable(path);
      db = openDatabase(path, { label, migrations: PROFILE_MIGRATIONS, busyTimeoutMs: this.busyTimeoutMs, synchronous: "NORMAL" });
      try {
        this.syncs.set(db, new WalSync(openSyncedWal(path), this.syncFile, label, path));
      } catch (err) {
        db.close();
        throw databaseError(err, label, path);
      }
      this.open.set(profile, db);
    }
    return db;
  }

  /**
   * Resolves once every commit made to `db` (a handle `get` returned) before the call is on disk;
   * rejects with the typed failure of the fsync. The root database's commits already are.
   */
  durable(db: Db): Promise<void> {
    return this.syncs.get(db)?.durable() ?? Promise.resolve();
  }

  /** The name a profile's folder has now (follows renames; each step removes a name, so the chain ends). */
  private current(name: string): string {
    let profile = name;
    for (let next = this.renamedTo.get(profile); next !== undefined; next = this.renamedTo.get(profile)) profile = next;
    return profile;
  }

  /** Before the folder of `oldName` moves to `newName`: closes its handle and forwards the old name. */
  renamed(oldName: string, newName: string): void {
    this.close(oldName);
    this.renamedTo.delete(newName);
    this.renamedTo.set(oldName, newName);
  }

  /** Before a profile's folder is deleted, or created anew: closes its handle and ends any forward of the name. */
  forget(name: string): void {
    this.close(name);
    this.renamedTo.delete(name);
  }

  private close(profile: string): void {
    const db = this.open.get(profile);
    if (!db) return;
    this.syncs.get(db)?.close();
    db.close();
    this.open.delete(profile);
  }

  /**
   * Why writes fail now (a full disk, a failed fsync of a profile's -wal file), on the root
   * database or an open profile database; undefined while they work.
   */
  writeFailure(): HermesError | undefined {
    for (const db of [this.root, ...this.open.values()]) {
      const failure = writeFailure(db) ?? this.syncs.get(db)?.failure;
      if (failure) return failure;
    }
    return undefined;
  }

  closeAll(): void {
    for (const profile of [...this.open.keys()]) this.close(profile);
  }
}

/**
 * Opens the -wal file of a database just opened in WAL mode (it stays as long as a connection
 * is open; a checkpoint rewinds it, never replaces it), after syncing it and its folder: the
 * schema the open just migrated, and the names of the new files, are on disk before any commit
 * is reported durable by syncing that file alone.
 */
function openSyncedWal(path: string): number {
  const fd = openSync(`${path}-wal`, "r");
  try {
    fsyncSync(fd);
    const dir = openSync(dirname(path), "r");
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return fd;
}

/** One heartbeat row per hosted profile (identity-keyed: they follow renames, go with deletes), in one transaction. */
export function writeHeartbeats(
  db: Db,
  beat: { profiles: readonly string[]; gateway_id: string; pid: number; state: "running" | "stopped"; at: string },
): void {
  const upsert = statement(
    db,
    `INSERT INTO gateway_heartbeats (profile, gateway_id, pid, state, last_seen_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT(profile) DO UPDATE SET gateway_id = excluded.gateway_id, pid = excluded.pid, state = excluded.state, last_seen_at = excluded.last_seen_at`,
  );
  db.transaction(() => {
    for (const name of beat.profiles) upsert.run(name, beat.gateway_id, beat.pid, beat.state, beat.at);
  })();
}
