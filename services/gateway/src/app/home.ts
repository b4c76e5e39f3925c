import { existsSync, mkdirSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { DEFAULT_PROFILE, HermesError, isValidProfileName, writeFileAtomic } from "@hermes/common/client";
import { stringify as toYaml } from "yaml";

/** Files whose presence marks a profile directory as a real profile (not a stray folder). */
const PROFILE_MARKERS = ["config.yaml", "profile.yaml", ".env", "state.db", "SOUL.md"];

export function defaultHomePath(): string {
  return process.env.HERMES_HOME ?? join(homedir(), ".hermes");
}

/**
 * The HERMES_HOME layout of §2 and the single gate for writes under it: every directory creation
 * and file write goes through `mkdir`/`writeFile`/`writeYaml`, which refuse to (re)create anything
 * inside a deleted or missing named profile (the tombstone guard).
 */
export class HermesHome {
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  get profilesDir(): string {
    return join(this.root, "profiles");
  }
  get tombstonesDir(): string {
    return join(this.profilesDir, ".deleted");
  }
  get stateDb(): string {
    return join(this.root, "state.db");
  }
  get controlSocket(): string {
    return join(this.root, "gateway.sock");
  }
  get configFile(): string {
    return join(this.root, "config.yaml");
  }
  get envFile(): string {
    return join(this.root, ".env");
  }
  get gatewayIdFile(): string {
    return join(this.root, "gateway_id");
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

  /** A directory with at least one profile marker file and no tombstone. */
  isLiveProfile(name: string): boolean {
    if (name === DEFAULT_PROFILE) return true;
    const dir = this.profileDir(name);
    if (this.isTombstoned(name) || !existsSync(dir) || !statSync(dir).isDirectory()) return false;
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
    mkdirSync(path, { recursive: true, mode });
  }

  writeFile(path: string, data: string | Uint8Array, mode = 0o600): void {
    this.assertWritable(path);
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    writeFileAtomic(path, data, mode);
  }

  writeYaml(path: string, value: unknown, mode = 0o600): void {
    this.writeFile(path, toYaml(value), mode);
  }

  writeJson(path: string, value: unknown, mode = 0o600): void {
    this.writeFile(path, `${JSON.stringify(value, null, 2)}\n`, mode);
  }

  /** The one place a named profile directory is created: clears its tombstone first (§2.2). */
  createProfileDir(name: string): string {
    rmSync(this.tombstonePath(name), { force: true });
    const dir = this.profileDir(name);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  writeTombstone(name: string): string {
    mkdirSync(this.tombstonesDir, { recursive: true, mode: 0o700 });
    const path = this.tombstonePath(name);
    writeFileAtomic(path, "deleted\n");
    return path;
  }

  /** Creates the home itself (the default profile) if needed. */
  ensureRoot(): void {
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    mkdirSync(this.profilesDir, { recursive: true, mode: 0o700 });
  }
}
