import { join } from "node:path";
import { type Db, type HermesError, type MigrationStep, openDatabase, statement, writeFailure } from "@hermes/common";
import type { HermesHome } from "./home.js";
import { GATEWAY_MIGRATIONS, PROFILE_MIGRATIONS } from "./migrations/index.js";

/** The gateway's state.db, migrated; `onMigration` hears of each upgrade step (they can take seconds). */
export function openGatewayDb(home: HermesHome, busyTimeoutMs = 5000, onMigration?: (step: MigrationStep) => void): Db {
  return openDatabase(home.stateDb, {
    label: "gateway state.db",
    migrations: GATEWAY_MIGRATIONS,
    busyTimeoutMs,
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

/**
 * Profile state.db handles, opened lazily and kept open; the default profile shares the root
 * database. A rename closes the handle (the folder moves) and forwards the old name to the new
 * one, so work that started under the old name (a turn held at its provider) writes into the
 * renamed profile's database. A delete, or a profile created again under a forwarded name, ends
 * both (`forget`).
 */
export class ProfileDatabases {
  private readonly open = new Map<string, Db>();
  /** Former name → the name its folder was renamed to. */
  private readonly renamedTo = new Map<string, string>();

  constructor(
    private readonly home: HermesHome,
    private readonly root: Db,
    private readonly busyTimeoutMs = 5000,
  ) {}

  get(name: string): Db {
    const profile = this.current(name);
    if (profile === "default") return this.root;
    let db = this.open.get(profile);
    if (!db) {
      const dir = this.home.profileDir(profile);
      this.home.assertWritable(join(dir, "state.db"));
      db = openDatabase(join(dir, "state.db"), {
        label: `profile ${profile} state.db`,
        migrations: PROFILE_MIGRATIONS,
        busyTimeoutMs: this.busyTimeoutMs,
      });
      this.open.set(profile, db);
    }
    return db;
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
    this.open.get(profile)?.close();
    this.open.delete(profile);
  }

  /** Why writes fail now (a full disk), on the root database or an open profile database; undefined while they work. */
  writeFailure(): HermesError | undefined {
    for (const db of [this.root, ...this.open.values()]) {
      const failure = writeFailure(db);
      if (failure) return failure;
    }
    return undefined;
  }

  closeAll(): void {
    for (const db of this.open.values()) db.close();
    this.open.clear();
  }
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
