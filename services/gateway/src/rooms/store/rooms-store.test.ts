import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, openDatabase } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { rewriteStoredEvent } from "../../../test/support/room-log-edits.js";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { purgeProfileState, rekeyProfileState } from "../../identity/store/identity-store.js";
import {
  type AppendRequest,
  buildLogPage,
  buildPackedLogPage,
  canonicalJson,
  ID_MERGE_FANOUT,
  ID_RUN_KEYS,
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
} from "../core/index.js";
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

/** Promotes the store's replica of the room to authority, as a promote does (the log made durable first). */
function promoteHere(store: RoomsStore, roomId: string): void {
  const promote = planPromote(
    store.state(roomId)!,
    { confirm: true, max_durable_epoch: store.maxDurableEpoch(), stored: store.storedKinds(roomId) },
    NOW,
  );
  if (!promote.ok) throw new Error("promote refused");
  store.syncBarrier();
  store.commitPromote(roomId, promote);
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
    expect(() => store.commitAppends([{ roomId: "r", plan: forged }])).toThrow(/event id m1 \(seq 5\) is already stored/);
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

  it("reads only the segments a page's byte budget can use, and cuts the page where a read of every segment cuts it", () => {
    const store = open("a", "gw-a");
    create(store);
    // 60 events of 8–52 KB of text (half of them two-byte "é") in commits of four: segments of about 256 KiB.
    for (let c = 0; c < 15; c++) {
      append(
        store,
        "r",
        Array.from({ length: 4 }, (_, i) => send(`big-${c}-${i}`, (c % 2 ? "é" : "x").repeat(8_000 + 6_000 * i))),
      );
    }
    const state = store.state("r")!;
    const all = store.packedEvents("r", 0, 500);
    expect(all.length).toBeGreaterThanOrEqual(8);
    for (const since_seq of [0, 1, 7, 30, 61]) {
      for (const max_bytes of [1024, 50_000, 200_000, 1_000_000, 6 * 1024 * 1024]) {
        const read = planLogRead(state, { since_seq, limit: 500, max_bytes }, { maxLimit: 5000 });
        if (!read.ok) throw new Error(read.refusal.message);
        const prev = since_seq === 0 ? null : store.eventAt("r", since_seq);
        const page = buildLogPage(state, read.value, prev, store.events("r", since_seq, 500, max_bytes));
        expect(page).toEqual(buildLogPage(state, read.value, prev, store.events("r", since_seq, 500)));
        const bounded = store.packedEvents("r", since_seq, 500, max_bytes);
        const packed = buildPackedLogPage(state, read.value, prev, bounded);
        const whole = buildPackedLogPage(state, read.value, prev, store.packedEvents("r", since_seq, 500));
        expect(packed.cursor).toBe(whole.cursor);
        // The bytes compared as Buffers (toEqual walks a byte array element by element).
        const bytes = (page: typeof packed) => Buffer.concat(page.packed.map((run) => run.body));
        expect(bytes(packed).equals(bytes(whole))).toBe(true);
        // At most one segment past the page's last event is read.
        const through = page.events.at(-1)?.seq ?? since_seq;
        expect(bounded.filter((run) => run.first_seq > through).length).toBeLessThanOrEqual(1);
      }
    }
  });

  it("keeps name and members in step with room.* events, also when a branch moves away", () => {
    const a = open("a", "gw-a");
    const b = open("b", "gw-b");
    create(a);
    append(a, "r", [send("m1")]);
    pullAll(a, b, "r");
    // b is promoted (a is cut off); a keeps writing and renames the room on its own branch.
    promoteHere(b, "r");
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
    promoteHere(b, "r");
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

describe("RoomsStore: the event id index", () => {
  const uuid = (i: number) => randomUUID({ disableEntropyCache: i < 0 });
  /** `count` appends with random ids, committed `perCommit` at a time; returns the ids in order. */
  function appendMany(store: RoomsStore, count: number, perCommit: number, id: (i: number) => string = uuid): string[] {
    const ids: string[] = [];
    for (let at = 0; at < count; at += perCommit) {
      const batch = Array.from({ length: Math.min(perCommit, count - at) }, (_, i) => id(at + i));
      append(
        store,
        "r",
        batch.map((eventId) => send(eventId, "x")),
      );
      ids.push(...batch);
    }
    return ids;
  }
  const runs = (store: RoomsStore) =>
    store.db.prepare("SELECT run_id, level, count, merging_into, merged_below FROM room_id_runs ORDER BY run_id").all() as {
      run_id: number;
      level: number;
      count: number;
      merging_into: number | null;
      merged_below: number | null;
    }[];
  const idsThrough = (store: RoomsStore) => store.db.prepare("SELECT ids_through FROM room_logs").pluck().get() as number;
  /** Every id found at its seq (room.created is seq 1), and ids never used not found. */
  function expectIndexed(store: RoomsStore, ids: readonly string[], every = 1): void {
    for (let i = 0; i < ids.length; i += every) expect(store.eventById("r", ids[i]!)?.seq).toBe(i + 2);
    for (let i = 0; i < 200; i++) expect(store.eventById("r", `never-${i}`)).toBeNull();
  }

  it("keeps the newest ids in memory, writes them as a run once there are enough, and finds every id before and after a restart", () => {
    const a = open("a", "gw-a");
    create(a);
    const ids = appendMany(a, ID_RUN_KEYS + 100, 700);
    // Four commits: the third takes the recent ids past ID_RUN_KEYS, so they became a run.
    expect(runs(a)).toEqual([{ run_id: 1, level: 0, count: 2101, merging_into: null, merged_below: null }]);
    expect(idsThrough(a)).toBe(2101);
    expectIndexed(a, ids);
    const found = a.eventsByIds("r", [ids[0]!, "nope", ids.at(-1)!]);
    expect([...found.keys()]).toEqual([ids[0], ids.at(-1)]);
    // A restart: the run from disk, the ids after ids_through read back from the segments.
    const again = new RoomsStore(a.db, "gw-a", () => NOW);
    expectIndexed(again, ids);
    expect(() => append(again, "r", [send("fresh"), send(ids[5]!)])).not.toThrow();
    expect(again.state("r")!.last_seq).toBe(ids.length + 2);
    expect(again.eventById("r", ids[5]!)?.seq).toBe(7);
  });

  it("releases the index of a room unused since the last look, keeps one in use or with merging to do, and reads it back on use", () => {
    const a = open("a", "gw-a");
    create(a);
    const ids = appendMany(a, ID_RUN_KEYS + 500, 700); // a run and ~500 recent ids
    expect(a.loadedIdIndexes()).toBe(1);
    expect(a.releaseIdleIds()).toBe(0); // used since it was loaded
    expect(a.releaseIdleIds()).toBe(1);
    expect(a.loadedIdIndexes()).toBe(0);
    // Read back on the next use: every id still found, a repeat still refused, new sends go on.
    expectIndexed(a, ids, 7);
    expect(a.loadedIdIndexes()).toBe(1);
    a.releaseIdleIds();
    a.releaseIdleIds();
    expect(a.loadedIdIndexes()).toBe(0);
    const before = reread(a, "r").state;
    const repeat = planAppendBatch(before, [{ request: send(ids.at(-1)!), stored: null }], NOW);
    expect(a.commitAppends([{ roomId: "r", plan: repeat }], { idsUnchecked: true })).toBe(false);
    expect(reread(a, "r").state).toEqual(before);
    const more = appendMany(a, 2000, 700, (i) => `more-${i}`);
    expectIndexed(a, [...ids, ...more], 11);
    // Eight runs: a merge to do keeps the index in memory however long it is idle, until it is done.
    appendMany(a, (ID_MERGE_FANOUT - 2) * 2100, 700, (i) => `last-${i}`);
    expect(runs(a).filter((r) => r.level === 0).length).toBeGreaterThanOrEqual(ID_MERGE_FANOUT);
    a.releaseIdleIds();
    expect(a.releaseIdleIds()).toBe(0);
    while (a.compactIds()) {}
    expect(runs(a).map((r) => r.level)).toEqual([1]);
    expect(a.releaseIdleIds()).toBe(1); // idle since the last look, and its merge is done
    expect(a.eventById("r", "last-0")).not.toBeNull();
  });

  it("refuses a commit of ids made without looking them up when one is stored in a run, writing nothing", () => {
    const a = open("a", "gw-a");
    create(a);
    const ids = appendMany(a, 3000, 1000);
    expect(runs(a)).toHaveLength(1);
    const before = reread(a, "r");
    const unchecked = planAppendBatch(
      before.state,
      [send("new-1"), send(ids[10]!)].map((request) => ({ request, stored: null })),
      NOW,
    );
    expect(unchecked.appended).toHaveLength(2);
    expect(a.commitAppends([{ roomId: "r", plan: unchecked }], { idsUnchecked: true })).toBe(false);
    expect(reread(a, "r").state).toEqual(before.state);
    expect(a.eventById("r", "new-1")).toBeNull();
  });

  it("merges runs in steps; between steps, after a restart in the middle, and after the merge every id is found", () => {
    const a = open("a", "gw-a");
    create(a);
    // Eight runs of about 2,100 keys (a run is written by the commit that takes the recent ids past
    // ID_RUN_KEYS); merged in steps of about 4,096 keys.
    const ids = appendMany(a, ID_MERGE_FANOUT * 2100 - 1, 700);
    expect(runs(a).map((r) => r.level)).toEqual(Array(ID_MERGE_FANOUT).fill(0));
    const step = 4096;
    expect(a.compactIds(step)).toBe(true); // the merge starts and takes its first step
    const target = runs(a).at(-1)!;
    expect(target).toMatchObject({ level: 1, count: ids.length + 1, merging_into: null });
    expect(target.merged_below).toBeGreaterThan(0);
    expect(runs(a).filter((r) => r.merging_into === target.run_id)).toHaveLength(ID_MERGE_FANOUT);
    expectIndexed(a, ids, 7);
    // kill -9 here is a new store on what is on disk: the target's filter is rebuilt, the merge resumes.
    const again = new RoomsStore(a.db, "gw-a", () => NOW);
    expectIndexed(again, ids, 7);
    let steps = 1;
    while (again.compactIds(step)) steps++;
    expect(steps).toBe(Math.ceil(ids.length / step) + 1); // the last call finds nothing to do
    expect(runs(again)).toEqual([{ ...target, merged_below: null }]);
    expect(again.db.prepare("SELECT count(*) FROM room_id_chunks WHERE run_id <> ?").pluck().get(target.run_id)).toBe(0);
    expectIndexed(again, ids);
    expectIndexed(new RoomsStore(a.db, "gw-a", () => NOW), ids, 3);
  });

  it("refuses a replica page whose event id the log already holds in a run", () => {
    const a = open("a", "gw-a");
    const b = open("b", "gw-b");
    create(a);
    const ids = appendMany(a, 3000, 1000);
    pullPacked(a, b, "r");
    expect(runs(b)).toHaveLength(1);
    // The authority's next event reuses an id (as no authority of ours writes): b must not store it.
    const state = a.state("r")!;
    const repeat = sealEvent(
      { ...a.eventAt("r", 2)!, seq: state.last_seq + 1, event_id: ids[0]!, epoch: state.authority.epoch },
      state.last_hash,
    );
    const plan = planAppendBatch(state, [{ request: send("placeholder"), stored: null }], NOW);
    const forged = { ...plan, run: undefined, appended: [repeat], state: { ...plan.state, last_hash: repeat.hash } };
    a.commitAppends([{ roomId: "r", plan: forged }], {});
    expect(() => pullPacked(a, b, "r")).toThrow(/is already stored/);
    expect(b.state("r")!.last_seq).toBe(state.last_seq);
  });

  it("takes the ids of a branch that moves away out of the runs that hold them, so they can be used again", () => {
    const a = open("a", "gw-a");
    const b = open("b", "gw-b");
    create(a);
    append(a, "r", [send("shared")]);
    pullAll(a, b, "r");
    promoteHere(b, "r");
    append(b, "r", [send("won")]);
    // a writes on alone: 3 commits of 1,000, so most of its branch is in a run when it moves away.
    const lost = appendMany(a, 3000, 1000);
    expect(runs(a)).toHaveLength(1);
    expect(idsThrough(a)).toBe(3002);
    a.saveState("r", { ...a.state("r")!, role: "replica", authority: { gateway_id: "gw-b", epoch: 2 }, latest_seq: 0, max_epoch_seen: 2 });
    pullPacked(b, a, "r");
    expect(reread(a, "r").state).toMatchObject({ last_seq: 4, safety_status: "diverged" });
    expect(idsThrough(a)).toBe(2);
    for (const id of lost) expect(a.eventById("r", id)).toBeNull();
    expect(a.eventById("r", "won")?.seq).toBe(4);
    expect(a.eventById("r", "shared")?.seq).toBe(2);
    // The run keeps the keys of seqs 1 and 2, which stayed.
    expect(a.db.prepare("SELECT sum(length(keys)) / 16 FROM room_id_chunks").pluck().get()).toBe(2);
    // A moved id sent again to the winning side is a new event there, and a replicates it.
    append(b, "r", [send(lost[0]!)]);
    pullPacked(b, a, "r");
    expect(a.eventById("r", lost[0]!)?.seq).toBe(5);
  });

  it("says the database is corrupt when a key points at an event with another id", () => {
    const a = open("a", "gw-a");
    create(a);
    const ids = appendMany(a, 3000, 1000);
    const [firstHash, keys] = a.db.prepare("SELECT first_hash, keys FROM room_id_chunks ORDER BY first_hash LIMIT 1").raw().get() as [
      number,
      Buffer,
    ];
    // The first key's seq moved to another event's seq.
    const edited = Buffer.from(keys);
    const seq = edited.readDoubleLE(8);
    edited.writeDoubleLE(seq === 2 ? 3 : 2, 8);
    a.db.prepare("UPDATE room_id_chunks SET keys = ? WHERE first_hash = ?").run(edited, firstHash);
    const fresh = new RoomsStore(a.db, "gw-a", () => NOW);
    expect(() => fresh.eventById("r", ids[seq - 2]!)).toThrow(/event id index points at seq/);
  });
});
