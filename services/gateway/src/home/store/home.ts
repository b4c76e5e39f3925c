import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { envValue, HermesError, NODE_WRITE_FS, type WriteFs, writeFileAtomic, writingTo } from "@hermes/common/client";
import { DEFAULT_PROFILE, isValidProfileName } from "@hermes/contract";

/** Files whose presence marks a profile directory as a real profile (not a stray folder). */
const PROFILE_MARKERS = ["config.yaml", "profile.yaml", ".env", "state.db", "SOUL.md"];
/** Hidden folders under profiles/ where a profile is assembled before it appears under its name. */
const STAGING_PREFIX = ".staging-";
/** A staging folder older than this was left by a crash (a create takes milliseconds): removed. */
const STALE_STAGING_MS = 10 * 60_000;

/** HERMES_HOME, else ~/.hermes (a blank HERMES_HOME is not set: never the current folder). */
export function defaultHomePath(): string {
  return envValue(process.env, "HERMES_HOME") ?? join(homedir(), ".hermes");
}

/**
 * The HERMES_HOME layout (home/README.md) and the single gate for writes
 * under it: every directory creation and file write goes through `mkdir`/`writeFile`/`writeJson`,
 * which refuse to (re)create anything inside a deleted or missing named profile (the tombstone
 * guard). A full disk is `disk_full`.
 */
export class HermesHome {
  readonly root: string;
  // The layout's paths, joined once: every turn and delivery asks for several.
  readonly profilesDir: string;
  readonly tombstonesDir: string;
  readonly stateDb: string;
  readonly controlSocket: string;
  readonly configFile: string;
  readonly envFile: string;
  readonly gatewayIdFile: string;

  /** `fs` is the file-system seam writes go through (a test plays a full disk with it). */
  constructor(
    root: string,
    private readonly fs: WriteFs = NODE_WRITE_FS,
  ) {
    this.root = resolve(root);
    this.profilesDir = join(this.root, "profiles");
    this.tombstonesDir = join(this.profilesDir, ".deleted");
    this.stateDb = join(this.root, "state.db");
    this.controlSocket = join(this.root, "gateway.sock");
    this.configFile = join(this.root, "config.yaml");
    this.envFile = join(this.root, ".env");
    this.gatewayIdFile = join(this.root, "gateway_id");
  }

  /** The default profile is HERMES_HOME itself; named profiles live under profiles/<name>. */
  profileDir(name: string): string {
    return name === DEFAULT_PROFILE ? this.root : join(this.profilesDir, name);
  }

  tombstonePath(name: string): string {
    return join(this.tombstonesDir, name);
  }

  isTombstoned(name: string): boolean {
    return existsSync(this.tombstonePath(name));
  }

  /**
   * A directory with at least one profile marker file and no tombstone. Checked on the disk each
   * time (every turn and delivery asks), so a folder removed or tombstoned by hand is seen at once;
   * one stat answers both "is it there" and "is it a directory".
   */
  isLiveProfile(name: string): boolean {
    if (name === DEFAULT_PROFILE) return true;
    if (this.isTombstoned(name)) return false;
    const dir = this.profileDir(name);
    if (statSync(dir, { throwIfNoEntry: false })?.isDirectory() !== true) return false;
    return PROFILE_MARKERS.some((m) => existsSync(join(dir, m)));
  }

  /**
   * The named profile a path lies in, if any: `<root>/profiles/<name>/…` with a valid, non-hidden
   * name. The default home, hidden staging dirs (`profiles/.staging`) and paths outside the home
   * that merely contain "profiles" have none.
   */
  owningProfile(path: string): string | undefined {
    const rel = relative(this.root, resolve(path));
    if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) return undefined;
    const [first, second] = rel.split(sep);
    if (first !== "profiles" || second === undefined || !isValidProfileName(second)) return undefined;
    return second;
  }

  /** The tombstone guard: throws profile_deleted when `path` lies in a deleted or missing profile. */
  assertWritable(path: string): void {
    const name = this.owningProfile(path);
    if (name === undefined) return;
    if (this.isTombstoned(name) || !existsSync(this.profileDir(name))) {
      throw new HermesError(
        "profile_deleted",
        `profile ${name} was deleted or does not exist: refusing to write ${path}. Create it explicitly first: hermes profile create ${name}`,
        { data: { profile: name, path, code: "ENOENT" } },
      );
    }
  }

  // Private by default: a home holds keys (config.yaml, .env), transcripts and room messages.
  mkdir(path: string, mode = 0o700): void {
    this.assertWritable(path);
    this.makeDir(path, mode);
  }

  writeFile(path: string, data: string | Uint8Array, mode = 0o600): void {
    this.assertWritable(path);
    this.makeDir(dirname(path));
    writeFileAtomic(path, data, mode, this.fs);
  }

  private makeDir(path: string, mode = 0o700): void {
    writingTo(`creating ${path}`, { path }, () => this.fs.mkdirSync(path, { recursive: true, mode }));
  }

  writeJson(path: string, value: unknown, mode = 0o600): void {
    this.writeFile(path, `${JSON.stringify(value, null, 2)}\n`, mode);
  }

  /**
   * A new, empty, hidden folder under profiles/ to assemble profile `name` in (ignored by
   * everything that lists profiles; `publishProfileDir` moves it into place). Leftovers of a crash
   * are removed here first.
   */
  stageProfileDir(name: string, now = Date.now()): string {
    this.removeStaleStaging(now);
    const dir = join(this.profilesDir, `${STAGING_PREFIX}${name}-${randomBytes(6).toString("hex")}`);
    this.makeDir(dir, 0o700);
    return dir;
  }

  /**
   * The one way a named profile directory appears: the staged folder is renamed into place
   * in one step, so the name is either a whole profile or absent. A tombstoned name's leftovers go
   * first, and its tombstone after.
   */
  publishProfileDir(staged: string, name: string): string {
    const dir = this.profileDir(name);
    if (this.isTombstoned(name)) rmSync(dir, { recursive: true, force: true });
    this.fs.renameSync(staged, dir);
    rmSync(this.tombstonePath(name), { force: true });
    return dir;
  }

  /** Staging folders a crashed create left behind (older than a create could take). */
  private removeStaleStaging(now: number): void {
    if (!existsSync(this.profilesDir)) return;
    for (const entry of readdirSync(this.profilesDir)) {
      if (!entry.startsWith(STAGING_PREFIX)) continue;
      const path = join(this.profilesDir, entry);
      if (now - statSync(path).mtimeMs > STALE_STAGING_MS) rmSync(path, { recursive: true, force: true });
    }
  }

  writeTombstone(name: string): string {
    this.makeDir(this.tombstonesDir, 0o700);
    const path = this.tombstonePath(name);
    writeFileAtomic(path, "deleted\n", 0o644, this.fs);
    return path;
  }

  /** Creates the home itself (the default profile) if needed. */
  ensureRoot(): void {
    this.makeDir(this.root, 0o700);
    this.makeDir(this.profilesDir, 0o700);
  }
}
