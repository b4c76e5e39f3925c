import { spawnSync } from "node:child_process";
import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { ownerIsAlive, processOwner } from "./sweep.js";

describe("sweep owners", () => {
  it("this process is alive under its own owner id", () => {
    const owner = processOwner();
    expect(owner.startsWith(`${hostname()}/${process.pid}/`)).toBe(true);
    expect(ownerIsAlive(owner)).toBe(true);
  });

  it("an exited process is dead, and so is a reused pid with another start time", () => {
    const child = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
    const pid = Number(child.stdout.trim());
    expect(ownerIsAlive(`${hostname()}/${pid}/1`)).toBe(false);
    const [host, me] = processOwner().split("/");
    expect(ownerIsAlive(`${host}/${me}/not-my-start-time`)).toBe(false);
    expect(ownerIsAlive(`${hostname()}/garbage/1`)).toBe(false);
  });

  it("never judges an owner on another host (a shared engine)", () => {
    expect(ownerIsAlive("some-other-host/1/1")).toBe(true);
  });
});
