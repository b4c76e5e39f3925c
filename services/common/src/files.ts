import { randomBytes } from "node:crypto";
import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { connect } from "node:net";
import { basename, dirname, join } from "node:path";
import { HermesError } from "./errors.js";

/**
 * Writes a file so readers see the old or the new content, never half of it: temp file in the
 * same folder, fsync, rename. `mode` applies to the new file (0o600 for secrets).
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): void {
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
