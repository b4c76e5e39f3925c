// The child-process bodies of bench/rooms.mjs: each phase runs in a fresh process (its own JIT,
// heap and CPU time), measures one thing and prints one BENCH-RESULT line. Servers (gateways,
// nats-server, the echo server) always run in other processes than the client measuring them.
// Started by bench/rooms.mjs as `node bench/rooms-phases.mjs --phase NAME --args JSON`.

import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import Database from "better-sqlite3";
import { Registry } from "prom-client";
import { EchoAppendStream, startEchoServer } from "./lib/grpc-echo.mjs";
import { jetStreamMirror, jetStreamTail, startNats, startNatsCluster } from "./lib/nats.mjs";
import { paced, pacedCounts, pipelined } from "./lib/pipeline.mjs";
import { printReady, printResult, processCpuMs, withDaemonFlags } from "./lib/processes.mjs";
import { percentile } from "./lib/report.mjs";
import { ROOM_MEMBERS } from "./lib/rooms-bench.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** A phase may load another checkout's build (`root` in its args): old and new builds compared by one script. */
const dist = (path) => import(join(args.root ?? ROOT, path));

const { values: opts } = parseArgs({ options: { phase: { type: "string" }, args: { type: "string", default: "{}" } } });
const args = JSON.parse(opts.args);

/** A message text of exactly `bytes` ASCII bytes that differs per index. */
function messageText(i, bytes) {
  const head = `message ${i} `;
  return head.length >= bytes ? head.slice(0, bytes) : head + "x".repeat(bytes - head.length);
}

/**
 * Event ids: `seq` ones count up (`prefix0`, `prefix1`, …: nearly sorted, so the id index grows at
 * its end), `random` ones are what a client that makes random ids sends (`client-<uuid v4>`): every commit
 * or replicated page then inserts its ids all over the index.
 */
const eventIds = (ids, prefix) => (ids === "random" ? () => `client-${randomUUID()}` : (i) => `${prefix}${i}`);

function summary(count, secs, latencies, extra = {}) {
  return {
    count,
    secs,
    rate: count / secs,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuMs: cpuMs(),
    ...extra,
  };
}

function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

async function load() {
  const [gateway, common, proto] = await Promise.all([
    dist("services/gateway/dist/index.js"),
    dist("services/common/dist/index.js"),
    import("@hermes/proto/hermes/v1/rooms"),
  ]);
  return { gateway, common, proto };
}

function unary(client, method, req, md) {
  return new Promise((resolve, reject) => method.call(client, req, md, (err, res) => (err ? reject(err) : resolve(res))));
}

// ---------------------------------------------------------------------------------------------
// a. sends

/** CPU milliseconds each of `pids` used while `run` ran (the servers' share of a timed phase). */
async function serversCpu(pids, run) {
  const before = pids.map(processCpuMs);
  const result = await run();
  return { result, serverCpuMs: pids.map((pid, i) => processCpuMs(pid) - before[i]) };
}

/** Pipelined sends on one RoomService.Append stream, `window` in flight. */
async function appendStream({ url, key, room, count, window, textBytes, warmup, serverPids = [] }) {
  const { gateway } = await load();
  const client = gateway.roomClient(url);
  const stream = new gateway.AppendStream(client, key);
  const send = (prefix) => (i) => stream.send({ room_id: room, event_id: `${prefix}${i}`, payload: { text: messageText(i, textBytes) } });
  await pipelined(warmup, window, send("warm-"));
  const cpu0 = cpuMs();
  const { result, serverCpuMs } = await serversCpu(serverPids, () => pipelined(count, window, send("s-")));
  const used = cpuMs() - cpu0;
  await stream.close();
  client.close();
  return { ...summary(count, result.secs, result.latencies), clientCpuMs: used, serverCpuMs };
}

/** Unary RoomService.Send calls, `concurrency` in flight. */
async function appendUnary({ url, key, room, count, concurrency, textBytes, warmup }) {
  const { gateway, common } = await load();
  const client = gateway.roomClient(url);
  const md = common.authMetadata(key);
  const send = (prefix) => (i) =>
    unary(client, client.send, { room_id: room, event_id: `${prefix}${i}`, payload: { text: messageText(i, textBytes) } }, md);
  await pipelined(warmup, concurrency, send("uwarm-"));
  const cpu0 = cpuMs();
  const { secs, latencies } = await pipelined(count, concurrency, send("u-"));
  const used = cpuMs() - cpu0;
  client.close();
  return { ...summary(count, secs, latencies), clientCpuMs: used };
}

async function echoServer() {
  const server = await startEchoServer();
  printReady({ url: server.url });
  await new Promise((resolve) => process.once("SIGTERM", resolve));
  await server.stop();
  return null;
}

/** The same AppendRequest bytes through a bare echo stream, same batching, same window. */
async function echoStream({ url, room, count, window, textBytes, warmup }) {
  const stream = new EchoAppendStream(url);
  const send = (prefix) => (i) => stream.send({ room_id: room, event_id: `${prefix}${i}`, payload: { text: messageText(i, textBytes) } });
  await pipelined(warmup, window, send("warm-"));
  const cpu0 = cpuMs();
  const { secs, latencies } = await pipelined(count, window, send("s-"));
  const used = cpuMs() - cpu0;
  stream.close();
  return { ...summary(count, secs, latencies), clientCpuMs: used };
}

/**
 * JetStream acknowledged publishes of `textBytes`-byte messages, `window` in flight, file storage:
 * one server and an R1 stream, or (`replicas` 3) a 3-server cluster on loopback and an R3 stream.
 */
async function natsPublish({ count, window, textBytes, warmup, replicas = 1 }) {
  const nats = replicas > 1 ? await startNatsCluster(replicas) : await startNats();
  try {
    const jsm = await jetstreamManager(nats.nc);
    await jsm.streams.add({ name: "EVENTS", subjects: ["events.>"], storage: "file", num_replicas: replicas });
    const js = jetstream(replicas > 1 ? await nats.connectToLeader("EVENTS") : nats.nc);
    const encoder = new TextEncoder();
    const send = (i) => js.publish("events.room", encoder.encode(messageText(i, textBytes)));
    await pipelined(warmup, window, send);
    const cpu0 = cpuMs();
    const { result, serverCpuMs } = await serversCpu(nats.pids ?? [nats.pid], () => pipelined(count, window, send));
    const used = cpuMs() - cpu0;
    const stored = (await jsm.streams.info("EVENTS")).state.messages;
    return { ...summary(count, result.secs, result.latencies), clientCpuMs: used, serverCpuMs, stored };
  } finally {
    await nats.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// b. the append engine in-process, and raw inserts of the same rows

/**
 * GroupCommit over RoomsStore on a real migrated state.db (synchronous=FULL): `count` client appends
 * with `window` submitted at a time, committed in the batches the engine forms. The batch sizes and
 * the database are left for the raw baseline.
 */
async function engine({ dir, count, window, textBytes, ids = "seq" }) {
  const { gateway, common } = await load();
  const { GroupCommit } = await dist("services/gateway/dist/rooms/app/group-commit.js");
  const { db, close } = await gatewayDb(dir);
  const { RoomLog } = await dist("services/gateway/dist/rooms/app/room-log.js");
  const logger = common.createLogger("rooms", "silent");
  const clock = common.systemClock;
  const log = new RoomLog({ db, gatewayId: "gw-bench", clock, logger, registry: new Registry(), maxAppendsPerCommit: 1000 });
  const rooms = new gateway.RoomsService({
    log,
    gatewayId: "gw-bench",
    clock,
    logger,
    peers: { url: () => undefined, key: () => undefined },
  });
  rooms.create({ room_id: "bench", name: "Bench", members: ROOM_MEMBERS });
  const batches = [];
  const commits = new GroupCommit(rooms.store, () => common.isoTime(Date.now()), { committed: (_rooms, size) => batches.push(size) });
  const request = (prefix) => {
    const eventId = eventIds(ids, prefix);
    return (i) => ({
      origin: "client",
      event_id: eventId(i),
      kind: "message.user",
      actor: gateway.CLIENT_ACTOR,
      payload: { text: messageText(i, textBytes) },
    });
  };
  const warm = request("warm-");
  await pipelined(Math.min(5000, count), window, (i) => commits.submit("bench", warm(i)));
  batches.length = 0;
  // The requests are built before the clock starts, as a server's wire decoding hands them over
  // (its strings are flat: a text built by concatenation here would be flattened inside the timed
  // engine, a cost no decoded request has). The raw baseline's rows are prepared untimed too.
  const next = request("e-");
  const requests = Array.from({ length: count }, (_, i) => flatStrings(next(i)));
  const cpu0 = cpuMs();
  const { secs, latencies } = await pipelined(count, window, async (i) => {
    const outcome = await commits.submit("bench", requests[i]);
    if (outcome.kind !== "appended") throw new Error(`append ${i} was ${outcome.kind}`);
  });
  const used = cpuMs() - cpu0;
  const firstSeq = rooms.store.state("bench").last_seq - count + 1;
  await close();
  const sorted = [...batches].sort((a, b) => a - b);
  return {
    ...summary(count, secs, latencies),
    engineCpuMs: used,
    home: dir,
    firstSeq,
    batches,
    batchMean: count / batches.length,
    batchP50: percentile(sorted, 50),
    batchMax: sorted.at(-1),
  };
}

/** `request` with its id and text as flat strings, like the ones a protobuf or JSON decoder returns. */
function flatStrings(request) {
  const flat = (text) => Buffer.from(text).toString();
  return { ...request, event_id: flat(request.event_id), payload: { text: flat(request.payload.text) } };
}

/** Events `from`..`to` of a room as a gateway stored them (read with the built store, untimed). */
async function storedEvents(home, room, afterSeq, count) {
  const { gateway } = await load();
  const db = gateway.openGatewayDb(new gateway.HermesHome(home));
  const events = new gateway.RoomsStore(db, "reader", () => new Date().toISOString()).events(room, afterSeq, count);
  db.close();
  return events;
}

/** The room log as earlier versions stored it, one row per event: what a hand-written SQLite log looks like. */
const ROW_PER_EVENT_SCHEMA = `
  CREATE TABLE room_events (
    room_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, kind TEXT NOT NULL, actor_json TEXT NOT NULL,
    epoch INTEGER NOT NULL, payload_json TEXT NOT NULL, created_at TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (room_id, seq), UNIQUE (room_id, event_id))`;
const EVENT_COLUMNS = "room_id, seq, event_id, kind, actor_json, epoch, payload_json, created_at, hash";
const CHUNK = 100;

/**
 * A fresh file that plain better-sqlite3 writes events into, in WAL mode at `synchronous`: the floor
 * the engine and the replica are compared with. `prepare(batch)` does everything but SQLite's work
 * (parameters, and for segments their bytes) and returns the batch's one transaction, to be timed.
 * - `rows`: one row per event into the row-per-event table above, 100-row INSERTs;
 * - `segments`: what the store writes, in a fresh gateway state.db: the batch's segment rows and,
 *   every ID_RUN_KEYS events, a run of their id keys (in chunks, as the store writes them).
 */
async function rawTarget(dir, layout, synchronous) {
  const { gateway } = await load();
  const core = await dist("services/gateway/dist/rooms/core/index.js");
  mkdirSync(dir, { recursive: true });
  if (layout === "rows") {
    const db = new Database(join(dir, "rows.db"));
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${synchronous}`);
    db.exec(ROW_PER_EVENT_SCHEMA);
    const one = db.prepare(`INSERT INTO room_events (${EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    const chunk = db.prepare(
      `INSERT INTO room_events (${EVENT_COLUMNS}) VALUES ${Array(CHUNK).fill("(?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`,
    );
    const write = db.transaction((parts) => {
      for (const params of parts) (params.length === CHUNK * 9 ? chunk : one).run(params);
    });
    return {
      prepare(batch) {
        const parts = chunked(
          batch.map((e) => [e.room_id, e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash]),
        );
        const params = parts.map((part) => part.flat());
        return () => write.immediate(params);
      },
      close: () => db.close(),
    };
  }
  const db = gateway.openGatewayDb(new gateway.HermesHome(dir));
  db.pragma(`synchronous = ${synchronous}`);
  const logId = Number(db.prepare("INSERT INTO room_logs (room_id) VALUES ('bench')").run().lastInsertRowid);
  const segment = db.prepare(
    "INSERT INTO room_log_segments (log_id, first_seq, last_seq, last_epoch, ends, body) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const run = db.prepare("INSERT INTO room_id_runs (log_id, run_id, level, count, filter) VALUES (?, ?, 0, ?, ?)");
  const chunk = db.prepare("INSERT INTO room_id_chunks (log_id, run_id, first_hash, keys) VALUES (?, ?, ?, ?)");
  const write = db.transaction((segments, flush) => {
    for (const row of segments) segment.run(row);
    if (flush === null) return;
    run.run(logId, flush.runId, flush.count, flush.filter);
    for (const row of flush.chunks) chunk.run(row);
  });
  // The ids wait in memory and are written as a sorted run every ID_RUN_KEYS, as the store does
  // (its merges of runs, done in steps between commits, are not part of this floor).
  let waiting = new core.RecentIds();
  let runId = 0;
  return {
    prepare(batch) {
      const segments = core.cutSegments(core.encodeTuples(batch)).map((run) => {
        const last = run.first_seq + run.ends.length - 1;
        return [logId, run.first_seq, last, batch[last - batch[0].seq].epoch, core.endsToBytes(run.ends), Buffer.from(run.body)];
      });
      for (const e of batch) waiting.add(core.eventIdHash(e.event_id), e.seq);
      let flush = null;
      if (core.shouldFlushIds(waiting.size)) {
        const sorted = waiting.sortedKeys();
        const filter = core.IdFilter.forKeys(sorted.length / 2);
        for (let i = 0; i < sorted.length; i += 2) filter.add(sorted[i]);
        runId++;
        const chunks = core
          .cutIdChunks(sorted)
          .map(([from, to]) => [logId, runId, sorted[2 * from], Buffer.from(core.encodeIdChunk(sorted, from, to))]);
        flush = { runId, count: sorted.length / 2, filter: Buffer.from(filter.bytes()), chunks };
        waiting = new core.RecentIds();
      }
      return () => write.immediate(segments, flush);
    },
    close: () => db.close(),
  };
}

/** 100-item parts and single items after them (the multi-row INSERT and the single-row one). */
function chunked(items) {
  const parts = [];
  let i = 0;
  for (; i + CHUNK <= items.length; i += CHUNK) parts.push(items.slice(i, i + CHUNK));
  for (; i < items.length; i++) parts.push([items[i]]);
  return parts;
}

/** (b)'s floor: the events the engine wrote, in transactions of the engine's batch sizes, at FULL. */
async function rawInsert({ from, firstSeq, batches, dir, layout }) {
  const count = batches.reduce((a, b) => a + b, 0);
  const events = await storedEvents(from, "bench", firstSeq - 1, count);
  const target = await rawTarget(dir, layout, "FULL");
  const runs = [];
  let at = 0;
  for (const size of batches) {
    runs.push(target.prepare(events.slice(at, at + size)));
    at += size;
  }
  const cpu0 = cpuMs();
  const started = performance.now();
  for (const run of runs) run();
  const secs = (performance.now() - started) / 1000;
  const used = cpuMs() - cpu0;
  target.close();
  return { count, secs, rate: count / secs, cpuMs: used, layout, transactions: batches.length };
}

// ---------------------------------------------------------------------------------------------
// c. catch-up

/** Seeds a gateway home with one room of `events` client messages through the real group-commit path (in this process). */
async function seed({ home, id, key, room, events, textBytes, ids = "seq" }) {
  const { gateway, common } = await load();
  const gw = await gateway.Gateway.start({
    home,
    overrides: { id, grpc: "127.0.0.1:0", http: "127.0.0.1:0" },
    logger: common.createLogger("gateway", "silent"),
    env: { API_SERVER_KEY: key },
  });
  gw.rooms.create({ room_id: room, name: "Catch-up", members: ROOM_MEMBERS });
  const eventId = eventIds(ids, "seed-");
  const { secs } = await pipelined(events, 2000, (i) =>
    gw.rooms.send({ room_id: room, event_id: eventId(i), payload: { text: messageText(i, textBytes) } }),
  );
  const latest = gw.rooms.store.state(room).last_seq;
  await gw.stop();
  return { events, secs, rate: events / secs, latest };
}

/** `groups.replicate` on the replica gateway from the authority, timed from the call to its result. */
async function replicate({ replicaUrl, fromUrl, key, room }) {
  const { gateway, common } = await load();
  const client = gateway.roomClient(replicaUrl);
  const started = performance.now();
  const progress = [];
  const result = await new Promise((resolve, reject) => {
    const call = client.replicate({ room_id: room, from: { url: fromUrl, key, peer: "" }, follow: false }, common.authMetadata(key));
    call.on("data", (p) => progress.push(p));
    call.on("error", reject);
    call.on("end", () => {
      const last = progress.at(-1);
      if (last?.result) resolve(last.result);
      else reject(new Error("replicate ended without a result"));
    });
  });
  const secs = (performance.now() - started) / 1000;
  client.close();
  return { secs, rate: result.ingested / secs, ingested: result.ingested, stored_seq: result.stored_seq, caught_up: result.caught_up };
}

/**
 * The authority's side and the wire alone: every packed page of the log pulled (next page in flight
 * while one is decoded, like the replicator) and decoded with unpackEvents, nothing applied.
 */
async function pullOnly({ url, key, room, limit }) {
  const { gateway, common } = await load();
  const client = gateway.roomClient(url);
  const md = common.authMetadata(key);
  const page = (since) => unary(client, client.log, { room_id: room, since_seq: since, limit, packed: true }, md);
  const started = performance.now();
  let events = 0;
  let pages = 0;
  let bytes = 0;
  let pending = page(0);
  for (;;) {
    const p = await pending;
    if (p.has_more) pending = page(Number(p.cursor));
    events += gateway.unpackEvents(room, p.packed_events).length;
    bytes += p.packed_events.length;
    pages++;
    if (!p.has_more) break;
  }
  const secs = (performance.now() - started) / 1000;
  client.close();
  return { secs, rate: events / secs, events, pages, bytesPerEvent: bytes / events };
}

/**
 * The floor of a replica's write path: the authority's events (read untimed) written into a fresh
 * file at synchronous=NORMAL (what the replica applies pages at), one transaction per page of the
 * size the replica received (rawTarget: one row per event, or the store's segment rows). No
 * decoding, no hash check, no protocol: only SQLite.
 */
async function rawApply({ from, room, pageEvents, dir, layout }) {
  const { gateway } = await load();
  const source = gateway.openGatewayDb(new gateway.HermesHome(from));
  const store = new gateway.RoomsStore(source, "reader", () => new Date().toISOString());
  const target = await rawTarget(dir, layout, "NORMAL");
  let writeMs = 0;
  let cpu = 0;
  let events = 0;
  for (let since = 0; ; ) {
    const page = store.events(room, since, pageEvents);
    if (page.length === 0) break;
    const run = target.prepare(page);
    const cpu0 = cpuMs();
    const t0 = performance.now();
    run();
    writeMs += performance.now() - t0;
    cpu += cpuMs() - cpu0;
    events += page.length;
    since = page.at(-1).seq;
  }
  source.close();
  target.close();
  return { events, secs: writeMs / 1000, rate: events / (writeMs / 1000), cpuMs: cpu, layout };
}

/**
 * A replica's page apply in this one process, without the wire: the packed pages of a seeded log
 * (read from its home untimed, as the authority serves them) decoded (fromWirePage) and applied
 * (Replicator.applyPage: plan with the chain check, store) into a fresh state.db, page by page.
 * CPU per event of decode and of apply, for quick pairs of builds (`root`: the checkout whose
 * build runs).
 */
async function applyPages({ from, room, dir, limit = 5000, events: wanted = Number.POSITIVE_INFINITY }) {
  const { gateway, common, proto } = await load();
  const { toWireAnyPage } = await dist("services/gateway/dist/rooms/api/wire.js");
  const { RoomLog } = await dist("services/gateway/dist/rooms/app/room-log.js");
  const logger = common.createLogger("rooms", "silent");
  const clock = common.systemClock;
  const source = gateway.openGatewayDb(new gateway.HermesHome(from));
  const authority = new gateway.RoomsService({
    log: new RoomLog({ db: source, gatewayId: "gw-auth", clock, logger, registry: new Registry(), maxAppendsPerCommit: 1000 }),
    gatewayId: "gw-auth",
    clock,
    logger,
    peers: { url: () => undefined, key: () => undefined },
  });
  const wire = [];
  let total = 0;
  for (let since = 0; total < wanted; ) {
    const page = toWireAnyPage(authority.logPacked({ room_id: room, since_seq: since, limit }));
    // The response as it arrives (its protobuf bytes), decoded in the timed part.
    wire.push(Buffer.from(proto.LogPage.encode(page).finish()));
    total += Number(page.cursor) - since;
    since = Number(page.cursor);
    if (!page.has_more) break;
  }
  source.close();
  const { close, replicator } = await roomLogAt(dir, "gw-replica", () => () => undefined);
  let decodeMs = 0;
  let applyMs = 0;
  let mergeMs = 0;
  let events = 0;
  const started = performance.now();
  for (const bytes of wire) {
    const c0 = cpuMs();
    const page = gateway.fromWirePage(proto.LogPage.decode(bytes));
    const c1 = cpuMs();
    const { decision } = replicator.applyPage(room, page);
    const c2 = cpuMs();
    // A turn of the event loop between pages, as a replica has while the next one arrives: the id
    // index's merge steps run there.
    await new Promise(setImmediate);
    const c3 = cpuMs();
    if (decision.kind !== "apply") throw new Error(`page at ${page.prev?.seq ?? 0} was ${decision.kind}`);
    decodeMs += c1 - c0;
    applyMs += c2 - c1;
    mergeMs += c3 - c2;
    events += page.events.length;
  }
  const secs = (performance.now() - started) / 1000;
  await close();
  return {
    events,
    pages: wire.length,
    secs,
    rate: events / secs,
    decodeUs: (decodeMs * 1000) / events,
    applyUs: (applyMs * 1000) / events,
    mergeUs: (mergeMs * 1000) / events,
    cpuUs: ((decodeMs + applyMs + mergeMs) * 1000) / events,
  };
}

async function natsMirror({ count }) {
  return jetStreamMirror({ count, cpuMs: processCpuMs });
}

// ---------------------------------------------------------------------------------------------
// d. live tail

/**
 * Appends to the authority at `rate` events/s (one Append stream, paced by the clock) while
 * subscribed to the replica that follows it: per event, issue → durable ack on the authority, and
 * issue → seen in the replica's live tail (applied there, then pushed to this subscriber).
 */
async function tail({ authorityUrl, replicaUrl, key, room, rate, seconds, warmupSeconds, textBytes }) {
  const { gateway, common } = await load();
  const auth = gateway.roomClient(authorityUrl);
  const replica = gateway.roomClient(replicaUrl);
  const md = common.authMetadata(key);
  const state = await unary(replica, replica.state, { room_id: room, include_disbanded: false }, md);
  const stream = new gateway.AppendStream(auth, key);
  const sentAt = new Map();
  const ack = [];
  const applied = [];
  const { total, warm } = pacedCounts(rate, seconds, warmupSeconds);
  let seen = 0;
  let allSeen;
  const done = new Promise((resolve) => {
    allSeen = resolve;
  });
  const sub = replica.subscribe({ room_id: room, since_seq: Number(state.room.latest_seq), packed: false }, md);
  sub.on("data", (page) => {
    const t = performance.now();
    for (const e of page.events) {
      const at = sentAt.get(e.event_id);
      if (at === undefined) continue;
      sentAt.delete(e.event_id);
      if (at.i >= warm) applied.push(t - at.t);
      if (++seen === total) allSeen();
    }
  });
  sub.on("error", () => undefined);
  const sendSecs = await paced(total, rate, (i) => {
    const eventId = `tail-${i}`;
    const t = performance.now();
    sentAt.set(eventId, { i, t });
    stream.send({ room_id: room, event_id: eventId, payload: { text: messageText(i, textBytes) } }).then(() => {
      if (i >= warm) ack.push(performance.now() - t);
    });
  });
  const timeout = new Promise((resolve) => setTimeout(() => resolve("timeout"), 30_000));
  const finished = await Promise.race([done.then(() => "ok"), timeout]);
  sub.cancel();
  await stream.close();
  auth.close();
  replica.close();
  ack.sort((a, b) => a - b);
  applied.sort((a, b) => a - b);
  return {
    finished,
    sent: total,
    measured: applied.length,
    offeredRate: total / sendSecs,
    ackP50: percentile(ack, 50),
    ackP99: percentile(ack, 99),
    ackMax: ack.at(-1),
    appliedP50: percentile(applied, 50),
    appliedP99: percentile(applied, 99),
    appliedMax: applied.at(-1),
    cpuMs: cpuMs(),
  };
}

/**
 * The transport's share of a tail event: the tail's paced AppendRequest bytes (one send per message
 * at this pace, as AppendStream sends them) through a bare grpc-js echo stream, each settled when
 * its bytes come back. The echo server's CPU per message is the floor of the authority's per event.
 */
async function echoTail({ url, room, rate, seconds, warmupSeconds, textBytes }) {
  const stream = new EchoAppendStream(url);
  const { total, warm } = pacedCounts(rate, seconds, warmupSeconds);
  const echoed = [];
  const answers = [];
  const sendSecs = await paced(total, rate, (i) => {
    const t = performance.now();
    answers.push(
      stream.send({ room_id: room, event_id: `tail-${i}`, payload: { text: messageText(i, textBytes) } }).then(() => {
        if (i >= warm) echoed.push(performance.now() - t);
      }),
    );
  });
  await Promise.all(answers);
  stream.close();
  echoed.sort((a, b) => a - b);
  return { sent: total, offeredRate: total / sendSecs, echoP50: percentile(echoed, 50), echoP99: percentile(echoed, 99), cpuMs: cpuMs() };
}

/** The same paced load on a JetStream stream and its mirror (the tail's baseline). */
async function natsTail({ rate, seconds, warmupSeconds, textBytes }) {
  const r = await jetStreamTail({ rate, seconds, warmupSeconds, bytes: textBytes, cpuMs: processCpuMs });
  r.ack.sort((a, b) => a - b);
  r.mirrored.sort((a, b) => a - b);
  return {
    finished: r.finished,
    sent: r.sent,
    measured: r.mirrored.length,
    ackP50: percentile(r.ack, 50),
    ackP99: percentile(r.ack, 99),
    appliedP50: percentile(r.mirrored, 50),
    appliedP99: percentile(r.mirrored, 99),
    appliedMax: r.mirrored.at(-1),
    serverCpuMs: r.serverCpuMs,
    cpuMs: cpuMs(),
  };
}

/**
 * The live tail's share of a commit, in one process: one-event commits (each send awaited, so
 * each is its own group commit at synchronous=FULL) on an authority with one live tail whose sink
 * converts and protobuf-encodes every page as gRPC Subscribe does. `form`: `tuples` (a replica's
 * follow stream) or `objects` (a client's subscription). Reports the time inside the commit's
 * notification (page read, built, encoded) per commit, and the process CPU per commit.
 */
/**
 * A gateway's room log and replicator in this process, on a fresh state.db in `dir` (no network:
 * the replicator only applies pages handed to it). `applied(log)` is the replicator's hook.
 */
async function roomLogAt(dir, gatewayId, applied) {
  const { gateway, common } = await load();
  const { RoomLog } = await dist("services/gateway/dist/rooms/app/room-log.js");
  const { Replicator } = await dist("services/gateway/dist/rooms/app/replicator.js");
  const logger = common.createLogger("rooms", "silent");
  const { db, close } = await gatewayDb(dir);
  const log = new RoomLog({ db, gatewayId, clock: common.systemClock, logger, registry: new Registry(), maxAppendsPerCommit: 1000 });
  const replicator = new Replicator({
    store: log.store,
    sources: new gateway.GrpcRoomSourceFactory({ url: () => undefined, key: () => undefined }),
    metrics: log.metrics,
    logger,
    now: () => new Date().toISOString(),
    applied: applied(log),
    observe: () => undefined,
  });
  return { db, close, log, replicator };
}

/** A gateway's state.db in `dir`, opened as a gateway opens it: migrated, its checkpoints on a worker thread. */
async function gatewayDb(dir) {
  const { gateway, common } = await load();
  mkdirSync(dir, { recursive: true });
  const db = gateway.openGatewayDb(new gateway.HermesHome(dir));
  // A build from before the checkpointer (an old build in a pair, `root`) checkpoints on its commits.
  const checkpointer = common.WalCheckpointer ? new common.WalCheckpointer(db) : undefined;
  const close = async () => {
    await checkpointer?.stop();
    db.close();
  };
  return { db, close };
}

async function tailCommits({ dir, commits = 3000, warmup = 500, textBytes = 200, form = "tuples" }) {
  const { gateway, common } = await load();
  const { roomServiceDefinition } = await dist("services/gateway/dist/rooms/api/room-service.js");
  const { toWireAnyPage } = await dist("services/gateway/dist/rooms/api/wire.js");
  const logger = common.createLogger("rooms", "silent");
  const clock = common.systemClock;
  const { close, log, replicator } = await roomLogAt(
    dir,
    "gw-auth",
    (log) => (roomId, rewritten, appended) => log.changes.notify(roomId, rewritten, appended),
  );
  const rooms = new gateway.RoomsService({ log, replicator, gatewayId: "gw-auth", clock, logger });
  rooms.create({ room_id: "tail", name: "tail", members: ROOM_MEMBERS });
  const serialize = roomServiceDefinition.subscribe.responseSerialize;
  let bytes = 0;
  const tuples = form === "tuples";
  rooms.subscribe(
    { room_id: "tail", since_seq: 1, packed: tuples, tuples },
    {
      send: (page) => {
        bytes += serialize(toWireAnyPage(page)).length;
        return true;
      },
      drained: () => Promise.resolve(),
      end: () => undefined,
    },
  );
  const notify = log.changes.notify.bind(log.changes);
  let tailMs = [];
  log.changes.notify = (...a) => {
    const t = performance.now();
    notify(...a);
    tailMs.push(performance.now() - t);
  };
  const send = (id, i) => rooms.send({ room_id: "tail", event_id: id, payload: { text: messageText(i, textBytes) } });
  for (let i = 0; i < warmup; i++) await send(`warm-${i}`, i);
  tailMs = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < commits; i++) await send(`t-${i}`, i);
  const cpu = process.cpuUsage(cpu0);
  const secs = (performance.now() - t0) / 1000;
  await close();
  tailMs.sort((a, b) => a - b);
  return {
    form,
    commits: tailMs.length,
    secs,
    tailUsP50: percentile(tailMs, 50) * 1000,
    tailUsMean: (tailMs.reduce((a, b) => a + b, 0) / tailMs.length) * 1000,
    cpuUsPerCommit: (cpu.user + cpu.system) / commits,
    rawCommitCpuUs: rawOneRowCommitCpuUs(join(dir, "raw.db"), commits, textBytes),
    bytes,
  };
}

/** The floor on the same disk, in the same run: CPU per bare one-row commit at synchronous=FULL (WAL). */
function rawOneRowCommitCpuUs(file, commits, textBytes) {
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE t (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)");
  const insert = db.prepare("INSERT INTO t (seq, body) VALUES (?, ?)");
  const commit = db.transaction((seq) => insert.run(seq, Buffer.from(messageText(seq, textBytes))));
  for (let i = 0; i < 200; i++) commit(i);
  const cpu0 = process.cpuUsage();
  for (let i = 200; i < 200 + commits; i++) commit(i);
  const cpu = process.cpuUsage(cpu0);
  db.close();
  return (cpu.user + cpu.system) / commits;
}

const PHASES = {
  "append-stream": appendStream,
  "append-unary": appendUnary,
  "echo-server": echoServer,
  "echo-stream": echoStream,
  "nats-publish": natsPublish,
  engine,
  "raw-insert": rawInsert,
  seed,
  replicate,
  "pull-only": pullOnly,
  "raw-apply": rawApply,
  "apply-pages": applyPages,
  "nats-mirror": natsMirror,
  tail,
  "echo-tail": echoTail,
  "tail-commits": tailCommits,
  "nats-tail": natsTail,
};

// The append engine runs inside a gateway, so (b) runs it, and its raw baseline alike, with the
// daemons' node flags, as `hermes up` and the images run a gateway.
if (opts.phase === "engine" || opts.phase === "raw-insert") await withDaemonFlags(import.meta.url);

const run = PHASES[opts.phase];
if (!run) {
  process.stderr.write(`unknown phase ${opts.phase}; one of ${Object.keys(PHASES).join(", ")}\n`);
  process.exit(2);
}
try {
  const result = await run(args);
  if (result !== null) printResult(result);
  process.exit(0);
} catch (err) {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
}
