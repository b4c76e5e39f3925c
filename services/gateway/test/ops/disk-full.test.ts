import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { HermesError } from "@hermes/common";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import { afterAll, describe, expect, it } from "vitest";
import { writeHomeConfig } from "../support/delivery-fixtures.js";
import { call, type TestGateway } from "../support/gateway-harness.js";
import { expectRefusal, MEMBERS, type RoomNode, startRoomNode, stopNodes } from "../support/rooms-fixtures.js";

/**
 * A full disk: a state.db write that finds no space is the typed `disk_full` (not `internal`), and
 * /readyz says not ready until a write commits again. The first part needs no root: SQLite's
 * `max_page_count` makes the gateway's own connection "full" (SQLITE_FULL, as on a full disk).
 * The second runs on a real 4 MB tmpfs when this process may mount one (root), else it is skipped.
 */

const text = (t: string) => ({ text: t });
const big = () => text("x".repeat(60_000));

async function readyz(t: TestGateway): Promise<number> {
  return (await fetch(`http://${t.gateway.httpAddress}/readyz`)).status;
}

describe("state.db full (max_page_count)", () => {
  let a: RoomNode;
  afterAll(async () => stopNodes(a));

  it("a room send is disk_full naming the database; /readyz is 503 until a write succeeds again", async () => {
    const home = mkdtempSync(join(tmpdir(), "hermes-full-"));
    // No periodic writes that could succeed in between and flip readiness back during the test.
    writeHomeConfig(home, { gateway: { heartbeat_seconds: 3600, routing_persist_seconds: 3600 } });
    a = await startRoomNode("gw-full", { home });
    await a.call(a.client.create, { room_id: "r1", name: "Full", members: MEMBERS });
    expect(await readyz(a.gw)).toBe(200);

    const db = a.gw.gateway.db;
    db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true }) as number}`);
    const refused = await expectRefusal(a.call(a.client.send, { room_id: "r1", event_id: "m1", payload: big() }));
    expect(refused.reason).toBe("disk_full");
    expect(refused.message).toContain(join(home, "state.db"));
    expect(refused.message).toContain("the disk is full");
    expect(await readyz(a.gw)).toBe(503);

    db.pragma("max_page_count = 1073741823");
    const sent = await a.call(a.client.send, { room_id: "r1", event_id: "m1", payload: big() });
    expect(sent.event?.seq).toBe(2);
    expect(await readyz(a.gw)).toBe(200);
  });
});

/** Mounts a tmpfs of `size` at a new temp folder, or undefined when this process may not. */
function mountTmpfs(size: string): string | undefined {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "hermes-tmpfs-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir], { stdio: "ignore" });
    return dir;
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
}

/** Writes a file until the disk says ENOSPC. */
function fill(file: string): void {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
}

const mount = mountTmpfs("4m");

describe.runIf(mount !== undefined)("a real full disk (tmpfs)", () => {
  let a: RoomNode | undefined;
  afterAll(async () => {
    await stopNodes(a);
    if (mount) {
      execFileSync("umount", [mount]);
      rmSync(mount, { recursive: true, force: true });
    }
  });

  it("profile create fails disk_full leaving no folder; a room send is disk_full; both work and /readyz recovers once space is freed", async () => {
    const home = join(mount!, "home");
    mkdirSync(home);
    writeHomeConfig(home, { gateway: { heartbeat_seconds: 3600, routing_persist_seconds: 3600 } });
    a = await startRoomNode("gw-tmpfs", { home });
    const gw = a.gw.client(GatewayServiceClient);
    const create = (name: string) =>
      call(gw, gw.createProfile, { name, title: "", description: "", model: "", provider: "", clone_from: "", soul: "" });
    await a.call(a.client.create, { room_id: "r1", name: "Full", members: MEMBERS });

    const filler = join(mount!, "filler");
    fill(filler);
    expect((await expectRefusal(create("coder"))).reason).toBe("disk_full");
    expect(readdirSync(join(home, "profiles"))).toEqual([]);
    // A send may still fit in the space state.db's WAL already has (it is reused once checkpointed):
    // sends go on until one needs space the disk does not have.
    let acknowledged = 0;
    let refused: HermesError | undefined;
    while (refused === undefined && acknowledged < 100) {
      try {
        await a.call(a.client.send, { room_id: "r1", event_id: `m${acknowledged}`, payload: big() });
        acknowledged++;
      } catch (err) {
        refused = err as HermesError;
      }
    }
    expect(refused?.reason).toBe("disk_full");
    expect(await readyz(a.gw)).toBe(503);

    rmSync(filler);
    expect((await create("coder")).name).toBe("coder");
    const retried = await a.call(a.client.send, { room_id: "r1", event_id: `m${acknowledged}`, payload: big() });
    // Nothing of the refused send was written: it lands right after the acknowledged ones.
    expect(retried.event?.seq).toBe(acknowledged + 2);
    expect(await readyz(a.gw)).toBe(200);
  });
});
