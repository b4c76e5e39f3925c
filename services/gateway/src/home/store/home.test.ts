import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HermesError, NODE_WRITE_FS } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { HermesHome } from "./home.js";

let root: string;
let home: HermesHome;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "hermes-home-"));
  home = new HermesHome(root);
  home.ensureRoot();
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function makeProfile(name: string) {
  const staged = home.stageProfileDir(name);
  writeFileSync(join(staged, "config.yaml"), "{}\n");
  home.publishProfileDir(staged, name);
}

function refusal(fn: () => void): HermesError {
  try {
    fn();
  } catch (err) {
    return err as HermesError;
  }
  throw new Error("expected a refusal");
}

describe("tombstone guard", () => {
  it("refuses a late write into a deleted profile and leaves nothing behind", () => {
    makeProfile("coder");
    home.writeTombstone("coder");
    rmSync(home.profileDir("coder"), { recursive: true });
    const target = join(home.profileDir("coder"), "cache", "models.json");
    const err = refusal(() => home.writeJson(target, { late: true }));
    expect(err).toBeInstanceOf(HermesError);
    expect(err.reason).toBe("profile_deleted");
    expect(err.message).toMatch(/profile coder was deleted/);
    expect(err.data.code).toBe("ENOENT");
    expect(existsSync(home.profileDir("coder"))).toBe(false);
    expect(readdirSync(home.profilesDir).sort()).toEqual([".deleted"]);
  });

  it("refuses directory creation inside a tombstoned profile even if its folder is still there", () => {
    makeProfile("coder");
    home.writeTombstone("coder");
    expect(refusal(() => home.mkdir(join(home.profileDir("coder"), "memory"))).reason).toBe("profile_deleted");
    expect(existsSync(join(home.profileDir("coder"), "memory"))).toBe(false);
  });

  it("refuses writes into a profile that never existed", () => {
    expect(refusal(() => home.writeFile(join(home.profilesDir, "ghost", "x.txt"), "x")).reason).toBe("profile_deleted");
    expect(existsSync(join(home.profilesDir, "ghost"))).toBe(false);
  });

  it("lets writes through for live profiles", () => {
    makeProfile("alice");
    home.writeFile(join(home.profileDir("alice"), "sub", "a.yaml"), "a: 1\n");
    expect(existsSync(join(home.profileDir("alice"), "sub", "a.yaml"))).toBe(true);
  });

  it("leaves the default home, hidden staging dirs and foreign paths alone", () => {
    home.writeFile(join(root, "cache", "x.json"), "{}");
    home.mkdir(join(home.profilesDir, ".staging", "tmp1"));
    home.writeFile(join(home.profilesDir, ".staging", "tmp1", "f"), "x");
    const foreign = mkdtempSync(join(tmpdir(), "elsewhere-"));
    try {
      home.writeFile(join(foreign, "profiles", "coder", "f.txt"), "x");
      expect(existsSync(join(foreign, "profiles", "coder", "f.txt"))).toBe(true);
    } finally {
      rmSync(foreign, { recursive: true, force: true });
    }
    expect(existsSync(join(root, "cache", "x.json"))).toBe(true);
  });

  it("re-creating the profile explicitly clears the tombstone and writes work again", () => {
    makeProfile("coder");
    home.writeTombstone("coder");
    expect(home.isLiveProfile("coder")).toBe(false);
    makeProfile("coder");
    expect(home.isTombstoned("coder")).toBe(false);
    home.writeFile(join(home.profileDir("coder"), "notes.txt"), "back");
    expect(home.isLiveProfile("coder")).toBe(true);
  });

  it("does not treat a stray folder without marker files as a live profile", () => {
    mkdirSync(join(home.profilesDir, "stray"));
    expect(home.isLiveProfile("stray")).toBe(false);
  });
});

describe("staging and a full disk", () => {
  it("a staged profile is invisible until published; stale staging folders of a crash are removed, fresh ones kept", () => {
    const staged = home.stageProfileDir("coder");
    writeFileSync(join(staged, "config.yaml"), "{}\n");
    expect(home.isLiveProfile("coder")).toBe(false);
    expect(existsSync(home.profileDir("coder"))).toBe(false);
    const later = Date.now() + 11 * 60_000;
    const fresh = home.stageProfileDir("other", later);
    // The first one is now older than any create takes: a crash's leftover, removed; the new one stays.
    expect(existsSync(staged)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
    writeFileSync(join(fresh, "config.yaml"), "{}\n");
    home.publishProfileDir(fresh, "other");
    expect(home.isLiveProfile("other")).toBe(true);
    expect(readdirSync(home.profilesDir).sort()).toEqual(["other"]);
  });

  it("a write on a full disk is disk_full naming the file and leaves no temp file behind", () => {
    makeProfile("alice");
    const full = new HermesHome(root, { ...NODE_WRITE_FS, writeSync: () => enospc() });
    const target = join(home.profileDir("alice"), "notes.txt");
    const err = refusal(() => full.writeFile(target, "x".repeat(10_000)));
    expect(err.reason).toBe("disk_full");
    expect(err.message).toContain(target);
    expect(readdirSync(home.profileDir("alice"))).toEqual(["config.yaml"]);
  });

  it("a short write goes on until every byte is written", () => {
    makeProfile("alice");
    let calls = 0;
    const dribble = new HermesHome(root, {
      ...NODE_WRITE_FS,
      writeSync: (fd, buffer, offset, length) => {
        calls++;
        return writeSync(fd, buffer, offset, Math.min(length, 1000));
      },
    });
    const target = join(home.profileDir("alice"), "big.txt");
    dribble.writeFile(target, "y".repeat(10_500));
    expect(readFileSync(target, "utf8")).toBe("y".repeat(10_500));
    expect(calls).toBe(11);
  });
});

function enospc(): never {
  throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
}
