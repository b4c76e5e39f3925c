import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import { type Db, openDatabase } from "./sqlite.js";
import { type CheckpointReport, WalCheckpointer } from "./wal-checkpointer.js";

/** A checkpoint every few milliseconds, whatever the writer does. */
const FAST = { targetFrames: 1000, minMs: 1, maxMs: 5 };

const migrations = [{ version: 1, name: "t", up: (db: Db) => db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)") }];

describe("WalCheckpointer", () => {
  let dir: string;
  let db: Db;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "hermes-ckpt-"));
    db = openDatabase(join(dir, "state.db"), { label: "state.db", migrations });
  });
  afterEach(() => {
    if (db.open) db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const insertRows = (count: number, from = 0) => {
    const insert = db.prepare("INSERT INTO t (id, body) VALUES (?, ?)");
    db.transaction(() => {
      for (let i = from; i < from + count; i++) insert.run(i, Buffer.alloc(1000, i % 251));
    })();
  };

  it("copies committed frames into the database file while the writer's own checkpoint waits for the backstop", async () => {
    const reports: CheckpointReport[] = [];
    const checkpointer = new WalCheckpointer(db, { pace: FAST, onCheckpoint: (r) => reports.push(r) });
    // 4,096 pages of 4 KiB (the test's file has SQLite's default page).
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(4096);
    const before = statSync(join(dir, "state.db")).size;
    // ~2,000 pages: past SQLite's default of 1,000, below the backstop: only the worker copies them.
    for (let i = 0; i < 8; i++) insertRows(1000, i * 1000);
    await eventually(() => reports.some((r) => r.checkpointed === r.log && r.log > 1000));
    expect(statSync(join(dir, "state.db")).size).toBeGreaterThan(before + 4_000_000);
    // A fresh connection reads every row from the database file and the WAL alike.
    const reader = new Database(join(dir, "state.db"), { readonly: true });
    expect(reader.prepare("SELECT count(*) AS n, sum(length(body)) AS bytes FROM t").get()).toEqual({ n: 8000, bytes: 8_000_000 });
    reader.close();
    await checkpointer.stop();
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
  });

  it("a WAL copied whole between commits starts over from its beginning instead of growing", async () => {
    const reports: CheckpointReport[] = [];
    const checkpointer = new WalCheckpointer(db, { pace: FAST, onCheckpoint: (r) => reports.push(r) });
    for (let i = 0; i < 40; i++) {
      const seen = reports.length;
      insertRows(250, i * 250);
      await eventually(() => reports.slice(seen).some((r) => r.checkpointed === r.log), { intervalMs: 5 });
    }
    // 10 MB were written, below the backstop: without the worker the WAL would hold all of them.
    expect(statSync(join(dir, "state.db-wal")).size).toBeLessThan(1_000_000);
    expect(db.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 10_000 });
    await checkpointer.stop();
  });

  it("after stop the writer checkpoints for itself and closes the database as without it (the WAL removed)", async () => {
    const checkpointer = new WalCheckpointer(db, { pace: FAST });
    insertRows(100);
    await checkpointer.stop();
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
    db.close();
    expect(() => statSync(join(dir, "state.db-wal"))).toThrow();
    const again = new Database(join(dir, "state.db"), { readonly: true });
    expect(again.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 100 });
    again.close();
  });

  it("a file with larger pages keeps the same WAL sizes in bytes: the backstop and the writer's own pace in fewer pages", async () => {
    const large = openDatabase(join(dir, "large.db"), { label: "large.db", migrations, pageSize: 16384 });
    expect(large.pragma("page_size", { simple: true })).toBe(16384);
    const checkpointer = new WalCheckpointer(large, { pace: FAST });
    expect(large.pragma("wal_autocheckpoint", { simple: true })).toBe(1024);
    await checkpointer.stop();
    expect(large.pragma("wal_autocheckpoint", { simple: true })).toBe(250);
    large.close();
    // Reopened with another page size asked for, an existing file keeps its own.
    const again = openDatabase(join(dir, "large.db"), { label: "large.db", migrations, pageSize: 4096 });
    expect(again.pragma("page_size", { simple: true })).toBe(16384);
    again.close();
  });

  it("a worker that dies gives checkpoints back to the writer and says so", async () => {
    const failures: string[] = [];
    const checkpointer = new WalCheckpointer(db, { pace: FAST, onFailure: (m) => failures.push(m) });
    // What a crash of the worker's thread looks like from here.
    await (checkpointer as unknown as { worker: import("node:worker_threads").Worker }).worker.terminate();
    await eventually(() => failures.length > 0);
    expect(failures[0]).toMatch(/checkpoint worker stopped/);
    expect(db.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
    await checkpointer.stop();
  });
});
