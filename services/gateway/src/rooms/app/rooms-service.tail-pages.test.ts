import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, openDatabase } from "@hermes/common";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { decodeRun, MAX_REPLICATION_LOG_LIMIT, packedBytes } from "../core/index.js";
import type { AnyPage, PageSink } from "./live-tail.js";
import { Replicator } from "./replicator.js";
import { RoomLog } from "./room-log.js";
import { GrpcRoomSourceFactory } from "./room-source.js";
import { RoomsService } from "./rooms-service.js";

/**
 * Tails of one room that read after the same seq (the replicas of a quorum room, after each
 * commit) share the page: read once, the same object for each, so the gRPC sink converts and
 * encodes it once. Any change to the room (a commit, an authority change) makes the next read a
 * new one, and every tail still gets exactly the log.
 */
const homes: string[] = [];
afterEach(() => {
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

function service(gatewayId = "gw-a", createRoom = true) {
  const home = mkdtempSync(join(tmpdir(), "hermes-tail-pages-"));
  homes.push(home);
  const db = openDatabase(join(home, "state.db"), { label: "test state.db", migrations: GATEWAY_MIGRATIONS });
  const clock = { now: () => Date.UTC(2026, 0, 1) };
  const logger = createLogger("test", "silent");
  const log = new RoomLog({ db, gatewayId, clock, logger, registry: new Registry(), maxAppendsPerCommit: 1000 });
  const replicator = new Replicator({
    store: log.store,
    sources: new GrpcRoomSourceFactory({ url: () => undefined, key: () => undefined }),
    metrics: log.metrics,
    logger,
    now: () => new Date(clock.now()).toISOString(),
    applied: (roomId, rewritten, appended) => log.changes.notify(roomId, rewritten, appended),
    observe: (roomId, authority) => log.observe(roomId, authority),
  });
  const rooms = new RoomsService({ log, replicator, gatewayId, clock, logger });
  if (!createRoom) return rooms;
  rooms.create({
    room_id: "r",
    name: "R",
    members: [
      { member_id: "alice", profile: "alice" },
      { member_id: "bob", profile: "bob" },
    ],
  });
  return rooms;
}

function tail(): { pages: AnyPage[]; sink: PageSink } {
  const pages: AnyPage[] = [];
  return { pages, sink: { send: (p) => pages.push(p) > 0, drained: () => Promise.resolve(), end: () => undefined } };
}

/** The seqs a page carries: its runs may start before its cursor's `since` (a segment is sent whole). */
const seqsOf = (page: AnyPage): number[] => {
  if (!("packed" in page)) return page.events.map((e) => e.seq);
  const since = page.prev?.seq ?? 0;
  return page.packed.flatMap((run) => Array.from(run.ends, (_, i) => run.first_seq + i)).filter((s) => s > since && s <= page.cursor);
};

describe("live tails of one room reading after the same seq", () => {
  it("get one page object per commit, and each gets every event once, in order", async () => {
    const rooms = service();
    const a = tail();
    const b = tail();
    rooms.subscribe({ room_id: "r", since_seq: 1, tuples: true }, a.sink);
    rooms.subscribe({ room_id: "r", since_seq: 1, tuples: true }, b.sink);
    for (let i = 0; i < 3; i++) await rooms.send({ room_id: "r", event_id: `m${i}`, payload: { text: `hello ${i}` } });
    await new Promise((r) => setImmediate(r));
    // Handshakes, then one page per commit: the same object for both tails.
    expect(a.pages).toHaveLength(b.pages.length);
    const committed = a.pages.filter((p) => seqsOf(p).length > 0);
    expect(committed.length).toBeGreaterThan(0);
    for (const page of committed) expect(b.pages).toContain(page);
    expect(a.pages.flatMap(seqsOf)).toEqual([2, 3, 4]);
    expect(b.pages.flatMap(seqsOf)).toEqual([2, 3, 4]);
  });

  it("a tail behind the others reads its own page, and a later commit is never served from an older page", async () => {
    const rooms = service();
    await rooms.send({ room_id: "r", event_id: "m0", payload: { text: "first" } });
    const ahead = tail();
    const behind = tail();
    rooms.subscribe({ room_id: "r", since_seq: 2, tuples: true }, ahead.sink);
    rooms.subscribe({ room_id: "r", since_seq: 1, tuples: true }, behind.sink);
    await rooms.send({ room_id: "r", event_id: "m1", payload: { text: "second" } });
    await new Promise((r) => setImmediate(r));
    expect(ahead.pages.flatMap(seqsOf)).toEqual([3]);
    expect(behind.pages.flatMap(seqsOf)).toEqual([2, 3]);
  });
});

describe("a replica's live tail", () => {
  it("serves its subscribers the events of the page it just applied, not read back from the store, and the same page", async () => {
    const authority = service();
    const replica = service("gw-b", false);
    const pageAfter = (since: number) => authority.log({ room_id: "r", since_seq: since, limit: 100, packed: true });
    replica.replicator.applyPage("r", pageAfter(0));
    const sub = tail();
    replica.subscribe({ room_id: "r", since_seq: 1 }, sub.sink);
    await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 4; i++) await authority.send({ room_id: "r", event_id: `m${i}`, payload: { text: `hello ${i}` } });
    replica.replicator.applyPage("r", pageAfter(1)); // 2..5 (the tail reads the event at its cursor once)
    await new Promise((r) => setImmediate(r));
    for (let i = 4; i < 6; i++) await authority.send({ room_id: "r", event_id: `m${i}`, payload: { text: `hello ${i}` } });
    const storeReads = vi.spyOn(replica.store, "events");
    replica.replicator.applyPage("r", pageAfter(5)); // 6..7
    expect(storeReads).not.toHaveBeenCalled();
    storeReads.mockRestore();
    expect(sub.pages.flatMap(seqsOf)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(sub.pages.at(-1)).toEqual(replica.log({ room_id: "r", since_seq: 5 }));
  });
});

describe("the authority's live tail", () => {
  /** The events of a page, decoded (a packed page's runs may start before its cursor's since). */
  const eventsOf = (page: AnyPage) =>
    "packed" in page
      ? page.packed.flatMap((run) => decodeRun(page.room_id, run)).filter((e) => e.seq > (page.prev?.seq ?? 0) && e.seq <= page.cursor)
      : page.events;

  it("pages each commit from the events and bytes it stored, not read back, and they are the stored log's", async () => {
    const rooms = service();
    const packed = tail();
    const objects = tail();
    rooms.subscribe({ room_id: "r", since_seq: 1, packed: true, tuples: true }, packed.sink);
    rooms.subscribe({ room_id: "r", since_seq: 1 }, objects.sink);
    await rooms.send({ room_id: "r", event_id: "m0", payload: { text: "first" } }); // the tails read the event at their cursor once
    const packedReads = vi.spyOn(rooms.store, "packedEvents");
    const eventReads = vi.spyOn(rooms.store, "events");
    await Promise.all([1, 2, 3].map((i) => rooms.send({ room_id: "r", event_id: `m${i}`, payload: { text: `hello ${i}` } })));
    await rooms.send({ room_id: "r", event_id: "m4", payload: { text: "last" } });
    expect(packedReads).not.toHaveBeenCalled();
    expect(eventReads).not.toHaveBeenCalled();
    packedReads.mockRestore();
    eventReads.mockRestore();
    expect(packed.pages.flatMap(seqsOf)).toEqual([2, 3, 4, 5, 6]);
    expect(objects.pages.flatMap(seqsOf)).toEqual([2, 3, 4, 5, 6]);
    const last = packed.pages.at(-1)!;
    const stored = rooms.logPacked({ room_id: "r", since_seq: 5, limit: MAX_REPLICATION_LOG_LIMIT });
    expect({ ...last, packed: packedBytes((last as typeof stored).packed) }).toEqual({ ...stored, packed: packedBytes(stored.packed) });
    expect(packed.pages.flatMap(eventsOf)).toEqual(rooms.log({ room_id: "r", since_seq: 1 }).events);
    expect(objects.pages.at(-1)).toEqual(rooms.log({ room_id: "r", since_seq: 5 }));
  });

  it("a commit that met a stored event id (a retry) pages only what the second commit stored", async () => {
    const rooms = service();
    await rooms.send({ room_id: "r", event_id: "m0", payload: { text: "first" } });
    const packed = tail();
    rooms.subscribe({ room_id: "r", since_seq: 2, packed: true, tuples: true }, packed.sink);
    // One flush: a retry of m0 (answered by the stored event) and a new m1.
    const [retry] = await Promise.all([
      rooms.send({ room_id: "r", event_id: "m0", payload: { text: "first" } }),
      rooms.send({ room_id: "r", event_id: "m1", payload: { text: "second" } }),
    ]);
    expect(retry.idempotent).toBe(true);
    expect(packed.pages.flatMap(seqsOf)).toEqual([3]);
    expect(packed.pages.flatMap(eventsOf)).toEqual(rooms.log({ room_id: "r", since_seq: 2 }).events);
  });
});
