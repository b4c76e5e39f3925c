#!/usr/bin/env node
// Benchmark: rooms that survive a dead machine. Prints figures and ratios measured in the same run;
// never passes or fails.
//
//   npm run build && npm run bench:quorum [-- --sends 50000 --window 1000 --samples 2 --failovers 3 --ttl 3 --json]
//   npm run bench:quorum -- --parts throughput --samples 1 --profile /tmp/prof   # V8 profiles of the gateways
//
// 1. Acknowledged sends/s and p50/p99 ack latency into one room, pipelined on the Append stream
//    (`window` in flight, `text-bytes` per message), for:
//      - local:  one gateway, a `local` room (durable on its disk only);
//      - quorum: three gateway processes of one coordinated mesh on a real etcd, a `quorum` room led
//                by gw-a with replicas gw-b and gw-c, min_insync 2 (every ack is durable on every
//                in-sync replica: the authority and, while in sync, both replicas);
//      - JetStream R3: three nats-server processes clustered on loopback, file storage, an R3 stream,
//                acknowledged publishes of the same size with the same window.
//    Each sample runs the three back to back; medians and per-sample ratios are printed.
// 2. Failover: in the quorum mesh, the room's authority is killed (-9) while clients send; the time
//    from the kill to the first send accepted again (by the new authority), `failovers` times
//    (the killed gateway is restarted and back in sync before the next one).
//
// Every server is its own process (the BUILT `hermes`, `npm run build` first; etcd and nats-server
// from Debian: scripts/ensure-etcd.sh, `apt-get install nats-server`), every load driver a fresh
// child process (bench/rooms-phases.mjs), as in bench:rooms.

import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startEtcd } from "./lib/etcd.mjs";
import { ensureNatsServer } from "./lib/nats.mjs";
import { benchOptions, intOption } from "./lib/options.mjs";
import { runPhase, startGateway } from "./lib/processes.mjs";
import { fmt, machine, median, percentile, header as printHeader, line as printLine } from "./lib/report.mjs";
import { BENCH_KEY, ROOM_MEMBERS, ROOMS_PHASES } from "./lib/rooms-bench.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const opts = benchOptions(import.meta.url, {
  parts: { type: "string", default: "throughput,failover" },
  samples: { type: "string", default: "2" },
  sends: { type: "string", default: "50000" },
  window: { type: "string", default: "1000" },
  "text-bytes": { type: "string", default: "200" },
  failovers: { type: "string", default: "3" },
  ttl: { type: "string", default: "3" },
  /** Write a CPU profile of every gateway process into this directory (node --cpu-prof). */
  profile: { type: "string" },
  json: { type: "boolean", default: false },
});
const int = (name, min = 1) => intOption(opts, name, min);
const SAMPLES = int("samples");
const SENDS = int("sends");
const WINDOW = int("window");
const TEXT_BYTES = int("text-bytes");
const FAILOVERS = int("failovers", 0);
const TTL = int("ttl");
const PARTS = new Set(opts.parts.split(",").map((p) => p.trim()));
// `--profile DIR`: the gateways write V8 CPU profiles there when they stop (where the ack path spends its time).
const PROFILE_ARGS = opts.profile ? ["--cpu-prof", "--cpu-prof-dir", opts.profile] : [];
const WARMUP = Math.min(10_000, Math.ceil(SENDS / 5));

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
const { authMetadata, unaryCall, deadlineIn, HermesError } = commonModule;

const results = {};
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
const ms = (x) => `${fmt(x, 2)} ms`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tempDir = (name) => mkdtempSync(join(tmpdir(), `hermes-bench-quorum-${name}-`));

async function call(url, method, req, timeoutMs = 10_000) {
  const client = roomClient(url);
  try {
    return await unaryCall((cb) => client[method](req, authMetadata(BENCH_KEY), deadlineIn(timeoutMs), cb));
  } finally {
    client.close();
  }
}

async function until(what, check, timeoutMs = 60_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch {
      // not yet
    }
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------------------------
// the systems under test

async function localGateway(room) {
  const home = tempDir("local");
  const gw = await startGateway({ home, id: "gw-local", key: BENCH_KEY, nodeArgs: PROFILE_ARGS });
  await call(gw.url, "create", { room_id: room, name: "Bench", members: ROOM_MEMBERS });
  return {
    url: gw.url,
    servers: [gw],
    async destroy() {
      await gw.stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/**
 * etcd and three gateways of one coordinated mesh (lease TTL `TTL` s), with a quorum room led by gw-a
 * (replicas gw-b, gw-c, min_insync 2) in sync on all three. Gateways can be killed and restarted on
 * their homes.
 */
async function quorumMesh(room) {
  const etcd = await startEtcd();
  const meshKey = randomBytes(24).toString("hex");
  const ids = ["gw-a", "gw-b", "gw-c"];
  const homes = new Map(ids.map((id) => [id, tempDir(id)]));
  for (const home of homes.values())
    writeFileSync(join(home, "config.yaml"), `coordinator:\n  etcd:\n    endpoints: ["${etcd.url}"]\n    lease_ttl_seconds: ${TTL}\n`, {
      mode: 0o600,
    });
  const gateways = new Map();
  const start = async (id) => {
    gateways.set(
      id,
      await startGateway({
        home: homes.get(id),
        id,
        key: BENCH_KEY,
        env: { HERMES_MESH_KEY: meshKey, HERMES_COORDINATOR: etcd.coordinator },
        nodeArgs: PROFILE_ARGS,
      }),
    );
  };
  const mesh = {
    etcd,
    ids,
    gateways,
    start,
    url: (id) => gateways.get(id).url,
    async state(id) {
      return call(gateways.get(id).url, "state", { room_id: room }, 2_000);
    },
    /** Waits until the room's ISR (as the authority reports it) holds all three. */
    async inSync() {
      return until("all three gateways in the room's ISR", async () => {
        for (const id of ids) {
          const s = await mesh.state(id).catch(() => undefined);
          if (s?.room?.role === "authority" && s.replication?.isr?.length === ids.length) return s.room.authority_gateway_id;
        }
        return undefined;
      });
    },
    async destroy() {
      await Promise.all([...gateways.values()].map((g) => g.stop()));
      await etcd.stop();
      for (const home of homes.values()) rmSync(home, { recursive: true, force: true });
    },
  };
  try {
    // One after the other: three starting at once on two cores can starve one's lease keeper past 80 % of a short TTL.
    for (const id of ids) await start(id);
    await call(mesh.url("gw-a"), "create", {
      room_id: room,
      name: "Bench quorum",
      members: ROOM_MEMBERS,
      replication: { mode: "quorum", replicas: ["gw-b", "gw-c"], min_insync: 2 },
    });
    await mesh.inSync();
    return mesh;
  } catch (err) {
    await mesh.destroy();
    throw err;
  }
}

const stream = (url, room, serverPids) =>
  runPhase(ROOMS_PHASES, "append-stream", {
    url,
    serverPids,
    key: BENCH_KEY,
    room,
    count: SENDS,
    window: WINDOW,
    textBytes: TEXT_BYTES,
    warmup: WARMUP,
  });

// ---------------------------------------------------------------------------------------------

function preamble() {
  const [l1, l5, l15] = loadavg();
  results.machine = {
    node: process.version,
    cpus: cpus().length,
    cpu: cpus()[0]?.model ?? "?",
    loadavg: [l1, l5, l15],
    started: new Date().toISOString(),
  };
  say(`quorum benchmark — ${machine()}, ${cpus().length} × ${results.machine.cpu}`);
  say(`load average at start: ${l1.toFixed(2)} ${l5.toFixed(2)} ${l15.toFixed(2)} (1/5/15 min)`);
  say(
    `samples ${SAMPLES}; ${fmt(SENDS)} sends per figure after ${fmt(WARMUP)} of warm-up, window ${WINDOW}, ${TEXT_BYTES} B per message; lease TTL ${TTL} s`,
  );
}

async function throughput() {
  ensureNatsServer(); // says how to get it before anything starts
  header(`1. acknowledged sends into one room (Append stream / JetStream publish, ${WINDOW} in flight)`);
  const samples = [];
  for (let s = 0; s < SAMPLES; s++) {
    note(`throughput: sample ${s + 1}/${SAMPLES}: local`);
    const local = await localGateway(`bench-local-${s}`);
    let localResult;
    try {
      localResult = await stream(local.url, `bench-local-${s}`, [local.servers[0].pid]);
    } finally {
      await local.destroy();
    }
    note(`throughput: sample ${s + 1}/${SAMPLES}: quorum`);
    const q = await quorumMesh(`bench-quorum-${s}`);
    let quorumResult;
    try {
      quorumResult = await stream(
        q.url("gw-a"),
        `bench-quorum-${s}`,
        q.ids.map((id) => q.gateways.get(id).pid),
      );
      quorumResult.isrAfter = (await q.state("gw-a")).replication?.isr ?? [];
    } finally {
      await q.destroy();
    }
    note(`throughput: sample ${s + 1}/${SAMPLES}: JetStream R3`);
    const nats = await runPhase(ROOMS_PHASES, "nats-publish", {
      count: SENDS,
      window: WINDOW,
      textBytes: TEXT_BYTES,
      warmup: WARMUP,
      replicas: 3,
    });
    samples.push({ local: localResult, quorum: quorumResult, nats });
  }
  const pick = (k, f) => samples.map((x) => x[k][f]);
  const rate = (k) => median(pick(k, "rate"));
  const nats = { label: "JetStream R3", value: rate("nats") };
  line("JetStream R3 (3 nats-servers, file storage), acked publish", rate("nats"), "msgs/s");
  line("local room (one gateway, fsync on its disk)", rate("local"), "sends/s", nats);
  line("quorum room (3 gateways, min_insync 2, every ISR member fsyncs)", rate("quorum"), "sends/s", nats);
  const paired = samples.map((x) => x.quorum.rate / x.nats.rate);
  const pairedLocal = samples.map((x) => x.quorum.rate / x.local.rate);
  say(`${"".padEnd(58)}   quorum / JetStream R3 per sample: ${paired.map((r) => `${fmt(r, 2)}×`).join(", ")}`);
  say(`${"".padEnd(58)}   quorum / local per sample: ${pairedLocal.map((r) => `${fmt(r, 2)}×`).join(", ")}`);
  for (const k of ["local", "quorum", "nats"]) {
    const label = { local: "local", quorum: "quorum", nats: "JetStream R3" }[k];
    say(
      `ack latency ${label.padEnd(13)} p50 ${ms(median(pick(k, "p50")))}  p99 ${ms(median(pick(k, "p99")))}   (samples: ${pick(k, "rate")
        .map((r) => fmt(r))
        .join(", ")} /s)`,
    );
  }
  // Where the two cores go: CPU per acknowledged send of every process taking part (servers in start order).
  const perSend = (k, f) => median(samples.map((x) => f(x[k]) / x[k].count)) * 1000;
  for (const [k, label, servers] of [
    ["local", "local", "gateway"],
    ["quorum", "quorum", "gw-a (authority) / gw-b / gw-c"],
    ["nats", "JetStream R3", "nats-server 1 / 2 / 3"],
  ]) {
    const serverCounts = samples[0][k].serverCpuMs.length;
    const each = Array.from({ length: serverCounts }, (_, i) => perSend(k, (r) => r.serverCpuMs[i]));
    const total = perSend(k, (r) => r.clientCpuMs + r.serverCpuMs.reduce((a, b) => a + b, 0));
    const client = perSend(k, (r) => r.clientCpuMs);
    const perServer = each.map((v) => fmt(v, 1)).join(" / ");
    say(`CPU per acked send ${label.padEnd(13)} ${fmt(total, 1)} µs in all: client ${fmt(client, 1)} µs, ${servers} ${perServer} µs`);
  }
  const isr = samples.map((x) => x.quorum.isrAfter.length);
  say(`ISR of the quorum room after each sample: ${isr.join(", ")} of 3 (acks waited for every member listed)`);
  results.throughput = {
    localRate: rate("local"),
    quorumRate: rate("quorum"),
    jetStreamR3Rate: rate("nats"),
    quorumVsJetStreamR3: rate("quorum") / rate("nats"),
    quorumVsLocal: rate("quorum") / rate("local"),
    samples,
  };
}

/**
 * Clients sending unary sends to the room as fast as they can (`loops` at a time), each following the
 * authority (`not_authority` names it; any other failure moves to the next gateway). Records the time
 * of every accepted send and which gateway accepted it.
 */
function startClients(mesh, room, loops = 8) {
  const accepted = [];
  let stopped = false;
  let target = 0;
  let n = 0;
  const runs = Array.from({ length: loops }, async () => {
    while (!stopped) {
      const at = target;
      const id = mesh.ids[at];
      const gw = mesh.gateways.get(id);
      try {
        await call(gw.url, "send", { room_id: room, event_id: `f-${n++}`, payload: { text: "x".repeat(TEXT_BYTES) } }, 1_000);
        accepted.push({ at: performance.now(), id });
      } catch (err) {
        const named = err instanceof HermesError ? err.data?.authority?.gateway_id : undefined;
        const next = named ? mesh.ids.indexOf(named) : -1;
        if (target === at) target = next >= 0 && next !== at ? next : (at + 1) % mesh.ids.length;
        await sleep(20);
      }
    }
  });
  return {
    accepted,
    async stop() {
      stopped = true;
      await Promise.all(runs);
    },
  };
}

async function failover() {
  header(`2. failover: the authority killed (-9) under load → sends accepted again (lease TTL ${TTL} s)`);
  const room = "bench-failover";
  const mesh = await quorumMesh(room);
  const times = [];
  try {
    for (let i = 0; i < FAILOVERS; i++) {
      const authority = await mesh.inSync();
      const clients = startClients(mesh, room);
      await until("sends to flow", () => clients.accepted.length >= 200);
      const killedAt = performance.now();
      await mesh.gateways.get(authority).kill9();
      const first = await until(
        "a send accepted after the kill",
        () => clients.accepted.find((a) => a.at > killedAt && a.id !== authority),
        TTL * 1000 + 60_000,
      );
      await clients.stop();
      const secs = (first.at - killedAt) / 1000;
      times.push(secs);
      say(`failover ${i + 1}: ${authority} killed → ${first.id} accepted a send after ${fmt(secs, 2)} s`);
      await mesh.start(authority);
    }
  } finally {
    await mesh.destroy();
  }
  if (times.length > 0) {
    const sorted = [...times].sort((a, b) => a - b);
    say(
      `failover median ${fmt(median(times), 2)} s, max ${fmt(sorted.at(-1), 2)} s over ${times.length}; ` +
        `against lease TTL + 3 s = ${TTL + 3} s: ${fmt(median(times) / (TTL + 3), 2)}× (p90 ${fmt(percentile(sorted, 90), 2)} s)`,
    );
  }
  results.failover = { ttlSeconds: TTL, seconds: times };
}

preamble();
const started = performance.now();
for (const [name, run] of Object.entries({ throughput, failover })) {
  if (!PARTS.has(name)) continue;
  try {
    await run();
  } catch (err) {
    results[name] = { error: String(err?.message ?? err) };
    say(`part ${name} FAILED: ${err?.message ?? err}`);
    note(`part ${name} failed: ${err?.stack ?? err}`);
  }
}
const [l1, l5, l15] = loadavg();
results.machine.loadavgAtEnd = [l1, l5, l15];
say(`\nload average at end: ${l1.toFixed(2)} ${l5.toFixed(2)} ${l15.toFixed(2)}; total ${fmt((performance.now() - started) / 1000, 0)} s`);
if (opts.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
