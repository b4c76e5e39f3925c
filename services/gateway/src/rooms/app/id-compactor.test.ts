import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, type Db, openDatabase } from "@hermes/common";
import { afterEach, expect, it } from "vitest";
import { MEMBERS } from "../../../test/support/rooms-fixtures.js";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { type AppendItem, ID_MERGE_FANOUT, ID_RUN_KEYS, planAppendBatch, planCreateRoom } from "../core/index.js";
import { RoomsStore } from "../store/rooms-store.js";
import { IdCompactor } from "./id-compactor.js";

const NOW = "2026-12-02T10:00:00.000Z";

let dir: string | undefined;
let db: Db | undefined;

afterEach(() => {
  db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  db = undefined;
  dir = undefined;
});

function roomWith(ids: number): RoomsStore {
  dir = mkdtempSync(join(tmpdir(), "hermes-id-compactor-"));
  db = openDatabase(join(dir, "state.db"), { label: "state.db", migrations: GATEWAY_MIGRATIONS });
  const store = new RoomsStore(db, "gw-a", () => NOW);
  new IdCompactor(store, createLogger("test", "silent"), 20);
  const created = planCreateRoom({
    room_id: "r",
    name: "R",
    members: MEMBERS,
    self_gateway_id: "gw-a",
    now: NOW,
    retired: false,
    exists: false,
  });
  if (!created.ok) throw new Error(created.refusal.message);
  store.createRoom(created);
  for (let at = 0; at < ids; at += 700) {
    const requests = Array.from(
      { length: Math.min(700, ids - at) },
      (_, i): AppendItem => ({
        request: {
          origin: "client",
          event_id: `id-${at + i}`,
          kind: "message.user",
          actor: { kind: "user", id: "u" },
          payload: { text: "x" },
        },
        stored: null,
      }),
    );
    store.commitAppends([{ roomId: "r", plan: planAppendBatch(store.state("r")!, requests, NOW) }]);
  }
  return store;
}

async function until(condition: () => boolean): Promise<void> {
  for (let waited = 0; !condition(); waited += 10) {
    if (waited > 5000) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

it("merges a room's runs on its own, then releases the idle index, which is read back on the next look-up", async () => {
  const store = roomWith(ID_MERGE_FANOUT * (ID_RUN_KEYS + 52));
  const levels = () => db!.prepare("SELECT level FROM room_id_runs").pluck().all();
  await until(() => levels().length === 1);
  expect(levels()).toEqual([1]);
  await until(() => store.loadedIdIndexes() === 0);
  expect(store.eventById("r", "id-0")?.seq).toBe(2);
  expect(store.eventById("r", `id-${ID_MERGE_FANOUT * ID_RUN_KEYS}`)?.seq).toBe(ID_MERGE_FANOUT * ID_RUN_KEYS + 2);
  expect(store.eventById("r", "never")).toBeNull();
  expect(store.loadedIdIndexes()).toBe(1);
});
