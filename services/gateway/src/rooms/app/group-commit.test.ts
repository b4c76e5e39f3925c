import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, HermesError, openDatabase } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { type AppendRequest, planCreateRoom, verifyChain } from "../core/index.js";
import { RoomsStore } from "../store/rooms-store.js";
import { GroupCommit } from "./group-commit.js";

const NOW = "2026-01-01T00:00:00.000Z";
let dir: string;
let db: Db;
let store: RoomsStore;
let commits: { rooms: Map<string, number>; size: number }[];
let group: GroupCommit;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-group-commit-"));
  db = openDatabase(join(dir, "state.db"), { label: "test", migrations: GATEWAY_MIGRATIONS });
  store = new RoomsStore(db, "gw", () => NOW);
  for (const id of ["r1", "r2"]) {
    const plan = planCreateRoom({
      room_id: id,
      name: id,
      members: [
        { member_id: "a", profile: "a" },
        { member_id: "b", profile: "b" },
      ],
      self_gateway_id: "gw",
      now: NOW,
      retired: false,
      exists: false,
    });
    if (!plan.ok) throw new Error(plan.refusal.message);
    store.createRoom(plan);
  }
  commits = [];
  group = new GroupCommit(
    store,
    () => NOW,
    { committed: (rooms, size) => commits.push({ rooms: new Map([...rooms].map(([id, plan]) => [id, plan.appended.length])), size }) },
    1000,
  );
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const send = (id: string, text = id): AppendRequest => ({
  origin: "client",
  event_id: id,
  kind: "message.user",
  actor: { kind: "user", id: "u" },
  payload: { text },
});

describe("GroupCommit", () => {
  it("answers every append submitted in one turn from one transaction, across rooms", async () => {
    const outcomes = await Promise.all([
      ...Array.from({ length: 50 }, (_, i) => group.submit("r1", send(`a${i}`))),
      ...Array.from({ length: 30 }, (_, i) => group.submit("r2", send(`b${i}`))),
    ]);
    expect(outcomes.every((o) => o.kind === "appended")).toBe(true);
    expect(commits).toEqual([
      {
        rooms: new Map([
          ["r1", 50],
          ["r2", 30],
        ]),
        size: 80,
      },
    ]);
    // Seqs follow submission order.
    expect(outcomes.slice(0, 50).map((o) => (o.kind === "appended" ? o.event.seq : 0))).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 2),
    );
  });

  it("caps one room's appends per commit and keeps the order across commits", async () => {
    const outcomes = await Promise.all(Array.from({ length: 2500 }, (_, i) => group.submit("r1", send(`m${i}`))));
    expect(commits.map((c) => c.rooms.get("r1"))).toEqual([1000, 1000, 500]);
    const seqs = outcomes.map((o) => (o.kind === "appended" ? o.event.seq : -1));
    expect(seqs).toEqual(Array.from({ length: 2500 }, (_, i) => i + 2));
    expect(verifyChain(store.events("r1", 0, 10_000), 0, "").ok).toBe(true);
  });

  it("answers idempotent retries and conflicts in the same batch, and refuses unknown rooms", async () => {
    const [first, retry, conflict, missing] = await Promise.all([
      group.submit("r1", send("x", "hello")),
      group.submit("r1", send("x", "hello")),
      group.submit("r1", send("x", "other")),
      group.submit("nope", send("y")),
    ]);
    expect(first!.kind).toBe("appended");
    expect(retry).toMatchObject({ kind: "idempotent" });
    expect(conflict).toMatchObject({ kind: "refused", refusal: { reason: "idempotency_conflict" } });
    expect(missing).toMatchObject({ kind: "refused", refusal: { reason: "not_found" } });
  });

  it("answers a retry of an append committed earlier from the stored event, and commits the rest of its batch", async () => {
    const first = await group.submit("r1", send("x", "hello"));
    expect(first).toMatchObject({ kind: "appended", event: { seq: 2 } });
    // The retry's commit meets the stored id: the batch is planned again with the lookup.
    const [a, retry, b, conflict] = await Promise.all([
      group.submit("r1", send("y")),
      group.submit("r1", send("x", "hello")),
      group.submit("r1", send("z")),
      group.submit("r1", send("x", "other")),
    ]);
    expect(a).toMatchObject({ kind: "appended", event: { seq: 3 } });
    expect(retry).toEqual({ kind: "idempotent", event: first.kind === "appended" ? first.event : null });
    expect(b).toMatchObject({ kind: "appended", event: { seq: 4 } });
    expect(conflict).toMatchObject({ kind: "refused", refusal: { reason: "idempotency_conflict", data: { seq: 2 } } });
    const events = store.events("r1", 0, 100);
    expect(events.map((e) => e.event_id)).toEqual(["system:room-created", "x", "y", "z"]);
    expect(verifyChain(events, 0, "").ok).toBe(true);
    // Alone in its commit (the one-row id insert meets the stored id the same way).
    expect(await group.submit("r1", send("y"))).toMatchObject({ kind: "idempotent", event: { seq: 3 } });
    expect(store.state("r1")!.last_seq).toBe(4);
  });

  it("answers a retry from its stored event where a plan without it would refuse (a stale cursor, a fenced room)", async () => {
    const first = await group.submit("r1", { ...send("x"), expected_latest_seq: 1 });
    expect(first).toMatchObject({ kind: "appended", event: { seq: 2 } });
    expect(await group.submit("r1", { ...send("x"), expected_latest_seq: 1 })).toMatchObject({ kind: "idempotent", event: { seq: 2 } });
    store.saveState("r1", { ...store.state("r1")!, fenced_by: { gateway_id: "gw-new", epoch: 2 } });
    const [retry, fresh] = await Promise.all([group.submit("r1", send("x")), group.submit("r1", send("w"))]);
    expect(retry).toMatchObject({ kind: "idempotent", event: { seq: 2 } });
    expect(fresh).toMatchObject({ kind: "refused", refusal: { reason: "authority_conflict" } });
  });

  it("acknowledges nothing of a batch whose commit fails, and recovers on the next one", async () => {
    const real = store.commitAppends.bind(store);
    let fail = true;
    store.commitAppends = (batches, options) => {
      if (fail) {
        fail = false;
        throw new HermesError("database_busy", "locked");
      }
      return real(batches, options);
    };
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => group.submit("r1", send(`f${i}`))));
    expect(results.every((r) => r.status === "rejected")).toBe(true);
    expect(store.events("r1", 1, 100)).toEqual([]);
    const again = await group.submit("r1", send("f0"));
    expect(again).toMatchObject({ kind: "appended", event: { seq: 2 } });
  });

  describe("with a linger policy", () => {
    const committedSizes = () => commits.map((c) => c.size);
    /** A group commit that lingers up to `maxMs`, on a clock that moves 1 ms per append (appends arrive 1 ms apart). */
    const lingering = (maxMs: number) => {
      let ms = 0;
      return new GroupCommit(
        store,
        () => NOW,
        { committed: (rooms, size) => commits.push({ rooms: new Map([...rooms].map(([id, plan]) => [id, plan.appended.length])), size }) },
        1000,
        { maxMs, enoughAppends: 64, probeEveryMs: 250 },
        () => ms++,
      );
    };
    const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

    it("appends arriving one per turn share commits instead of taking one each", async () => {
      const linger = lingering(50);
      const outcomes: Promise<unknown>[] = [];
      for (let i = 0; i < 20; i++) {
        outcomes.push(linger.submit("r1", send(`l${i}`)));
        await nextTurn();
      }
      const done = await Promise.all(outcomes);
      expect(done.map((o) => (o as { event: { seq: number } }).event.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
      expect(committedSizes().reduce((a, b) => a + b, 0)).toBe(20);
      // Without the linger each of the 20 turns commits its one append.
      expect(commits.length).toBeLessThan(10);
    });

    it("a wait ends at the turn where enough appends have come", async () => {
      // A wait of a minute: only the 64th append can end it before the test times out.
      const linger = lingering(60_000);
      const first = linger.submit("r1", send("w0"));
      await first;
      const second = linger.submit("r1", send("w1"));
      await nextTurn();
      const burst = Array.from({ length: 100 }, (_, i) => linger.submit("r1", send(`b${i}`)));
      expect((await Promise.all([second, ...burst])).every((o) => o.kind === "appended")).toBe(true);
      expect(committedSizes()).toEqual([1, 101]);
    });
  });
});
