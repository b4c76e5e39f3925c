import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, openDatabase } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { rewriteStoredEvent } from "../../test/support/room-log-edits.js";
import {
  type AppendRequest,
  buildLogPage,
  buildPackedLogPage,
  canonicalJson,
  type LogPage,
  newReplicaState,
  packedBytes,
  planAppendBatch,
  planCreateRoom,
  planLogRead,
  planPromote,
  planReplication,
  ROOM_CONTROL_ACTOR,
  type RoomEvent,
  roomInvariantViolations,
  runOfPackedPage,
  SEGMENT_SEAL_EVENTS,
  sealEvent,
  tupleStart,
  tuplesToEvents,
  verifyChain,
} from "../core/rooms/index.js";
import { purgeProfileState, rekeyProfileState } from "./identity-store.js";
import { GATEWAY_MIGRATIONS } from "./migrations/index.js";
import { RoomsStore } from "./rooms-store.js";

/**
 * The SQLite side of rooms: what a plan leaves on disk (re-read, not cached), atomicity of a failed
 * group commit, the durability mode around replica pages, metadata derived from room.* events, the
 * durable epoch counter, retired ids, and the membership handles the identity registry rekeys.
 * (rooms-service.differential.test.ts checks every decision against the core's reference.)
 */

const NOW = "2026-01-01T00:00:00.000Z";
const MEMBERS = [
  { member_id: "alice", profile: "alice" },
  { member_id: "bob", profile: "bob", gateway_id: "gw-other" },
];

let dir: string;
let dbs: Db[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-rooms-store-"));
});
afterEach(() => {
  for (const db of dbs) db.close();
  dbs = [];
  rmSync(dir, { recursive: true, force: true });
});

/** A store on a fresh database; `patch` may wrap the connection before the store prepares anything. */
function open(name: string, gatewayId: string, patch?: (db: Db) => void): RoomsStore {
  const db = openDatabase(join(dir, `${name}.db`), { label: name, migrations: GATEWAY_MIGRATIONS });
  dbs.push(db);
  patch?.(db);
  return new RoomsStore(db, gatewayId, () => NOW);
}

function create(store: RoomsStore, roomId = "r") {
  const plan = planCreateRoom({
    room_id: roomId,
    name: "Room",
    members: MEMBERS,
    self_gateway_id: store.selfGatewayId,
    now: NOW,
    retired: false,
    exists: false,
  });
  if (!plan.ok) throw new Error(plan.refusal.message);
  return store.createRoom(plan);
}

function send(id: string, text = id): AppendRequest {
  return { origin: "client", event_id: id, kind: "message.user", actor: { kind: "user", id: "u" }, payload: { text } };
}

function append(store: RoomsStore, roomId: string, requests: AppendRequest[]) {
  const plan = planAppendBatch(
    store.state(roomId)!,
    requests.map((request) => ({ request, stored: store.eventById(roomId, request.event_id) })),
    NOW,
  );
  store.commitAppends([{ roomId, plan }]);
  return plan;
}

/** Pulls everything from `source` into `replica` page by page, like the replicator. */
function pullAll(source: RoomsStore, replica: RoomsStore, roomId: string, limit = 3): void {
  let refetch: number | undefined;
  for (let guard = 0; guard < 100; guard++) {
    const state = source.state(roomId)!;
    const since = refetch ?? replica.state(roomId)?.last_seq ?? 0;
    refetch = undefined;
    const read = planLogRead(state, { since_seq: since, limit });
    if (!read.ok) throw new Error(read.refusal.message);
    const page = buildLogPage(state, read.value, since > 0 ? source.eventAt(roomId, since) : null, source.events(roomId, since, limit));
    const local = replica.state(roomId) ?? newReplicaState(roomId, replica.selfGatewayId, state.self_gateway_id);
    const decision = planReplication(local, page, replica.lookup(roomId), NOW);
    replica.applyReplication(roomId, decision);
    if (decision.kind === "refetch") {
      refetch = decision.since_seq;
      continue;
    }
    if (!page.has_more) return;
  }
}

/** Pulls like the replicator over gRPC: packed pages, decoded from their bytes, the bytes kept with the page. */
function pullPacked(source: RoomsStore, replica: RoomsStore, roomId: string, limit = 5000, edit = (bytes: Buffer) => bytes): void {
  let from: number | undefined;
  for (let guard = 0; guard < 100; guard++) {
    const state = source.state(roomId)!;
    const since = from ?? replica.state(roomId)?.last_seq ?? 0;
    from = undefined;
    const read = planLogRead(state, { since_seq: since, limit }, { maxLimit: 5000 });
    if (!read.ok && read.refusal.reason === "cursor_conflict") {
      from = read.refusal.data.latest_seq as number; // the source ends before us: decide on its last page
      continue;
    }
    if (!read.ok) throw new Error(read.refusal.message);
    const packed = buildPackedLogPage(
      state,
      read.value,
      since > 0 ? source.eventAt(roomId, since) : null,
      source.packedEvents(roomId, since, limit),
    );
    const bytes = edit(packedBytes(packed.packed));
    const events = tuplesToEvents(roomId, JSON.parse(bytes.toString("utf8")));
    const page: LogPage = { ...packed, events, tuples: events.length > 0 ? runOfPackedPage(bytes, events) : undefined };
    const local = replica.state(roomId) ?? newReplicaState(roomId, replica.selfGatewayId, state.self_gateway_id);
    const decision = planReplication(local, page, replica.lookup(roomId), NOW);
    if (decision.kind === "quarantined" || decision.kind === "refused") throw new Error(decision.refusal.message);
    replica.applyReplication(roomId, decision, { page });
    if (decision.kind === "refetch") from = decision.since_seq;
    else if (!page.has_more) return;
  }
}

function segmentRows(store: RoomsStore, roomId: string) {
  return store.db
    .prepare(
      "SELECT first_seq, last_seq, length(body) AS bytes, body FROM room_log_segments JOIN room_logs USING (log_id) WHERE room_id = ? ORDER BY first_seq",
    )
    .all(roomId) as { first_seq: number; last_seq: number; bytes: number; body: Buffer }[];
}

/** room.created as gateways before member hosts wrote it: the creator's own profiles listed without a gateway. */
function legacyCreated(roomId: string): RoomEvent {
  return sealEvent(
    {
      room_id: roomId,
      seq: 1,
      event_id: "system:room-created",
      kind: "room.created",
      actor_json: canonicalJson(ROOM_CONTROL_ACTOR),
      epoch: 1,
      payload_json: canonicalJson({ name: "Room", members: MEMBERS }),
      created_at: NOW,
    },
    "",
  );
}

function reread(store: RoomsStore, roomId: string) {
  store.dropCache();
  const room = store.room(roomId)!;
  expect(roomInvariantViolations(room.state, store.events(roomId, 0, 1e9))).toEqual([]);
  return room;
}

describe("RoomsStore", () => {
  it("persists a created room, its lineage, log and local membership handles", () => {
    const store = open("a", "gw-a");
    const created = create(store);
    const room = reread(store, "r");
    expect(room.state).toEqual(created.state);
    expect(room.meta).toMatchObject({ name: "Room", members: MEMBERS, revision: 1, disbanded_at: null });
    // bob lives on another gateway: only alice's handle is this gateway's identity.
    expect(store.db.prepare("SELECT member_id, profile FROM room_members").all()).toEqual([{ member_id: "alice", profile: "alice" }]);
    expect(rekeyProfileState(store.db, "alice", "alicia").room_members).toBe(1);
    expect(store.db.prepare("SELECT profile FROM room_members").all()).toEqual([{ profile: "alicia" }]);
    expect(purgeProfileState(store.db, "alicia").room_members).toBe(1);
  });

  it("stores every member with the gateway hosting it; each gateway keeps handles only for the members it hosts", () => {
    const a = open("a", "gw-a");
    const other = open("other", "gw-other");
    create(a);
    const hosted = [
      { member_id: "alice", profile: "alice", gateway_id: "gw-a" },
      { member_id: "bob", profile: "bob", gateway_id: "gw-other" },
    ];
    expect(reread(a, "r").meta.members).toEqual(hosted);
    expect(JSON.parse(a.eventAt("r", 1)!.payload_json).members).toEqual(hosted);
    pullAll(a, other, "r");
    expect(reread(other, "r").meta.members).toEqual(hosted);
    expect(other.db.prepare("SELECT member_id, profile FROM room_members").all()).toEqual([{ member_id: "bob", profile: "bob" }]);
    expect(rekeyProfileState(other.db, "bob", "robert").room_members).toBe(1);
    expect(other.db.prepare("SELECT profile FROM room_members").all()).toEqual([{ profile: "robert" }]);
  });

  it("hosts members that a log of an older gateway lists without a gateway on the gateway that wrote the list", () => {
    const old = open("old", "gw-a");
    const replica = open("replica", "gw-b");
    create(old);
    const legacy = legacyCreated("r");
    rewriteStoredEvent(old.db, "r", 1, () => legacy);
    old.db.prepare("UPDATE rooms SET last_hash = ? WHERE room_id = 'r'").run(legacy.hash);
    old.dropCache();
    pullAll(old, replica, "r");
    expect(reread(replica, "r").meta.members).toEqual([
      { member_id: "alice", profile: "alice", gateway_id: "gw-a" },
      { member_id: "bob", profile: "bob", gateway_id: "gw-other" },
    ]);
    expect(replica.db.prepare("SELECT count(*) FROM room_members").pluck().get()).toBe(0);
  });

  it("upgrades a database of the previous schema: stored member lists get their hosts, demotions get their table", () => {
    const path = join(dir, "upgrade.db");
    const before = openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS.slice(0, 4) });
    // A room this gateway (gw-a) created and one it replicates from gw-z, as the previous version stored them.
    for (const [roomId, creator] of [
      ["led", "gw-a"],
      ["copy", "gw-z"],
    ] as const) {
      const e = legacyCreated(roomId);
      before
        .prepare(
          `INSERT INTO rooms (room_id, name, members_json, authority_gateway_id, authority_epoch, next_seq, revision, created_at,
             updated_at, max_epoch_seen, last_hash, safety_status) VALUES (?, 'Room', ?, ?, 1, 2, 1, ?, ?, 1, ?, 'passive')`,
        )
        .run(roomId, JSON.stringify(MEMBERS), creator, NOW, NOW, e.hash);
      before.prepare("INSERT INTO room_lineage (room_id, epoch, gateway_id, start_seq) VALUES (?, 1, ?, 1)").run(roomId, creator);
      before
        .prepare(`INSERT INTO room_events (room_id, seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash)
                  VALUES (@room_id, @seq, @event_id, @kind, @actor_json, @epoch, @payload_json, @created_at, @hash)`)
        .run(e);
    }
    before.close();
    const after = openDatabase(path, { label: "upgrade", migrations: GATEWAY_MIGRATIONS });
    dbs.push(after);
    const store = new RoomsStore(after, "gw-a", () => NOW);
    expect(store.room("led")!.meta.members).toEqual([
      { member_id: "alice", profile: "alice", gateway_id: "gw-a" },
      { member_id: "bob", profile: "bob", gateway_id: "gw-other" },
    ]);
    expect(store.room("copy")!.meta.members).toEqual([
      { member_id: "alice", profile: "alice", gateway_id: "gw-z" },
      { member_id: "bob", profile: "bob", gateway_id: "gw-other" },
    ]);
    expect(store.lastDemotion("led")).toBeNull();
  });

  it("commits a group of appends atomically, and a failed commit leaves nothing behind", () => {
    const store = open("a", "gw-a");
    create(store);
    append(store, "r", [send("m1"), send("m2")]);
    const before = reread(store, "r");
    const plan = planAppendBatch(before.state, [{ request: send("m3"), stored: null }], NOW);
    // Forge a second room's plan that collides with an existing event id: the whole commit must fail.
    const m3 = plan.appended[0]!;
    const forged = { ...plan, run: undefined, appended: [...plan.appended, { ...m3, seq: m3.seq + 1, event_id: "m1" }] };
    expect(() => store.commitAppends([{ roomId: "r", plan: forged }])).toThrow(/UNIQUE/);
    const after = reread(store, "r");
    expect(after.state).toEqual(before.state);
    expect(store.eventById("r", "m3")).toBeNull();
  });

  it("commits plans made without the idempotency lookup, and writes nothing when one of their ids is stored", () => {
    const store = open("a", "gw-a");
    create(store);
    append(store, "r", [send("m1"), send("m2")]);
    const before = reread(store, "r");
    // Planned as if nothing were stored: m1 looks new and is given seq 4.
    const blind = planAppendBatch(
      before.state,
      [
        { request: send("m3"), stored: null },
        { request: send("m1"), stored: null },
      ],
      NOW,
    );
    expect(blind.appended.map((e) => e.event_id)).toEqual(["m3", "m1"]);
    expect(store.commitAppends([{ roomId: "r", plan: blind }], { idsUnchecked: true })).toBe(false);
    expect(reread(store, "r").state).toEqual(before.state);
    expect(store.state("r")).toEqual(before.state);
    expect(store.eventById("r", "m3")).toBeNull();
    expect(store.events("r", 0, 10).map((e) => e.event_id)).toEqual(["system:room-created", "m1", "m2"]);
    // Nothing stored under its ids: it commits.
    const fresh = planAppendBatch(before.state, [{ request: send("m3"), stored: null }], NOW);
    expect(store.commitAppends([{ roomId: "r", plan: fresh }], { idsUnchecked: true })).toBe(true);
    expect(reread(store, "r").state.last_seq).toBe(4);
    expect(verifyChain(store.events("r", 0, 10), 0, "").ok).toBe(true);
  });

  it("applies replica pages at synchronous=NORMAL and is back at FULL afterwards", () => {
    const a = open("a", "gw-a");
    let seen = -1;
    // Every write transaction of the store notes the synchronous mode it starts in.
    const b = open("b", "gw-b", (db) => {
      const run = db.transaction.bind(db);
      db.transaction = ((fn: (...args: unknown[]) => void) => {
        const tx = run(fn);
        const wrapped = Object.assign((...args: unknown[]) => tx(...args), tx);
        wrapped.immediate = (...args: unknown[]) => {
          seen = db.pragma("synchronous", { simple: true }) as number;
          return tx.immediate(...args);
        };
        return wrapped;
      }) as typeof db.transaction;
    });
    create(a);
    append(a, "r", [send("m1"), send("m2"), send("m3"), send("m4")]);
    pullAll(a, b, "r");
    expect(seen).toBe(1); // NORMAL inside the page transaction
    expect(b.db.pragma("synchronous", { simple: true })).toBe(2); // FULL again
    const room = reread(b, "r");
    expect(room.state).toMatchObject({ role: "replica", last_seq: 5, latest_seq: 5 });
    expect(room.meta).toMatchObject({ name: "Room", members: MEMBERS });
  });

  it("reads replication pages as tuple JSON byte-identical to JSON.stringify, with the same bounds as a LogPage", () => {
    const store = open("a", "gw-a");
    create(store);
    // Texts SQLite and V8 could quote differently: quotes, backslashes, every short escape, other
    // C0 controls, DEL and C1, non-ASCII and astral characters, U+2028/2029, a BOM, "</".
    const texts = [
      'say "hi" \\ bye',
      "c0 \u0000\u0001\b\t\n\u000b\f\r\u001f end",
      "del \u007f c1 \u0080\u009f",
      "ünïcödé 日本語 😀",
      "seps \u2028\u2029 bom \ufeff nbsp \u00a0",
      "</script> and /slashes/",
    ];
    append(
      store,
      "r",
      texts.map((text, i) => send(`m${i}`, text)),
    );
    const events = store.events("r", 0, 100);
    const runs = store.packedEvents("r", 0, 100);
    const tuples = runs.flatMap((run) =>
      Array.from(run.ends, (_, i) => Buffer.from(run.body).toString("utf8", tupleStart(run, i), run.ends[i])),
    );
    expect(tuples).toHaveLength(events.length);
    for (const [i, json] of tuples.entries()) {
      const e = events[i]!;
      expect(json).toBe(JSON.stringify([e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash]));
    }
    // The byte budget cuts a packed page exactly where it cuts the LogPage of the same events.
    const state = store.state("r")!;
    for (const max_bytes of [1024, 1500, 2500, 100_000]) {
      const read = planLogRead(state, { since_seq: 1, limit: 5000, max_bytes }, { maxLimit: 5000 });
      if (!read.ok) throw new Error(read.refusal.message);
      const prev = store.eventAt("r", 1);
      const plain = buildLogPage(state, read.value, prev, store.events("r", 1, 5000));
      const packed = buildPackedLogPage(state, read.value, prev, store.packedEvents("r", 1, 5000));
      expect(packed.packed.flatMap((run) => Array.from(run.ends, (_, i) => run.first_seq + i))).toEqual(plain.events.map((e) => e.seq));
      expect(packed.cursor).toBe(plain.cursor);
    }
  });

  it("keeps name and members in step with room.* events, also when a branch moves away", () => {
    const a = open("a", "gw-a");
    const b = open("b", "gw-b");
    create(a);
    append(a, "r", [send("m1")]);
    pullAll(a, b, "r");
    // b is promoted (a is cut off); a keeps writing and renames the room on its own branch.
    const promote = planPromote(b.state("r")!, { confirm: true, max_durable_epoch: b.maxDurableEpoch(), stored: b.storedKinds("r") }, NOW);
    if (!promote.ok) throw new Error("promote refused");
    b.syncBarrier();
    b.commitPromote("r", promote);
    append(a, "r", [
      { origin: "server", event_id: "rename-1", kind: "room.renamed", actor: ROOM_CONTROL_ACTOR, payload: { name: "Renamed on a" } },
    ]);
    expect(reread(a, "r").meta).toMatchObject({ name: "Renamed on a", revision: 2 });
    // a observes b's claim and follows it: the rename moves to the preserved branch, and with it the name.
    const demoted = a.state("r")!;
    a.saveState("r", { ...demoted, role: "replica", authority: { gateway_id: "gw-b", epoch: 2 }, latest_seq: 0, max_epoch_seen: 2 });
    pullAll(b, a, "r");
    const room = reread(a, "r");
    expect(room.meta).toMatchObject({ name: "Room", revision: 1 });
    const [branch] = a.divergences("r", true);
    expect(branch!.record).toMatchObject({ from_seq: 3, count: 1, branch_gateway_id: "gw-a", winning_gateway_id: "gw-b" });
    expect(branch!.events.map((e) => e.event_id)).toEqual(["rename-1"]);
    expect(a.maxDurableEpoch()).toBe(2);
  });

  it("counts the promote counter and every table in the max durable epoch, and retires disbanded ids", () => {
    const store = open("a", "gw-a");
    create(store);
    store.db.prepare("INSERT INTO gateway_meta (key, value) VALUES ('rooms_max_epoch', '7')").run();
    expect(store.maxDurableEpoch()).toBe(7);
    append(store, "r", [
      { origin: "server", event_id: "system:room-disbanded", kind: "room.disbanded", actor: ROOM_CONTROL_ACTOR, payload: {} },
    ]);
    expect(store.isRetired("r")).toBe(true);
    expect(reread(store, "r").meta.disbanded_at).toBe(NOW);
  });
  it("keeps the log in segments: one-event commits are fragments until they add up to a sealed segment", () => {
    const store = open("a", "gw-a");
    create(store);
    const n = SEGMENT_SEAL_EVENTS + 40;
    for (let i = 0; i < n; i++) append(store, "r", [send(`m${i}`, `text ${i}`)]);
    const rows = segmentRows(store, "r");
    // The first SEGMENT_SEAL_EVENTS events were merged into one segment; the rest are fragments again.
    expect(rows.length).toBeLessThan(60);
    expect(rows[0]).toMatchObject({ first_seq: 1, last_seq: SEGMENT_SEAL_EVENTS });
    expect(rows.at(-1)!.last_seq).toBe(n + 1);
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.first_seq).toBe(rows[i - 1]!.last_seq + 1);
    const room = reread(store, "r");
    expect(room.state.last_seq).toBe(n + 1);
    const events = store.events("r", 0, 1e9);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: n + 1 }, (_, i) => i + 1));
    expect(verifyChain(events, 0, "").ok).toBe(true);
    // Every event is found by seq across segment boundaries and by id after the merge, also with a cold store.
    expect(store.events("r", SEGMENT_SEAL_EVENTS - 2, 5).map((e) => e.seq)).toEqual(
      [511, 512, 513, 514, 515].map((x) => x - 512 + SEGMENT_SEAL_EVENTS),
    );
    for (const i of [0, 1, SEGMENT_SEAL_EVENTS - 2, SEGMENT_SEAL_EVENTS, n - 1]) expect(store.eventById("r", `m${i}`)?.seq).toBe(i + 2);
    expect(store.eventsByIds("r", ["m0", "nope", `m${n - 1}`])).toEqual(
      new Map([
        ["m0", events[1]],
        [`m${n - 1}`, events[n]],
      ]),
    );
    // A retry after the merge is idempotent (found by id), and the log continues densely.
    const retry = append(store, "r", [send("m3", "text 3"), send("fresh")]);
    expect(retry.outcomes.map((o) => o.kind)).toEqual(["idempotent", "appended"]);
    expect(store.eventAt("r", n + 2)?.event_id).toBe("fresh");
  });

  it("stores a replica page as the bytes it received, and serves them again as they are", () => {
    const a = open("a", "gw-a");
    const b = open("b", "gw-b");
    const c = open("c", "gw-c");
    create(a);
    append(
      a,
      "r",
      Array.from({ length: 900 }, (_, i) => send(`m${i}`, `ü "${i}" \\`)),
    );
    // The same JSON written another way (an escaped letter): valid, and what b must keep byte for byte.
    const escaped = (bytes: Buffer) => Buffer.from(bytes.toString("utf8").replaceAll('"m1"', '"\\u006d1"'));
    pullPacked(a, b, "r", 5000, escaped);
    expect(reread(b, "r").state).toMatchObject({ last_seq: 901, last_hash: a.state("r")!.last_hash });
    expect(b.events("r", 0, 1e9)).toEqual(a.events("r", 0, 1e9));
    const stored = Buffer.concat(segmentRows(b, "r").map((row, i) => (i === 0 ? row.body : Buffer.concat([Buffer.from(","), row.body]))));
    expect(stored.toString("utf8")).toContain('"\\u006d1"');
    expect(b.eventById("r", "m1")?.seq).toBe(3);
    // b serves what it holds; c gets the same log.
    pullPacked(b, c, "r", 300);
    expect(c.events("r", 0, 1e9)).toEqual(a.events("r", 0, 1e9));
  });

  it("cuts the log back inside a segment when a branch moves away, and forgets the moved ids", () => {
    const a = open("a", "gw-a");
    const b = open("b", "gw-b");
    create(a);
    append(
      a,
      "r",
      Array.from({ length: 10 }, (_, i) => send(`shared-${i}`)),
    );
    pullAll(a, b, "r");
    const promote = planPromote(b.state("r")!, { confirm: true, max_durable_epoch: b.maxDurableEpoch(), stored: b.storedKinds("r") }, NOW);
    if (!promote.ok) throw new Error("promote refused");
    b.syncBarrier();
    b.commitPromote("r", promote);
    append(b, "r", [send("won-1"), send("won-2")]);
    // a keeps writing on its own: 600 events merge its fragments (seqs 1..11) into segments with them.
    append(
      a,
      "r",
      Array.from({ length: 600 }, (_, i) => send(`lost-${i}`)),
    );
    expect(segmentRows(a, "r")[0]).toMatchObject({ first_seq: 1 });
    expect(segmentRows(a, "r")[0]!.last_seq).toBeGreaterThan(11);
    const demoted = a.state("r")!;
    a.saveState("r", { ...demoted, role: "replica", authority: { gateway_id: "gw-b", epoch: 2 }, latest_seq: 0, max_epoch_seen: 2 });
    pullPacked(b, a, "r");
    const room = reread(a, "r");
    expect(room.state).toMatchObject({ last_seq: 14, safety_status: "diverged", last_hash: b.state("r")!.last_hash });
    expect(a.events("r", 0, 1e9)).toEqual(b.events("r", 0, 1e9));
    const [branch] = a.divergences("r", true);
    expect(branch!.record).toMatchObject({ from_seq: 12, count: 600 });
    expect(branch!.events.map((e) => e.event_id)).toEqual(Array.from({ length: 600 }, (_, i) => `lost-${i}`));
    expect(a.eventById("r", "lost-0")).toBeNull();
    expect(a.eventById("r", "won-2")?.seq).toBe(14);
    expect(a.eventById("r", "shared-9")?.seq).toBe(11);
    expect(a.maxDurableEpoch()).toBe(2);
  });
});
