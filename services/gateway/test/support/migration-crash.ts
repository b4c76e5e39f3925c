import { spawn } from "node:child_process";
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));

/**
 * kill -9 in the middle of a storage migration: a child process opens `path` as the gateway does
 * (WAL, synchronous=FULL, foreign keys on, and a small page cache so the migration's pages spill
 * into the WAL early) and runs the BUILT migrations. `hook` is child code that runs first: it wraps
 * something of `db` and calls `stop()` at the step where the kill should land, inside the
 * migration's transaction (`arg` is its one argument, as text). The child is killed the moment it
 * says so; resolves with what it said, the signal, and the WAL's size at the kill (proof the
 * migration had written).
 */
export function killDuringMigration(
  path: string,
  hook: string,
  arg: string,
): Promise<{ said: string; signal: NodeJS.Signals | null; walBytes: number }> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", childScript(hook), path, arg], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let said = "";
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  return new Promise((resolve, reject) => {
    let walBytes = 0;
    child.stdout.on("data", (d) => {
      said += d;
      if (said.includes("MIGRATING")) {
        walBytes = statSync(`${path}-wal`).size;
        child.kill("SIGKILL");
      }
    });
    child.once("exit", (_code, signal) =>
      said === "" ? reject(new Error(`the child said nothing: ${stderr}`)) : resolve({ said, signal, walBytes }),
    );
  });
}

function childScript(hook: string): string {
  return `
import Database from "better-sqlite3";
const [path, arg] = process.argv.slice(1);
const { migrate } = await import(${JSON.stringify(`${ROOT}services/common/dist/index.js`)});
const { GATEWAY_MIGRATIONS } = await import(${JSON.stringify(`${ROOT}services/gateway/dist/home/store/migrations/index.js`)});
const db = new Database(path);
db.pragma("journal_mode = WAL");
db.pragma("synchronous = FULL");
db.pragma("foreign_keys = ON");
db.pragma("cache_size = -256");
/** Says MIGRATING and waits for the kill. */
const stop = () => {
  process.stdout.write("MIGRATING\\n");
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 120_000);
};
${hook}
migrate(db, GATEWAY_MIGRATIONS, "state.db", path);
process.stdout.write("DONE\\n");
`;
}
