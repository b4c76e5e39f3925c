#!/usr/bin/env node
// Benchmark: the replicated room log (issue #3, "Benchmarks"). Prints figures and ratios against
// baselines measured in the same run; no pass/fail.
//
//   npm run build && npm run bench:rooms [-- --parts a,b,c,d --samples 3 --json] [--ids seq|random]
//
// a. acknowledged durable sends/s into one room from a Node client: pipelined on the bidi Append
//    stream (and unary Send, 64 in flight unless --unary-window says otherwise), against JetStream acknowledged publish (window 1000)
//    and against a bare grpc-js echo stream carrying the same AppendRequest bytes (the transport alone)
// b. the append engine in-process (GroupCommit + RoomsStore, the batches it forms) against raw
//    better-sqlite3 writes of the same events, synchronous=FULL, same transactions: one row per
//    event (a hand-written log), and the same segment rows the engine wrote
// c. catch-up of 1,000,000 events from an authority gateway to a new replica gateway (two processes,
//    loopback) against a JetStream mirror catch-up of 1,000,000 messages
// d. live tail: append → applied on a following replica at 1,000 events/s, p50/p99, and CPU per
//    event on the authority and on the replica (user and system), against the CPU per message of a
//    bare grpc-js echo stream fed the same AppendRequest bytes at the same pace (the transport's
//    floor) and a JetStream stream with a mirror at the same pace
//
// Every server (gateway, nats-server, echo server) runs in its own process and every client in a
// fresh child process (bench/rooms-phases.mjs); each sample of a, b and c runs our figure and its
// baseline back to back, samples interleaved, medians printed. Gateways are the BUILT `hermes`
// command (`npm run build` first) with fresh homes under the system temp directory.

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureNatsServer } from "./lib/nats.mjs";
import { benchOptions, intOption } from "./lib/options.mjs";
import { gatewayCpuUsageMs, histogramTotals, runPhase, startGateway, startPhase } from "./lib/processes.mjs";
import { fmt, machine, median, header as printHeader, line as printLine } from "./lib/report.mjs";
import { BENCH_KEY, ROOM_MEMBERS, ROOMS_PHASES } from "./lib/rooms-bench.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const ROOM = "bench-room";

const opts = benchOptions(import.meta.url, {
  parts: { type: "string", default: "a,b,c,d" },
  samples: { type: "string", default: "3" },
  sends: { type: "string", default: "200000" },
  window: { type: "string", default: "1000" },
  "unary-sends": { type: "string", default: "20000" },
  "unary-window": { type: "string", default: "64" },
  "engine-events": { type: "string", default: "200000" },
  "engine-window": { type: "string", default: "2000" },
  events: { type: "string", default: "1000000" },
  "tail-rate": { type: "string", default: "1000" },
  "tail-seconds": { type: "string", default: "10" },
  "text-bytes": { type: "string", default: "200" },
  /** Event ids of b's and c's logs: `seq` (`e-0`, `e-1`, …, nearly sorted) or `random` (`client-<uuid v4>`, what a client that makes random ids sends). */
  ids: { type: "string", default: "seq" },
  /** Write a CPU profile of every gateway process into this directory (node --cpu-prof). */
  profile: { type: "string" },
  json: { type: "boolean", default: false },
});

const int = (name, min = 1) => intOption(opts, name, min);
const SAMPLES = int("samples");
const SENDS = int("sends");
const WINDOW = int("window");
const UNARY_SENDS = int("unary-sends");
const UNARY_CONCURRENCY = int("unary-window");
const ENGINE_EVENTS = int("engine-events");
const ENGINE_WINDOW = int("engine-window");
const EVENTS = int("events");
const TAIL_RATE = int("tail-rate");
const TAIL_SECONDS = int("tail-seconds");
const TEXT_BYTES = int("text-bytes");
const IDS = opts.ids;
if (IDS !== "seq" && IDS !== "random") {
  process.stderr.write(`--ids is seq or random, not ${IDS}\n`);
  process.exit(2);
}
const PARTS = new Set(opts.parts.split(",").map((p) => p.trim()));
/** The raw SQLite floors of (b) and (c): one row per event (a hand-written log), and the store's own segment rows. */
const RAW_LAYOUTS = ["rows", "segments"];
const NODE_ARGS = opts.profile ? ["--cpu-prof", `--cpu-prof-dir=${opts.profile}`] : [];

let gatewayModule;
let commonModule;
try {
  gatewayModule = await import(join(ROOT, "services/gateway/dist/index.js"));
  commonModule = await import(join(ROOT, "services/common/dist/index.js"));
} catch (err) {
  process.stderr.write(`cannot load the built packages (${err.message}); run \`npm run build\` first\n`);
  process.exit(2);
}
const { roomClient } = gatewayModule;
const { authMetadata, unaryCall } = commonModule;

const say = (text = "") => {
  if (!opts.json) process.stdout.write(`${text}\n`);
};
const note = (text) => process.stderr.write(`bench: ${text}\n`);
const header = (title) => {
  if (!opts.json) printHeader(title);
};
const line = (...args) => {
  if (!opts.json) printLine(...args);
};
const results = {};

/** The samples behind a median, on their own line (nothing with one sample). */
const samplesLine = (xs) => {
  if (xs.length > 1) say(`${"".padEnd(58)}   samples: ${xs.map((x) => fmt(x)).join(", ")}`);
};
/**
 * Ratios of samples run back to back (ours / its baseline), and their median: steadier than the
 * ratio of two medians when the machine's load swings between samples.
 */
const pairedLine = (ours, base, label) => {
  if (ours.length < 2) return Number.NaN;
  const ratios = ours.map((x, i) => x / base[i]);
  say(`${"".padEnd(58)}   paired with ${label}: ${ratios.map((r) => `${fmt(r, 2)}×`).join(", ")} (median ${fmt(median(ratios), 2)}×)`);
  return median(ratios);
};
const ms = (x) => `${fmt(x, 2)} ms`;
const usPerEvent = (cpuMs, n) => (cpuMs * 1000) / n;
const tempDir = (name) => mkdtempSync(join(tmpdir(), `hermes-bench-rooms-${name}-`));

async function call(url, method, req) {
  const client = roomClient(url);
  try {
    return await unaryCall((cb) => client[method](req, authMetadata(BENCH_KEY), cb));
  } finally {
    client.close();
  }
}

/** A fresh gateway process on a fresh home, with the benchmark room created. */
async function gatewayWithRoom(name, id) {
  const home = tempDir(name);
  const gw = await startGateway({ home, id, key: BENCH_KEY, nodeArgs: NODE_ARGS });
  await call(gw.url, "create", { room_id: ROOM, name: "Bench", members: ROOM_MEMBERS });
  return {
    ...gw,
    async destroy() {
      await gw.stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** Runs a client phase and measures the CPU the given server processes used meanwhile. */
async function measured(phase, args, servers) {
  const before = servers.map((s) => s.cpuMs());
  const result = await runPhase(ROOMS_PHASES, phase, args);
  result.serverCpuMs = servers.map((s, i) => s.cpuMs() - before[i]);
  return result;
}

// ---------------------------------------------------------------------------------------------

function preamble() {
  const [l1, l5, l15] = loadavg();
  let nats = "not found";
  try {
    nats = execFileSync(ensureNatsServer(), ["--version"], { encoding: "utf8" }).trim();
  } catch (err) {
    nats = `unavailable (${err.message})`;
  }
  results.machine = {
    node: process.version,
    cpus: cpus().length,
    cpu: cpus()[0]?.model ?? "?",
    loadavg: [l1, l5, l15],
    nats,
    started: new Date().toISOString(),
  };
  say(`rooms benchmark — ${machine()}, ${cpus().length} × ${results.machine.cpu}`);
  say(`load average at start: ${l1.toFixed(2)} ${l5.toFixed(2)} ${l15.toFixed(2)} (1/5/15 min); ${nats}`);
  say(
    `samples ${SAMPLES}; text ${TEXT_BYTES} B per event (JetStream: ${TEXT_BYTES} B messages); gateways synchronous=FULL, JetStream file storage (acks before fsync)`,
  );
}

async function partA() {
  header(
    `a. acknowledged durable sends into one room (${fmt(SENDS)} pipelined, window ${WINDOW}; unary ${fmt(UNARY_SENDS)} with ${UNARY_CONCURRENCY} in flight)`,
  );
  const samples = [];
  const common = { room: ROOM, textBytes: TEXT_BYTES, key: BENCH_KEY };
  for (let s = 0; s < SAMPLES; s++) {
    note(`a: sample ${s + 1}/${SAMPLES}`);
    const gw = await gatewayWithRoom("a", "gw-a");
    let stream;
    let unary;
    try {
      const batches0 = await histogramTotals(gw.http, "hermes_room_append_batch_size", BENCH_KEY);
      stream = await measured("append-stream", { ...common, url: gw.url, count: SENDS, window: WINDOW, warmup: 10_000 }, [gw]);
      const batches1 = await histogramTotals(gw.http, "hermes_room_append_batch_size", BENCH_KEY);
      stream.commits = batches1.count - batches0.count;
      stream.eventsPerCommit = (batches1.sum - batches0.sum) / stream.commits;
      unary = await measured("append-unary", { ...common, url: gw.url, count: UNARY_SENDS, concurrency: UNARY_CONCURRENCY, warmup: 2000 }, [
        gw,
      ]);
    } finally {
      await gw.destroy();
    }
    const echoServer = await startPhase(ROOMS_PHASES, "echo-server");
    let echo;
    try {
      echo = await measured("echo-stream", { ...common, url: echoServer.url, count: SENDS, window: WINDOW, warmup: 10_000 }, [echoServer]);
    } finally {
      await echoServer.stop();
    }
    const nats = await runPhase(ROOMS_PHASES, "nats-publish", { count: SENDS, window: WINDOW, textBytes: TEXT_BYTES, warmup: 10_000 });
    samples.push({ stream, unary, echo, nats });
  }
  const pick = (k, f) => samples.map((x) => x[k][f]);
  const streamRate = median(pick("stream", "rate"));
  const unaryRate = median(pick("unary", "rate"));
  const echoRate = median(pick("echo", "rate"));
  const natsRate = median(pick("nats", "rate"));
  const natsBase = { label: "JetStream", value: natsRate };
  line("JetStream acknowledged publish (window 1000)", natsRate, "msgs/s", undefined);
  samplesLine(pick("nats", "rate"));
  line("bare grpc-js echo stream, same AppendRequest bytes", echoRate, "sends/s", natsBase);
  samplesLine(pick("echo", "rate"));
  line("Append stream (bidi, pipelined), durable acks", streamRate, "sends/s", natsBase);
  samplesLine(pick("stream", "rate"));
  const pairedStream = pairedLine(pick("stream", "rate"), pick("nats", "rate"), "JetStream");
  say(`${"".padEnd(58)}   ${fmt(streamRate / echoRate, 2)}× the bare echo stream (our cost over the transport)`);
  line(`unary Send, ${UNARY_CONCURRENCY} in flight, durable acks`, unaryRate, "sends/s", natsBase);
  samplesLine(pick("unary", "rate"));
  say(
    `ack latency p50/p99: stream ${ms(median(pick("stream", "p50")))} / ${ms(median(pick("stream", "p99")))}, ` +
      `JetStream ${ms(median(pick("nats", "p50")))} / ${ms(median(pick("nats", "p99")))}, ` +
      `echo ${ms(median(pick("echo", "p50")))} / ${ms(median(pick("echo", "p99")))}, ` +
      `unary ${ms(median(pick("unary", "p50")))} / ${ms(median(pick("unary", "p99")))}`,
  );
  const gwCpu = median(samples.map((x) => usPerEvent(x.stream.serverCpuMs[0], SENDS)));
  const clientCpu = median(samples.map((x) => usPerEvent(x.stream.clientCpuMs, SENDS)));
  const echoServerCpu = median(samples.map((x) => usPerEvent(x.echo.serverCpuMs[0], SENDS)));
  const echoClientCpu = median(samples.map((x) => usPerEvent(x.echo.clientCpuMs, SENDS)));
  const natsClientCpu = median(samples.map((x) => usPerEvent(x.nats.clientCpuMs, SENDS)));
  say(`group commit on the gateway during the stream: ${fmt(median(pick("stream", "eventsPerCommit")))} sends per commit (fsync)`);
  say(
    `CPU per send: gateway ${fmt(gwCpu, 1)} µs + client ${fmt(clientCpu, 1)} µs; echo server ${fmt(echoServerCpu, 1)} µs + client ${fmt(echoClientCpu, 1)} µs; JetStream client ${fmt(natsClientCpu, 1)} µs`,
  );
  results.a = {
    streamRate,
    unaryRate,
    echoRate,
    natsRate,
    streamVsJetStream: streamRate / natsRate,
    unaryVsJetStream: unaryRate / natsRate,
    streamVsEcho: streamRate / echoRate,
    pairedStreamVsJetStream: pairedStream,
    samples,
  };
}

async function partB() {
  header(
    `b. append engine in-process (${fmt(ENGINE_EVENTS)} appends${IDS === "random" ? " with random ids" : ""}, ${ENGINE_WINDOW} submitted at a time) vs raw better-sqlite3, synchronous=FULL`,
  );
  const samples = [];
  for (let s = 0; s < SAMPLES; s++) {
    note(`b: sample ${s + 1}/${SAMPLES}`);
    const dir = tempDir("b");
    try {
      const engine = await runPhase(ROOMS_PHASES, "engine", {
        dir: join(dir, "engine"),
        count: ENGINE_EVENTS,
        window: ENGINE_WINDOW,
        textBytes: TEXT_BYTES,
        ids: IDS,
      });
      const raw = {};
      for (const layout of RAW_LAYOUTS) {
        raw[layout] = await runPhase(ROOMS_PHASES, "raw-insert", {
          from: engine.home,
          firstSeq: engine.firstSeq,
          batches: engine.batches,
          dir: join(dir, `raw-${layout}`),
          layout,
        });
      }
      const { batches: _b, ...engineSummary } = engine;
      samples.push({ engine: engineSummary, raw });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const engineRates = samples.map((x) => x.engine.rate);
  const engineRate = median(engineRates);
  const rawRate = (layout) => median(samples.map((x) => x.raw[layout].rate));
  const rows = { label: "raw, row per event", value: rawRate("rows") };
  line("raw better-sqlite3, one row per event (100-row INSERTs)", rows.value, "events/s", undefined);
  samplesLine(samples.map((x) => x.raw.rows.rate));
  line("raw better-sqlite3, the engine's segment rows", rawRate("segments"), "events/s", rows);
  samplesLine(samples.map((x) => x.raw.segments.rate));
  line("append engine (plan, hash chain, idempotency, commit)", engineRate, "events/s", rows);
  samplesLine(engineRates);
  const paired = pairedLine(
    engineRates,
    samples.map((x) => x.raw.rows.rate),
    "raw rows",
  );
  const pairedSegments = pairedLine(
    engineRates,
    samples.map((x) => x.raw.segments.rate),
    "raw segments",
  );
  say(`${"".padEnd(58)}   ${fmt(engineRate / rawRate("segments"), 2)}× raw writes of the same segment rows`);
  const e = samples[0].engine;
  say(
    `engine batches: mean ${fmt(e.batchMean)} events per commit (max ${fmt(e.batchMax)}); append latency p50/p99 ${ms(median(samples.map((x) => x.engine.p50)))} / ${ms(median(samples.map((x) => x.engine.p99)))}`,
  );
  const rawCpu = (layout) => fmt(median(samples.map((x) => usPerEvent(x.raw[layout].cpuMs, ENGINE_EVENTS))), 1);
  say(
    `CPU per event: engine ${fmt(median(samples.map((x) => usPerEvent(x.engine.engineCpuMs, ENGINE_EVENTS))), 1)} µs, raw rows ${rawCpu("rows")} µs, raw segments ${rawCpu("segments")} µs`,
  );
  results.b = {
    engineRate,
    rawRows: rows.value,
    rawSegments: rawRate("segments"),
    ratio: engineRate / rows.value,
    ratioToSegments: engineRate / rawRate("segments"),
    pairedRatio: paired,
    pairedRatioToSegments: pairedSegments,
    samples,
  };
}

async function partC() {
  header(
    `c. catch-up of ${fmt(EVENTS)} events${IDS === "random" ? " (random ids)" : ""}: authority gateway → new replica gateway (loopback) vs JetStream mirror`,
  );
  const home = tempDir("c-authority");
  const samples = [];
  let seeded;
  let authority;
  try {
    note(`c: seeding the authority with ${fmt(EVENTS)} events`);
    seeded = await runPhase(ROOMS_PHASES, "seed", {
      home,
      id: "gw-auth",
      key: BENCH_KEY,
      room: ROOM,
      events: EVENTS,
      textBytes: TEXT_BYTES,
      ids: IDS,
    });
    say(`seeded through group commit in ${fmt(seeded.secs, 1)} s (${fmt(seeded.rate)} events/s); log ends at seq ${fmt(seeded.latest)}`);
    authority = await startGateway({ home, key: BENCH_KEY, nodeArgs: NODE_ARGS });
    for (let s = 0; s < SAMPLES; s++) {
      note(`c: sample ${s + 1}/${SAMPLES}`);
      const replicaHome = tempDir("c-replica");
      const replica = await startGateway({ home: replicaHome, id: `gw-replica-${s}`, key: BENCH_KEY, nodeArgs: NODE_ARGS });
      let ours;
      try {
        ours = await measured("replicate", { replicaUrl: replica.url, fromUrl: authority.url, key: BENCH_KEY, room: ROOM }, [
          authority,
          replica,
        ]);
      } finally {
        await replica.stop();
        rmSync(replicaHome, { recursive: true, force: true });
      }
      const pull = await measured("pull-only", { url: authority.url, key: BENCH_KEY, room: ROOM, limit: 5000 }, [authority]);
      const rawApply = {};
      for (const layout of RAW_LAYOUTS) {
        const applyDir = tempDir("c-raw-apply");
        try {
          rawApply[layout] = await runPhase(ROOMS_PHASES, "raw-apply", {
            from: home,
            room: ROOM,
            pageEvents: Math.round(pull.events / pull.pages),
            dir: applyDir,
            layout,
          });
        } finally {
          rmSync(applyDir, { recursive: true, force: true });
        }
      }
      const mirror = await runPhase(ROOMS_PHASES, "nats-mirror", { count: EVENTS });
      samples.push({ ours, pull, rawApply, mirror });
    }
  } finally {
    await authority?.stop();
    rmSync(home, { recursive: true, force: true });
  }
  const oursRate = median(samples.map((x) => x.ours.rate));
  const mirrorRate = median(samples.map((x) => x.mirror.rate));
  const pullRate = median(samples.map((x) => x.pull.rate));
  const base = { label: "JetStream mirror", value: mirrorRate };
  line(`JetStream mirror catch-up (${fmt(median(samples.map((x) => x.mirror.secs)), 2)} s)`, mirrorRate, "msgs/s", undefined);
  samplesLine(samples.map((x) => x.mirror.rate));
  line(`replica catch-up, groups.replicate (${fmt(median(samples.map((x) => x.ours.secs)), 2)} s)`, oursRate, "events/s", base);
  samplesLine(samples.map((x) => x.ours.rate));
  const paired = pairedLine(
    samples.map((x) => x.ours.rate),
    samples.map((x) => x.mirror.rate),
    "JetStream",
  );
  line("pull + decode only, nothing applied (authority + wire)", pullRate, "events/s", base);
  samplesLine(samples.map((x) => x.pull.rate));
  const rawApplyRate = median(samples.map((x) => x.rawApply.rows.rate));
  line("raw SQLite writes of the same pages, row per event, NORMAL", rawApplyRate, "events/s", base);
  samplesLine(samples.map((x) => x.rawApply.rows.rate));
  const rawSegmentsRate = median(samples.map((x) => x.rawApply.segments.rate));
  line("raw SQLite writes of the same pages as segments, NORMAL", rawSegmentsRate, "events/s", base);
  samplesLine(samples.map((x) => x.rawApply.segments.rate));
  const n = samples[0].ours.ingested;
  say(
    `CPU per event during catch-up: authority ${fmt(median(samples.map((x) => usPerEvent(x.ours.serverCpuMs[0], n))), 2)} µs, replica ${fmt(median(samples.map((x) => usPerEvent(x.ours.serverCpuMs[1], n))), 2)} µs; ` +
      `packed page ${fmt(samples[0].pull.bytesPerEvent)} B per event, ${fmt(samples[0].pull.pages)} pages`,
  );
  // The work per event on both sides, and what it allows at best: with every core of the machine
  // busy on the two gateways (the authority and the replica run side by side), a catch-up cannot
  // outrun the cores' time divided by their CPU per event, however the work is spread.
  const gatewaysCpu = median(samples.map((x) => usPerEvent(x.ours.serverCpuMs[0] + x.ours.serverCpuMs[1], n)));
  const natsCpu = median(samples.map((x) => usPerEvent(x.mirror.serverCpuMs, EVENTS)));
  const cores = cpus().length;
  const cpuBound = (cores * 1e6) / gatewaysCpu;
  say(
    `CPU per event, both sides together: the two gateways ${fmt(gatewaysCpu, 2)} µs, nats-server ${fmt(natsCpu, 2)} µs (stream and mirror in one process): ${fmt(gatewaysCpu / natsCpu, 2)}×`,
  );
  say(
    `at the gateways' CPU per event, ${cores} cores all busy allow at most ${fmt(cpuBound)} events/s = ${fmt(cpuBound / mirrorRate, 2)}× the mirror`,
  );
  results.c = {
    seeded,
    oursRate,
    mirrorRate,
    pullRate,
    rawApplyRate,
    rawSegmentsRate,
    gatewaysCpuUs: gatewaysCpu,
    natsCpuUs: natsCpu,
    cpuBoundRate: cpuBound,
    ratio: oursRate / mirrorRate,
    pairedRatio: paired,
    samples,
  };
}

async function partD() {
  header(`d. live tail: append on the authority → applied on a following replica, ${fmt(TAIL_RATE)} events/s for ${TAIL_SECONDS} s`);
  const authority = await gatewayWithRoom("d-authority", "gw-auth");
  const replicaHome = tempDir("d-replica");
  const replica = await startGateway({ home: replicaHome, id: "gw-replica", key: BENCH_KEY, nodeArgs: NODE_ARGS });
  try {
    const client = roomClient(replica.url);
    await new Promise((resolve, reject) => {
      const stream = client.replicate(
        { room_id: ROOM, from: { url: authority.url, key: BENCH_KEY, peer: "" }, follow: true },
        authMetadata(BENCH_KEY),
      );
      stream.on("data", () => undefined);
      stream.on("error", reject);
      stream.on("end", resolve);
    });
    client.close();
    const cpuNow = () => Promise.all([authority, replica].map((gw) => gatewayCpuUsageMs(gw.http, BENCH_KEY)));
    const split0 = await cpuNow();
    const commits0 = await histogramTotals(authority.http, "hermes_room_append_batch_size", BENCH_KEY);
    const r = await measured(
      "tail",
      {
        authorityUrl: authority.url,
        replicaUrl: replica.url,
        key: BENCH_KEY,
        room: ROOM,
        rate: TAIL_RATE,
        seconds: TAIL_SECONDS,
        warmupSeconds: 1,
        textBytes: TEXT_BYTES,
      },
      [authority, replica],
    );
    if (r.finished !== "ok") say(`WARNING: not every event reached the replica's tail within 30 s (${r.measured} measured)`);
    say(`offered ${fmt(r.offeredRate)} events/s; ${fmt(r.measured)} events measured after 1 s of warm-up`);
    say(`durable ack on the authority     p50 ${ms(r.ackP50)}  p99 ${ms(r.ackP99)}  max ${ms(r.ackMax)}`);
    say(`applied on the replica (tail)    p50 ${ms(r.appliedP50)}  p99 ${ms(r.appliedP99)}  max ${ms(r.appliedMax)}   (goal: p99 < 20 ms)`);
    const commits1 = await histogramTotals(authority.http, "hermes_room_append_batch_size", BENCH_KEY);
    const split1 = await cpuNow();
    const events = r.sent;
    const cpuPerEvent = (i) => {
      const user = usPerEvent(split1[i].user - split0[i].user, events);
      const system = usPerEvent(split1[i].system - split0[i].system, events);
      return { user, system, total: user + system };
    };
    const cpuLine = (i) => {
      const { user, system, total } = cpuPerEvent(i);
      return `${fmt(total, 1)} µs (user ${fmt(user, 1)}, system ${fmt(system, 1)})`;
    };
    r.authorityCommits = commits1.count - commits0.count;
    say(`CPU per tail event: authority ${cpuLine(0)}, replica ${cpuLine(1)}   (goal: ≤ 100 µs each)`);
    say(
      `the authority committed ${fmt(r.authorityCommits)} group commits for ${fmt(events)} events (${fmt(events / r.authorityCommits, 2)} per commit)`,
    );
    const echoServer = await startPhase(ROOMS_PHASES, "echo-server");
    let echo;
    try {
      echo = await measured(
        "echo-tail",
        { url: echoServer.url, room: ROOM, rate: TAIL_RATE, seconds: TAIL_SECONDS, warmupSeconds: 1, textBytes: TEXT_BYTES },
        [echoServer],
      );
    } finally {
      await echoServer.stop();
    }
    const echoCpu = usPerEvent(echo.serverCpuMs[0], echo.sent);
    say(
      `bare grpc-js echo stream, same pace and bytes: server CPU ${fmt(echoCpu, 1)} µs per message (the authority: ${fmt(cpuPerEvent(0).total / echoCpu, 1)}×); echo p50 ${ms(echo.echoP50)}  p99 ${ms(echo.echoP99)}`,
    );
    const nats = await runPhase(ROOMS_PHASES, "nats-tail", {
      rate: TAIL_RATE,
      seconds: TAIL_SECONDS,
      warmupSeconds: 1,
      textBytes: TEXT_BYTES,
    });
    if (nats.finished !== "ok") say(`WARNING: not every message reached the JetStream mirror within 30 s (${nats.measured} measured)`);
    say(
      `JetStream, same pace: publish ack p50 ${ms(nats.ackP50)}  p99 ${ms(nats.ackP99)}; read from a mirror p50 ${ms(nats.appliedP50)}  p99 ${ms(nats.appliedP99)}  max ${ms(nats.appliedMax)}`,
    );
    say(`JetStream CPU per message: nats-server ${fmt(usPerEvent(nats.serverCpuMs, nats.sent), 1)} µs (stream and mirror in one process)`);
    results.d = {
      ...r,
      cpuSplitMs: split1.map((x, i) => ({ user: x.user - split0[i].user, system: x.system - split0[i].system })),
      echo,
      jetStream: nats,
    };
  } finally {
    await replica.stop();
    rmSync(replicaHome, { recursive: true, force: true });
    await authority.destroy();
  }
}

preamble();
const started = performance.now();
const PART_RUNS = { a: partA, b: partB, c: partC, d: partD };
for (const [name, run] of Object.entries(PART_RUNS)) {
  if (!PARTS.has(name)) continue;
  try {
    await run();
  } catch (err) {
    // One part failing (a gateway that would not start, a build changing under the run) leaves the others measurable.
    results[name] = { error: String(err?.message ?? err) };
    say(`part ${name} FAILED: ${err?.message ?? err}`);
    note(`part ${name} failed: ${err?.stack ?? err}`);
  }
}
const [l1, l5, l15] = loadavg();
results.machine.loadavgAtEnd = [l1, l5, l15];
say(`\nload average at end: ${l1.toFixed(2)} ${l5.toFixed(2)} ${l15.toFixed(2)}; total ${fmt((performance.now() - started) / 1000, 0)} s`);
if (opts.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
