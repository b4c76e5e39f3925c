import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { connect } from "node:net";
import { basename, dirname, join } from "node:path";
import { HermesError } from "./pure/errors.js";

/**
 * The file-system calls writes go through. Production uses node:fs; a test passes one whose
 * `writeSync` fails with ENOSPC to play a full disk without root (or a tmpfs).
 */
export interface WriteFs {
  openSync: typeof openSync;
  writeSync: (fd: number, buffer: Uint8Array, offset: number, length: number) => number;
  fsyncSync: typeof fsyncSync;
  closeSync: typeof closeSync;
  renameSync: typeof renameSync;
  rmSync: typeof rmSync;
  mkdirSync: typeof mkdirSync;
}

export const NODE_WRITE_FS: WriteFs = { openSync, writeSync, fsyncSync, closeSync, renameSync, rmSync, mkdirSync };

/** No space left (ENOSPC), the user's quota used up (EDQUOT), or SQLite saying so (SQLITE_FULL). */
const DISK_FULL_CODES = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"]);

export function isDiskFull(err: unknown): boolean {
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  return typeof code === "string" && DISK_FULL_CODES.has(code);
}

/** The typed form of a full disk: what could not be written, and what to do. */
export function diskFullError(err: unknown, what: string, data: Record<string, unknown> = {}): HermesError {
  if (err instanceof HermesError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new HermesError("disk_full", `${what}: the disk is full (${message}); nothing was written. Free some space and try again`, {
    data,
    cause: err,
  });
}

/** Runs a write; a full disk becomes `disk_full` naming `what`, anything else is rethrown as it is. */
export function writingTo<T>(what: string, data: Record<string, unknown>, write: () => T): T {
  try {
    return write();
  } catch (err) {
    throw isDiskFull(err) ? diskFullError(err, what, data) : err;
  }
}

/**
 * Writes a file so readers see the old or the new content, never half of it: temp file in the
 * same folder, every byte written (a write may take only part of them), fsync, rename. `mode`
 * applies to the new file: private (0600) unless asked, since what Hermes writes holds keys,
 * transcripts or room messages. A full disk is `disk_full`, with nothing left behind.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600, fs: WriteFs = NODE_WRITE_FS): void {
  writingTo(`writing ${path}`, { path }, () => {
    const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    const fd = fs.openSync(tmp, "wx", mode);
    try {
      for (let done = 0; done < bytes.length; ) {
        const n = fs.writeSync(fd, bytes, done, bytes.length - done);
        // A file write that takes nothing has no room left.
        if (n <= 0) throw Object.assign(new Error(`no progress writing ${tmp}`), { code: "ENOSPC" });
        done += n;
      }
      fs.fsyncSync(fd);
    } catch (err) {
      fs.closeSync(fd);
      fs.rmSync(tmp, { force: true });
      throw err;
    }
    fs.closeSync(fd);
    try {
      fs.renameSync(tmp, path);
    } catch (err) {
      fs.rmSync(tmp, { force: true });
      throw err;
    }
  });
}

/** True when something accepts connections on the unix socket at `path` (a socket file left by a crash does not). */
export function unixSocketAnswers(path: string): Promise<boolean> {
  if (!existsSync(path)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * A daemon's control socket: refuses (already_exists, with `whoIsServing` in the message) when
 * another process answers on it, and removes a socket file a crashed process left behind.
 */
export async function claimUnixSocket(path: string, whoIsServing: string): Promise<void> {
  if (await unixSocketAnswers(path)) {
    throw new HermesError("already_exists", `${whoIsServing} (its control socket ${path} answers); stop it first`);
  }
  rmSync(path, { force: true });
}

/**
 * The umask a daemon (gateway, relay) runs with: whatever it or SQLite creates (databases, -wal,
 * -shm, sockets, temp files) is private to its user from the first byte.
 */
export const DAEMON_UMASK = 0o077;

/** Sets up the process a daemon (gateway, relay) runs in: DAEMON_UMASK, and output that can go away. */
export function becomeDaemon(): void {
  process.umask(DAEMON_UMASK);
  keepRunningWithoutOutput();
}

/**
 * A long-running command started as `hermes gateway start | head -1`, or whose log collector died,
 * must keep going: a write to a closed stdout or stderr (EPIPE), or to a full disk, raises an error
 * on the stream that would otherwise end the process. Those lines are lost; there is nowhere left
 * to say so.
 */
export function keepRunningWithoutOutput(): void {
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
}

/** Group and other permission bits that let another user read or change a file or list a folder. */
const SHARED_BITS = 0o066;

/**
 * A SQLite database and its companions made private (0600): the database file is created so if
 * missing, and it, its -wal and its -shm lose any group/other access they have. SQLite creates a
 * later -wal or -shm with the mode of the database file, so they stay private too.
 */
export function makeDatabaseFilesPrivate(path: string): void {
  closeSync(openSync(path, "a", 0o600));
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    if (existsSync(file) && (statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  }
}

/**
 * The start-up warning for a home or data folder other users can read or write (a folder made
 * with plain `mkdir` is 0755), or undefined when it is private.
 */
export function sharedFolderWarning(dir: string, what: string): string | undefined {
  const mode = statSync(dir).mode & 0o777;
  if ((mode & SHARED_BITS) === 0) return undefined;
  return `${what} ${dir} is open to other users (mode ${mode.toString(8).padStart(4, "0")}): they can list it and read any file in it that is not 0600; run: chmod 700 ${dir}`;
}
