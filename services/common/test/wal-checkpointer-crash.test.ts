import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";

/**
 * kill -9 a process while it commits at synchronous=FULL and its checkpointer copies the WAL into
 * the database file every millisecond (so a kill lands inside a checkpoint often): after each
 * kill the file opens, passes SQLite's integrity check, and holds every row whose commit the
 * process reported, once. Runs the built @hermes/common.
 */

const COMMON = pathToFileURL(fileURLToPath(new URL("../dist/index.js", import.meta.url))).href;

// The writer: reports each committed id on stdout once its transaction returned; with `until`,
// it stops writing there and ends without stopping the checkpointer.
const WRITER = `
const { openDatabase, WalCheckpointer } = await import(${JSON.stringify(COMMON)});
const [path, from, until] = process.argv.slice(1);
const db = openDatabase(path, {
  label: "crash.db",
  migrations: [{ version: 1, name: "t", up: (db) => db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)") }],
});
// A checkpointer that fails (or whose worker does not start) ends the writer: the test sees it.
new WalCheckpointer(db, { pace: { targetFrames: 50, minMs: 1, maxMs: 1 }, onFailure: (message) => { process.stderr.write(message + "\\n"); process.exit(3); } });
const insert = db.prepare("INSERT INTO t (id, body) VALUES (?, ?)");
const commit = db.transaction((first) => { for (let i = first; i < first + 10; i++) insert.run(i, Buffer.alloc(1000, i % 251)); });
for (let id = Number(from); until === undefined || id < Number(until); id += 10) {
  commit(id);
  process.stdout.write(id + 9 + "\\n");
  if (id % 200 === 0) await new Promise((resolve) => setImmediate(resolve));
}
`;

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the writer from `from` until it reported `count` commits after its first, then kill -9; the last id it reported. */
async function writeThenKill(path: string, from: number, count: number): Promise<number> {
  const child: ChildProcess = spawn(process.execPath, ["--input-type=module", "-e", WRITER, path, String(from)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let last = from - 1;
  let seen = 0;
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code, signal) => (signal === "SIGKILL" ? resolve() : reject(new Error(`writer exited ${code}`))));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      last = Number(line);
      if (++seen === count) child.kill("SIGKILL");
    });
  });
  return last;
}

describe("WalCheckpointer under kill -9", () => {
  it("loses no reported commit and leaves a sound file, kill after kill", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-ckpt-crash-"));
    dirs.push(dir);
    const path = join(dir, "crash.db");
    let next = 0;
    for (const count of [700, 1500, 3000]) {
      const reported = await writeThenKill(path, next, count);
      // The checkpointer ran: the database file holds pages that the writer's own checkpoint would
      // copy only at 16 MB of WAL (about 7 MB were written by the first kill).
      if (next === 0) expect(statSync(path).size).toBeGreaterThan(2_000_000);
      const db = new Database(path);
      expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
      const { n, max } = db.prepare("SELECT count(*) AS n, max(id) AS max FROM t").get() as { n: number; max: number };
      // Every reported commit is there; a commit the kill interrupted before its report may be too.
      expect(max).toBeGreaterThanOrEqual(reported);
      expect(n).toBe(max + 1);
      db.close();
      next = max + 1;
    }
  });

  it("does not hold a process that ends without stopping it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-ckpt-exit-"));
    dirs.push(dir);
    const child = spawn(process.execPath, ["--input-type=module", "-e", WRITER, join(dir, "exit.db"), "0", "2000"], { stdio: "ignore" });
    // A writer the worker held would never exit: the test's own timeout ends the wait.
    const [code] = await once(child, "exit");
    expect(code).toBe(0);
  });
});
