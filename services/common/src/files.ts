import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { connect } from "node:net";
import { basename, dirname, join } from "node:path";
import { HermesError } from "./errors.js";

/**
 * Writes a file so readers see the old or the new content, never half of it: temp file in the
 * same folder, fsync, rename. `mode` applies to the new file: private (0600) unless asked, since
 * what Hermes writes holds keys, transcripts or room messages.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): void {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const fd = openSync(tmp, "wx", mode);
  try {
    writeSync(fd, typeof data === "string" ? Buffer.from(data) : data);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  try {
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
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
