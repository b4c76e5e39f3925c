import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, HermesError, NODE_WRITE_FS, systemClock, type WriteFs } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openGatewayDb, ProfileDatabases } from "../../home/store/gateway-store.js";
import { HermesHome } from "../../home/store/home.js";
import { ProfileService } from "./profiles.js";
import { directRouting, SessionService } from "./sessions.js";

/**
 * `profile create` on a failing disk (through the file-system seam, no root needed): the name is
 * either a whole profile or absent, never an empty or half-written profiles/<name>/.
 */

let root: string;
let db: Db;
let profileDbs: ProfileDatabases;
/** Paths whose writes fail with ENOSPC while the predicate says so. */
let diskFullFor: (path: string) => boolean;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "hermes-profiles-"));
  diskFullFor = () => false;
});
afterEach(() => {
  profileDbs?.closeAll();
  db?.close();
  rmSync(root, { recursive: true, force: true });
});

/** A ProfileService as the CLI builds it on the files, over a home whose file writes can hit a full disk. */
function service(): ProfileService {
  const paths = new Map<number, string>();
  const fs: WriteFs = {
    ...NODE_WRITE_FS,
    openSync: (path, flags, mode) => {
      const fd = NODE_WRITE_FS.openSync(path, flags, mode);
      paths.set(fd, String(path));
      return fd;
    },
    writeSync: (fd, buffer, offset, length) => {
      if (diskFullFor(paths.get(fd) ?? "")) throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      return NODE_WRITE_FS.writeSync(fd, buffer, offset, length);
    },
  };
  const home = new HermesHome(root, fs);
  home.ensureRoot();
  db = openGatewayDb(home);
  profileDbs = new ProfileDatabases(home, db);
  const routing = directRouting(db);
  const profiles = new ProfileService(home, db, profileDbs, new SessionService(db, routing, systemClock), routing, systemClock);
  profiles.ensureDefault();
  return profiles;
}

function failure(fn: () => unknown): HermesError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HermesError) return err;
    throw err;
  }
  throw new Error("expected a failure");
}

const profilesDir = () => readdirSync(join(root, "profiles")).sort();

describe("profile create on a full disk", () => {
  it("fails disk_full and leaves nothing: create then works, and nothing says the name exists meanwhile", () => {
    const profiles = service();
    diskFullFor = (path) => path.includes("profile.yaml");
    const err = failure(() => profiles.create("coder", { title: "Coder" }));
    expect(err.reason).toBe("disk_full");
    expect(err.message).toContain("the disk is full");
    expect(profilesDir()).toEqual([]);
    expect(failure(() => profiles.show("coder")).reason).toBe("not_found");

    diskFullFor = () => false;
    expect(profiles.create("coder", { title: "Coder" })).toMatchObject({ name: "coder", title: "Coder" });
    expect(profilesDir()).toEqual(["coder"]);
    const files = readdirSync(join(root, "profiles", "coder")).filter((f) => !/-(wal|shm)$/.test(f));
    expect(files.sort()).toEqual([".env", "config.yaml", "profile.yaml", "state.db"]);
  });

  it("an empty profiles/<name>/ left by an older failed create does not block the name", () => {
    const profiles = service();
    mkdirSync(join(root, "profiles", "coder"));
    expect(profiles.create("coder").name).toBe("coder");
  });

  it("a create that fails after the folder was in place (a cloned config that does not validate) is undone; a deleted name stays deleted", () => {
    const profiles = service();
    profiles.create("bad");
    writeFileSync(join(root, "profiles", "bad", "config.yaml"), "modle: typo\n");
    profiles.create("coder");
    profiles.delete("coder");
    const err = failure(() => profiles.create("coder", { clone_from: "bad" }));
    expect(err.reason).toBe("invalid_config");
    expect(profilesDir()).toEqual([".deleted", "bad"]);
    expect(failure(() => profiles.show("coder")).message).toContain("(it was deleted)");
    expect(profiles.names()).toEqual(["default", "bad"]);
  });
});
