import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, openSync, statfsSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

/**
 * Probes of the disk under HERMES_HOME for `hermes check`: how long a small durable write takes
 * (what every acknowledged send waits for) and how much space is left.
 */

const PROBE_BYTES = 4096;

/** Milliseconds to create, write, fsync and remove a 4 KiB file in `dir`; throws what the file system said. */
export function probeFsyncMs(dir: string): number {
  const file = join(dir, `.hermes-fsync-probe-${randomBytes(6).toString("hex")}`);
  const started = performance.now();
  const fd = openSync(file, "wx", 0o600);
  try {
    writeSync(fd, Buffer.alloc(PROBE_BYTES, 0x68));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
    unlinkSync(file);
  }
  return performance.now() - started;
}

/** Free (available to this user) and total bytes of the file system holding `dir`. */
export function diskSpace(dir: string): { free_bytes: number; total_bytes: number } {
  const s = statfsSync(dir);
  return { free_bytes: s.bavail * s.bsize, total_bytes: s.blocks * s.bsize };
}
