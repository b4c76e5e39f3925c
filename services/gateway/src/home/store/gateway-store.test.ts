import { fsync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, HermesError } from "@hermes/common";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TranscriptStore } from "../../identity/store/sessions-store.js";
import { openGatewayDb, ProfileDatabases, STATE_DB_PAGE_SIZE, type SyncFile } from "./gateway-store.js";
import { HermesHome } from "./home.js";

/**
 * Profile databases commit at synchronous=NORMAL and are made durable by an fsync of their -wal
 * file off the event loop: a waiter resolves only after an fsync that started after its commit,
 * concurrent waiters share one, a failed fsync is a typed error for each of them.
 */

let root: string;
let rootDb: Db;
let dbs: ProfileDatabases;
/** The fsyncs asked for, in order; each runs when the test calls its `finish` (resolved once it reported). */
let held: { finish: (err?: NodeJS.ErrnoException) => Promise<void> }[];

const holdingSync: SyncFile = (fd, done) => {
  let finished: Promise<void> | undefined;
  const finish = (err?: NodeJS.ErrnoException) => {
    finished ??= new Promise<void>((reported) =>
      fsync(fd, (real) => {
        done(err ?? real);
        reported();
      }),
    );
    return finished;
  };
  held.push({ finish });
};

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "hermes-walsync-"));
  const home = new HermesHome(root);
  home.ensureRoot();
  mkdirSync(home.profileDir("alice"), { recursive: true });
  rootDb = openGatewayDb(home);
  held = [];
  dbs = new ProfileDatabases(home, rootDb, 5000, holdingSync);
});
afterEach(async () => {
  for (const sync of held) await sync.finish();
  dbs.closeAll();
  rootDb.close();
  rmSync(root, { recursive: true, force: true });
});

function append(db: Db, text: string): void {
  new TranscriptStore(db).append("ses_1", [{ role: "user", content: text, meta: {}, created_at: "2026-12-02T00:00:00.000Z" }]);
}

/** The promise's state after the event loop had a turn. */
async function state(p: Promise<unknown>): Promise<"pending" | "resolved" | "rejected"> {
  let s: "pending" | "resolved" | "rejected" = "pending";
  p.then(
    () => (s = "resolved"),
    () => (s = "rejected"),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return s;
}

describe("profile database durability", () => {
  it("runs profile databases at NORMAL and the root one at FULL", () => {
    expect(dbs.get("alice").pragma("synchronous", { simple: true })).toBe(1);
    expect(rootDb.pragma("synchronous", { simple: true })).toBe(2);
    expect(dbs.get("default")).toBe(rootDb);
  });

  it("resolves a commit's wait only when the fsync of its -wal file finished", async () => {
    const db = dbs.get("alice");
    append(db, "one");
    const durable = dbs.durable(db);
    expect(held).toHaveLength(1);
    expect(await state(durable)).toBe("pending");
    await held[0]!.finish();
    expect(await state(durable)).toBe("resolved");
  });

  it("makes the waiters that came during an fsync wait for the next one, and share it", async () => {
    const db = dbs.get("alice");
    append(db, "one");
    const first = dbs.durable(db);
    expect(held).toHaveLength(1);
    // The fsync is under way: it may have started before these commits, so they wait for the next one.
    append(db, "two");
    const second = dbs.durable(db);
    append(db, "three");
    const third = dbs.durable(db);
    expect(held).toHaveLength(1);
    await held[0]!.finish();
    expect(await state(first)).toBe("resolved");
    expect(await state(second)).toBe("pending");
    expect(await state(third)).toBe("pending");
    expect(held).toHaveLength(2);
    await held[1]!.finish();
    expect(await state(second)).toBe("resolved");
    expect(await state(third)).toBe("resolved");
    expect(held).toHaveLength(2);
  });

  it("resolves at once for the root database, whose commits are durable when they return", async () => {
    expect(await state(dbs.durable(rootDb))).toBe("resolved");
    expect(held).toHaveLength(0);
  });

  it("fails the waiters of a failed fsync with a typed error, and every later wait until the database is opened again", async () => {
    const db = dbs.get("alice");
    append(db, "one");
    const first = dbs.durable(db);
    append(db, "two");
    const during = dbs.durable(db);
    await held[0]!.finish(Object.assign(new Error("ENOSPC: no space left on device, fsync"), { code: "ENOSPC" }));
    await expect(first).rejects.toMatchObject({ reason: "disk_full" });
    // The next fsync may succeed with pages the kernel dropped: it proves nothing.
    await expect(during).rejects.toMatchObject({ reason: "disk_full" });
    append(db, "three");
    await expect(dbs.durable(db)).rejects.toMatchObject({ reason: "disk_full" });
    expect(dbs.writeFailure()?.message).toContain(join(root, "profiles", "alice", "state.db"));
    // Opened again (a restart, here a forget): its waits are fsynced again.
    dbs.forget("alice");
    expect(dbs.writeFailure()).toBeUndefined();
    const reopened = dbs.get("alice");
    append(reopened, "four");
    const after = dbs.durable(reopened);
    await held.at(-1)!.finish();
    await expect(after).resolves.toBeUndefined();
  });

  it("names the database in the error of a failed fsync", async () => {
    const db = dbs.get("alice");
    append(db, "one");
    const io = dbs.durable(db);
    await held[0]!.finish(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
    const err = await io.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(HermesError);
    expect((err as HermesError).message).toContain(join(root, "profiles", "alice", "state.db"));
  });

  it("syncs at close what still waits, and closes the file only after the fsync under way", async () => {
    const db = dbs.get("alice");
    append(db, "one");
    const running = dbs.durable(db);
    append(db, "two");
    const waiting = dbs.durable(db);
    dbs.forget("alice");
    expect(await state(waiting)).toBe("resolved");
    expect(await state(running)).toBe("pending");
    await held[0]!.finish();
    expect(await state(running)).toBe("resolved");
    expect(held).toHaveLength(1);
  });
});

describe("state.db page size", () => {
  it("a new state.db has 16 KiB pages", () => {
    expect(STATE_DB_PAGE_SIZE).toBe(16384);
    expect(rootDb.pragma("page_size", { simple: true })).toBe(STATE_DB_PAGE_SIZE);
  });

  it("a file created with SQLite's 4 KiB pages keeps them and is migrated as it is", () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-pagesize-"));
    try {
      const home = new HermesHome(dir);
      home.ensureRoot();
      const old = new Database(home.stateDb);
      old.pragma("journal_mode = WAL");
      expect(old.pragma("page_size", { simple: true })).toBe(4096);
      old.close();
      const db = openGatewayDb(home);
      expect(db.pragma("page_size", { simple: true })).toBe(4096);
      expect(db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'room_log_segments'").get()).toEqual({ n: 1 });
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
