import { join } from "node:path";
import { type Db, openDatabase } from "@hermes/common";
import type { HermesHome } from "../app/home.js";
import { GATEWAY_MIGRATIONS, PROFILE_MIGRATIONS } from "./migrations/index.js";

export function openGatewayDb(home: HermesHome, busyTimeoutMs = 5000): Db {
  return openDatabase(home.stateDb, { label: "gateway state.db", migrations: GATEWAY_MIGRATIONS, busyTimeoutMs });
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
 * database. Closing one (before a rename moves or a delete removes its folder) is explicit.
 */
export class ProfileDatabases {
  private readonly open = new Map<string, Db>();

  constructor(
    private readonly home: HermesHome,
    private readonly root: Db,
    private readonly busyTimeoutMs = 5000,
  ) {}

  get(profile: string): Db {
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

  close(profile: string): void {
    this.open.get(profile)?.close();
    this.open.delete(profile);
  }

  closeAll(): void {
    for (const db of this.open.values()) db.close();
    this.open.clear();
  }
}
