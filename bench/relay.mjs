#!/usr/bin/env node
// Benchmark: relay-brokered bot-to-bot delivery (issue #5). Prints figures and ratios only; no pass/fail.
//
//   npm run build && npm run bench:relay [-- --targets 100 --messages 2000 --samples 200 --json]
//
// Setup, all on 127.0.0.1 with the BUILT packages (like the `hermes` binary):
//   relay        `hermes relay start` as its own process (SQLite queue, synchronous=FULL)
//   gateway "a"  the senders (10 bots), in this process, dialling out to the relay; it also has "b"
//                registered as a direct peer (bot_peers.b + HERMES_PEER_B_KEY)
//   gateway "b"  N target bots on the embedded `local` provider, as its own process
//                (`hermes gateway start`), dialling out too. Gateways are separate machines in real
//                life: in one process their synchronous SQLite commits would queue behind each other.
// Phases:
//   throughput   M deliveries enqueued at once from a's senders to b's N targets (round robin,
//                `<target>@b`, so through the relay), until every one has settled: deliveries/s
//   latency      S deliveries one after another, alternating the relay route (`target@b`) and the
//                direct peer route (`b/target`) to the same bots: enqueue → settled, p50/p95/mean,
//                and what the relay adds over the direct delivery (difference and ratio)
//   relay CPU    the relay process's CPU seconds per brokered delivery (from its /metrics)
//   relay alone  the same relay between two scripted gateways in this process that answer every
//                delivery at once (no bots, no gateway databases): the relay's own ceiling

import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, credentials, Metadata } from "@grpc/grpc-js";
import { stringify } from "yaml";
import { GatewayFrame, RelayFrame } from "../proto/dist/gen/hermes/v1/relay.js";
import { benchOptions, intOption } from "./lib/options.mjs";
import { fmt, percentile } from "./lib/report.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BIN = join(ROOT, "services/cli/bin/hermes.js");
const DIST = { gateway: join(ROOT, "services/gateway/dist/index.js"), common: join(ROOT, "services/common/dist/index.js") };

const opts = benchOptions(import.meta.url, {
  targets: { type: "string", default: "100" },
  messages: { type: "string", default: "2000" },
  samples: { type: "string", default: "200" },
  json: { type: "boolean", default: false },
  keep: { type: "boolean", default: false },
});
const TARGETS = intOption(opts, "targets", 1);
const MESSAGES = intOption(opts, "messages", 1);
const SAMPLES = intOption(opts, "samples", 1);
const SENDERS = 10;
const API_KEY = "bench-relay-api-key-0123456789";

let Gateway;
let createLogger;
try {
  ({ Gateway } = await import(DIST.gateway));
  ({ createLogger } = await import(DIST.common));
} catch (err) {
  process.stderr.write(`cannot load the built packages (${err.message}); run \`npm run build\` first\n`);
  process.exit(2);
}

const log = (text) => {
  if (!opts.json) process.stdout.write(`${text}\n`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(check, what, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const env = { ...process.env, HERMES_LOG_LEVEL: "warn" };
for (const k of Object.keys(env)) if (k.startsWith("HERMES_") && k !== "HERMES_LOG_LEVEL") delete env[k];

function hermes(args) {
  return execFileSync(process.execPath, [BIN, ...args], { env, encoding: "utf8" });
}

const work = mkdtempSync(join(tmpdir(), "bench-relay-"));
const relayData = join(work, "relay");
const children = [];
const gateways = [];

async function startRelay() {
  const keys = {};
  for (const c of ["a", "b", "x", "y"]) keys[c] = JSON.parse(hermes(["relay", "key", "add", c, "--data", relayData, "--json"])).key;
  // Room for every target in parallel (the default cap is 64).
  writeFileSync(join(relayData, "relay.yaml"), stringify({ max_parallel_targets: 256 }));
  const child = spawn(process.execPath, [BIN, "relay", "start", "--data", relayData, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"], {
    env,
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const line = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (c) => {
      out += c.toString();
      const l = out.split("\n").find((x) => x.startsWith("relay ready:"));
      if (l) resolve(l);
    });
    child.once("exit", (code) => reject(new Error(`relay exited (${code}): ${out}`)));
  });
  return { keys, grpc: /grpc=(\S+)/.exec(line)[1], http: /http=(\S+)/.exec(line)[1], child };
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function processCpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

async function relayCpuSeconds(http) {
  const text = await (await fetch(`http://${http}/metrics`)).text();
  const m = /^hermes_process_cpu_seconds_total(?:\{[^}]*\})? ([0-9.eE+-]+)$/m.exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

function writeGatewayConfig(id, config) {
  const home = join(work, id);
  mkdirSync(home, { recursive: true });
  writeFileSync(
    join(home, "config.yaml"),
    stringify({
      gateway: { api_key: API_KEY },
      delivery: { max_parallel_targets: Math.min(256, Math.max(TARGETS, 8)), retry_delay_seconds: 0 },
      ...config,
    }),
  );
  return home;
}

async function startGateway(id, relay, config) {
  const home = writeGatewayConfig(id, config);
  const gw = await Gateway.start({
    home,
    overrides: { id, grpc: "127.0.0.1:0", http: "127.0.0.1:0", relayUrl: `grpc://${relay.grpc}`, relayKey: relay.keys[id] },
    logger: createLogger("gateway", "silent"),
    env: {},
  });
  gateways.push(gw);
  return { gw, home };
}

/** The target gateway as its own process, with its bots created beforehand. */
async function startTargetGateway(relay, names) {
  const home = writeGatewayConfig("b", {});
  const setup = await Gateway.start({
    home,
    overrides: { id: "b", grpc: "127.0.0.1:0", http: "127.0.0.1:0" },
    logger: createLogger("gateway", "silent"),
    env: {},
  });
  for (const name of names) setup.profiles.create(name, { title: "Bench target" });
  await setup.stop();
  const child = spawn(
    process.execPath,
    [
      BIN,
      "--home",
      home,
      "gateway",
      "start",
      "--grpc",
      "127.0.0.1:0",
      "--http",
      "127.0.0.1:0",
      "--relay",
      `grpc://${relay.grpc}`,
      "--relay-key",
      relay.keys.b,
    ],
    { env, stdio: ["ignore", "pipe", "inherit"] },
  );
  children.push(child);
  const line = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (c) => {
      out += c.toString();
      const l = out.split("\n").find((x) => x.startsWith("gateway ready:"));
      if (l) resolve(l);
    });
    child.once("exit", (code) => reject(new Error(`gateway b exited (${code}): ${out}`)));
  });
  return { grpc: /grpc=(\S+)/.exec(line)[1], pid: child.pid };
}

/** A scripted gateway on a raw Connect stream: `onFrame(frame, write)` for every relay frame. */
async function scriptedGateway(relay, connection, onFrame) {
  const client = new Client(relay.grpc, credentials.createInsecure());
  const md = new Metadata();
  md.set("authorization", `Bearer ${relay.keys[connection]}`);
  const stream = client.makeBidiStreamRequest(
    "/hermes.v1.RelayService/Connect",
    (v) => Buffer.from(GatewayFrame.encode(v).finish()),
    (b) => RelayFrame.decode(b),
    md,
  );
  const write = (frame) => stream.write(frame);
  const welcomed = new Promise((resolve) =>
    stream.on("data", (f) => {
      if (f.frame?.$case === "welcome") resolve();
      onFrame(f, write);
    }),
  );
  stream.on("error", () => undefined);
  write({ frame: { $case: "hello", value: { connection, gateway_id: `bench-${connection}`, version: "bench" } } });
  await welcomed;
  return {
    write,
    close() {
      stream.end();
      client.close();
    },
  };
}

/** The relay between two scripted gateways: M deliveries to N targets, answered at once. */
async function relayAlone(relay) {
  let resolveAll;
  const all = new Promise((r) => (resolveAll = r));
  let outcomes = 0;
  const y = await scriptedGateway(relay, "y", (f, write) => {
    if (f.frame?.$case !== "deliver") return;
    const id = f.frame.value.envelope.delivery_id;
    const receipt = {
      delivery_id: id,
      from: "s@x",
      target: f.frame.value.envelope.target,
      state: "settled",
      attempts: 1,
      created_at: new Date().toISOString(),
      reply: "ok",
    };
    write({ frame: { $case: "result", value: { delivery_id: id, result: { $case: "receipt", value: receipt } } } });
  });
  const x = await scriptedGateway(relay, "x", (f) => {
    if (f.frame?.$case === "outcome" && ++outcomes === MESSAGES) resolveAll();
  });
  const cpu0 = await relayCpuSeconds(relay.http);
  const t0 = performance.now();
  for (let i = 0; i < MESSAGES; i++) {
    const handle = `t${i % TARGETS}`;
    const envelope = {
      delivery_id: `alone_${i}`,
      from_profile: "s",
      from_gateway: "bench-x",
      target: `${handle}@y`,
      message: `message ${i}`,
      created_at: new Date().toISOString(),
      ttl_seconds: 900,
    };
    x.write({ frame: { $case: "send", value: { envelope, target_connection: "y", target_handle: handle, sender_name: "s" } } });
  }
  await all;
  const ms = performance.now() - t0;
  const cpu1 = await relayCpuSeconds(relay.http);
  x.close();
  y.close();
  return { per_second: (MESSAGES / ms) * 1000, relay_cpu_ms_per_delivery: ((cpu1 - cpu0) * 1000) / MESSAGES };
}

function stats(samples) {
  const sorted = [...samples].sort((x, y) => x - y);
  return {
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    mean: sorted.reduce((s, x) => s + x, 0) / sorted.length,
  };
}

async function main() {
  const relay = await startRelay();
  const targetNames = Array.from({ length: TARGETS }, (_, i) => `target${String(i).padStart(3, "0")}`);
  const b = await startTargetGateway(relay, targetNames);
  const a = await startGateway("a", relay, { bot_peers: { b: { url: `grpc://${b.grpc}` } } });
  writeFileSync(join(a.home, ".env"), `HERMES_PEER_B_KEY=${API_KEY}\n`, { mode: 0o600 });
  const senders = Array.from({ length: SENDERS }, (_, i) => `sender${i}`);
  for (const name of senders) a.gw.profiles.create(name, { title: "Bench sender" });
  await until(() => a.gw.relay.remoteRoster().length >= TARGETS, "the relay roster to reach a");
  log(
    `relay benchmark: ${TARGETS} targets, ${MESSAGES} deliveries, ${SAMPLES} latency samples per route; ${process.version}, ${process.platform}/${process.arch}`,
  );

  // `send` acks once the delivery is committed (a promise); `wait` resolves when it has ended.
  const ended = async (ack) => a.gw.deliveries.wait((await ack).delivery_id);
  const sendAndWait = (from, to, text) => ended(a.gw.deliveries.send(from, to, text));

  // Warm-up: every target once through each route.
  await Promise.all(targetNames.map((t, i) => sendAndWait(senders[i % SENDERS], `${t}@b`, "warm up")));
  for (const t of targetNames.slice(0, 5)) await sendAndWait(senders[0], `b/${t}`, "warm up");

  // Throughput through the relay.
  const cpu0 = await relayCpuSeconds(relay.http);
  const cpuB0 = processCpuSeconds(b.pid);
  const cpuA0 = process.cpuUsage();
  const t0 = performance.now();
  const acks = [];
  for (let i = 0; i < MESSAGES; i++) {
    acks.push(a.gw.deliveries.send(senders[i % SENDERS], `${targetNames[i % TARGETS]}@b`, `message ${i}`));
  }
  const enqueueMs = performance.now() - t0;
  const receipts = await Promise.all(acks.map(ended));
  const throughputMs = performance.now() - t0;
  const cpu1 = await relayCpuSeconds(relay.http);
  const cpuA = process.cpuUsage(cpuA0);
  const cpuB = processCpuSeconds(b.pid) - cpuB0;
  const settled = receipts.filter((r) => r.state === "settled").length;
  const perSecond = (MESSAGES / throughputMs) * 1000;

  // Latency: relay vs direct peer, alternating, one at a time.
  const viaRelay = [];
  const direct = [];
  for (let i = 0; i < SAMPLES; i++) {
    const target = targetNames[i % TARGETS];
    for (const [route, into] of i % 2 === 0
      ? [
          [`${target}@b`, viaRelay],
          [`b/${target}`, direct],
        ]
      : [
          [`b/${target}`, direct],
          [`${target}@b`, viaRelay],
        ]) {
      const s = performance.now();
      const r = await sendAndWait(senders[i % SENDERS], route, `latency ${i}`);
      if (r.state !== "settled") throw new Error(`latency sample via ${route} ended ${r.state}: ${r.error}`);
      into.push(performance.now() - s);
    }
  }
  const alone = await relayAlone(relay);
  const r = stats(viaRelay);
  const d = stats(direct);
  const result = {
    targets: TARGETS,
    messages: MESSAGES,
    settled,
    throughput_per_second: perSecond,
    enqueue_ms: enqueueMs,
    total_ms: throughputMs,
    relay_cpu_ms_per_delivery: ((cpu1 - cpu0) * 1000) / MESSAGES,
    sender_gateway_cpu_ms_per_delivery: (cpuA.user + cpuA.system) / 1000 / MESSAGES,
    target_gateway_cpu_ms_per_delivery: (cpuB * 1000) / MESSAGES,
    latency_ms: { relay: r, direct: d, added_p50: r.p50 - d.p50, added_mean: r.mean - d.mean, ratio_p50: r.p50 / d.p50 },
    samples: SAMPLES,
    relay_alone: alone,
  };
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  log("\n== throughput (relay-brokered, local provider)");
  log(`${"deliveries settled".padEnd(50)} ${fmt(settled).padStart(10)} of ${fmt(MESSAGES)}`);
  log(`${"enqueue (message_agent acks, outbox commits)".padEnd(50)} ${fmt(enqueueMs).padStart(10)} ms`);
  log(`${"all settled".padEnd(50)} ${fmt(throughputMs).padStart(10)} ms`);
  log(`${"deliveries/s to the targets".padEnd(50)} ${fmt(perSecond, 1).padStart(10)} /s`);
  log(`${"CPU per delivery: relay process".padEnd(50)} ${fmt(result.relay_cpu_ms_per_delivery, 3).padStart(10)} ms`);
  log(
    `${"CPU per delivery: sender gateway (this process)".padEnd(50)} ${fmt(result.sender_gateway_cpu_ms_per_delivery, 3).padStart(10)} ms`,
  );
  log(`${"CPU per delivery: target gateway process".padEnd(50)} ${fmt(result.target_gateway_cpu_ms_per_delivery, 3).padStart(10)} ms`);
  log("\n== the relay alone (scripted gateways answering at once, same relay process)");
  log(
    `${"deliveries/s".padEnd(50)} ${fmt(alone.per_second, 1).padStart(10)} /s  (${fmt(alone.per_second / perSecond, 1)}× the end-to-end figure)`,
  );
  log(`${"CPU per delivery: relay process".padEnd(50)} ${fmt(alone.relay_cpu_ms_per_delivery, 3).padStart(10)} ms`);
  log("\n== latency, one delivery at a time (enqueue → settled)");
  log(`${"".padEnd(20)} ${"p50".padStart(10)} ${"p95".padStart(10)} ${"mean".padStart(10)}`);
  log(`${"direct peer".padEnd(20)} ${fmt(d.p50, 2).padStart(10)} ${fmt(d.p95, 2).padStart(10)} ${fmt(d.mean, 2).padStart(10)} ms`);
  log(`${"through the relay".padEnd(20)} ${fmt(r.p50, 2).padStart(10)} ${fmt(r.p95, 2).padStart(10)} ${fmt(r.mean, 2).padStart(10)} ms`);
  log(
    `relay adds ${fmt(result.latency_ms.added_p50, 2)} ms at p50 (${fmt(result.latency_ms.ratio_p50, 2)}× direct), ${fmt(result.latency_ms.added_mean, 2)} ms on average`,
  );
}

try {
  await main();
} finally {
  for (const gw of gateways) await gw.stop().catch(() => undefined);
  for (const c of children) {
    c.kill("SIGTERM");
    await new Promise((r) => (c.exitCode !== null ? r() : c.once("exit", r)));
  }
  if (!opts.keep) rmSync(work, { recursive: true, force: true });
  else log(`kept ${work}`);
}
