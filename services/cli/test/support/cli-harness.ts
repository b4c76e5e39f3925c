import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { type DaemonProcess, HERMES_BIN, startGatewayProcess as startDaemonProcess } from "../../../../test/support/daemons.js";

/** The BUILT command, exactly what `npx hermes` runs. */
export { HERMES_BIN };

const HERMES_DIST = fileURLToPath(new URL("../../dist/main.js", import.meta.url));

/** A key long enough for `gateway.api_key` (16+ characters). */
export const TEST_KEY = "cli-test-key-0123456789abcdef";

/** The profile name rule the CLI must state when it refuses a name. */
export const NAME_RULE = "^[a-z0-9][a-z0-9_-]{0,63}$";

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function assertBuilt(): void {
  if (!existsSync(HERMES_DIST)) throw new Error(`${HERMES_DIST} is missing: run \`npm run build\` first (these tests run the built CLI)`);
}

/**
 * The environment a CLI subprocess sees: the test runner's, minus everything that would point it at
 * another home, gateway or key, with quiet logs. Each test adds what it means to test.
 */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith("HERMES_") || name === "API_SERVER_KEY") delete env[name];
  }
  return { ...env, HERMES_LOG_LEVEL: "warn", NO_COLOR: "1", ...extra };
}

export interface RunOptions {
  home?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  /** The folder the command runs in (default: the test runner's). */
  cwd?: string;
  /** Piped to the command's stdin (dm and run read their message there); without it stdin is closed empty. */
  input?: string;
}

/**
 * Runs `hermes ARGS…` as a subprocess (argv array, no shell) with stdin a pipe (closed at once, or after `input`), so it has no TTY.
 * Resolves with the exit code and output; never rejects on a non-zero exit.
 */
export function hermes(args: string[], options: RunOptions = {}): Promise<CliResult> {
  const env = cleanEnv({ ...(options.home ? { HERMES_HOME: options.home } : {}), ...options.env });
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [HERMES_BIN, ...args],
      { env, timeout: options.timeoutMs ?? 30_000, maxBuffer: 16 * 1024 * 1024, ...(options.cwd ? { cwd: options.cwd } : {}) },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== "number") {
          reject(new Error(`hermes ${args.join(" ")} did not exit normally (${err.message}); stderr: ${stderr}`));
          return;
        }
        resolve({ code: err ? Number(err.code) : 0, stdout, stderr });
      },
    );
    child.stdin?.end(options.input ?? "");
  });
}

/** A fresh temporary HERMES_HOME (short path: the control socket must fit in sun_path). */
export function tempHome(prefix = "hcli-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeHome(home: string): void {
  rmSync(home, { recursive: true, force: true });
}

/** sha256 of a file's bytes. */
export function fileHash(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** Every file under `dir` (relative path → sha256), for "nothing changed" checks. */
export function treeSnapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p)] = fileHash(p);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

/** The identity-keyed tables (identity/core/registry.ts), as plain rows, for before/after comparisons. */
export const IDENTITY_TABLES = ["sessions", "gateway_routing", "gateway_heartbeats", "delivery_obligations", "profile_aliases"] as const;

/** Runs `fn` on a connection to `path` (read-only unless asked), closing it afterwards. */
export function withDb<T>(path: string, fn: (db: Database.Database) => T, options: { write?: boolean } = {}): T {
  const db = new Database(path, { readonly: !options.write, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** Every row of the identity tables, each table in the order of its first (unique) column: sessions and gateway_routing are views, without a rowid. */
export function identityRows(stateDb: string): Record<string, unknown[]> {
  return withDb(stateDb, (db) => Object.fromEntries(IDENTITY_TABLES.map((t) => [t, db.prepare(`SELECT * FROM ${t} ORDER BY 1`).all()])));
}

/** Rows anywhere in the identity tables that still carry `name` (as a value, key prefix or JSON field). */
export function rowsMentioning(stateDb: string, name: string): Record<string, number> {
  return withDb(stateDb, (db) => {
    const count = (sql: string, ...params: string[]) => (db.prepare(sql).get(...params) as { n: number }).n;
    const prefix = `agent:${name}:%`;
    const counts: Record<string, number> = {
      sessions: count(
        "SELECT count(*) AS n FROM sessions WHERE profile_name = ? OR session_key LIKE ? OR json_extract(origin_json, '$.profile') = ?",
        name,
        prefix,
        name,
      ),
      gateway_routing: count(
        "SELECT count(*) AS n FROM gateway_routing WHERE routing_key LIKE ? OR json_extract(entry_json, '$.session_key') LIKE ? OR json_extract(entry_json, '$.origin.profile') = ?",
        prefix,
        prefix,
        name,
      ),
      gateway_heartbeats: count("SELECT count(*) AS n FROM gateway_heartbeats WHERE profile = ?", name),
      delivery_obligations: count(
        "SELECT count(*) AS n FROM delivery_obligations WHERE (adapter_profile = ? OR session_key LIKE ?) AND state != 'abandoned'",
        name,
        prefix,
      ),
    };
    return Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0));
  });
}

/** A gateway running as a subprocess (`hermes gateway start`), with the fields of its ready line. */
export interface GatewayProcess extends DaemonProcess {
  home: string;
  id: string;
  control: string;
}

/** Starts `hermes gateway start` on ephemeral ports in a clean environment and waits for its ready line. */
export async function startGatewayProcess(home: string, env: Record<string, string> = {}, timeoutMs = 20_000): Promise<GatewayProcess> {
  const daemon = await startDaemonProcess(home, { env: cleanEnv(env) as Record<string, string>, isolatedEnv: true, timeoutMs });
  return { ...daemon, home, id: daemon.ready.id!, control: daemon.ready.control! };
}

/**
 * Holds a write lock on a SQLite file from this (test) process: `BEGIN EXCLUSIVE` on a separate
 * connection, the way a stuck writer would. Release commits and closes.
 */
export function holdWriteLock(path: string): { release(): void } {
  const db = new Database(path, { fileMustExist: true });
  db.exec("BEGIN EXCLUSIVE");
  return {
    release() {
      if (db.inTransaction) db.exec("COMMIT");
      db.close();
    },
  };
}
