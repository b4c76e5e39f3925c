import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, openDatabase } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { endTurnObligation, failInterruptedTurns, openTurnObligation, pruneEndedObligations } from "./obligations-store.js";

let dir: string;
let db: Db;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-obligations-"));
  db = openDatabase(join(dir, "state.db"), { label: "test state.db", migrations: GATEWAY_MIGRATIONS });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const open = (id: string, now: string) =>
  openTurnObligation(db, { obligation_id: id, profile: "alice", session_key: "agent:alice:api:dm:c1", session_id: "ses-1", now });
const states = () =>
  Object.fromEntries(
    (
      db.prepare("SELECT obligation_id, state FROM delivery_obligations ORDER BY obligation_id").all() as {
        obligation_id: string;
        state: string;
      }[]
    ).map((r) => [r.obligation_id, r.state]),
  );

describe("turn obligations' retention", () => {
  it("deletes only the obligations that ended before the cutoff; a pending one is never pruned, however old", () => {
    open("o-old-delivered", "2026-01-01T00:00:00.000Z");
    endTurnObligation(db, "o-old-delivered", "delivered", "2026-01-01T00:00:01.000Z");
    open("o-old-failed", "2026-01-01T00:00:00.000Z");
    endTurnObligation(db, "o-old-failed", "failed", "2026-01-01T00:00:01.000Z");
    open("o-old-abandoned", "2026-01-01T00:00:00.000Z");
    db.prepare("UPDATE delivery_obligations SET state = 'abandoned' WHERE obligation_id = 'o-old-abandoned'").run();
    open("o-old-pending", "2026-01-01T00:00:00.000Z");
    // Started long ago, ended just now: kept for its whole retention from the end.
    open("o-recent", "2026-01-01T00:00:00.000Z");
    endTurnObligation(db, "o-recent", "delivered", "2026-01-09T00:00:00.000Z");

    expect(pruneEndedObligations(db, "2026-01-08T00:00:00.000Z")).toBe(3);
    expect(states()).toEqual({ "o-old-pending": "pending", "o-recent": "delivered" });
    // Run again: nothing more to prune.
    expect(pruneEndedObligations(db, "2026-01-08T00:00:00.000Z")).toBe(0);
  });

  it("an interrupted turn, failed at start, is kept for the retention like any ended one", () => {
    open("o-1", "2026-01-01T00:00:00.000Z");
    expect(failInterruptedTurns(db, "2026-01-05T00:00:00.000Z")).toBe(1);
    expect(pruneEndedObligations(db, "2026-01-04T00:00:00.000Z")).toBe(0);
    expect(pruneEndedObligations(db, "2026-01-06T00:00:00.000Z")).toBe(1);
    expect(states()).toEqual({});
  });
});
