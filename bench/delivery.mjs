#!/usr/bin/env node
// Benchmark: bot-to-bot delivery (issue #4). Prints figures and ratios only; no pass/fail.
//
//   npm run build && npm run bench:delivery [-- --bots 100 --messages 5000 --samples 500 --model-ms 0 --json]
//
// Two scenarios, each on a fresh HERMES_HOME with a real Gateway (the BUILT packages, like the
// `hermes` binary) and N bots:
//   local   every bot on the embedded deterministic `local` provider: everything measured is our own
//           overhead (outbox + ingress rows, claim, turn, transcript, settle, notification; every
//           commit fsynced before anything reports it)
//   openai  every bot on an OpenAI-compatible HTTP server in this process (answers at once, or after
//           --model-ms): the same path plus real HTTP to a provider; the provider's share is timed
//           around fetch, so our share of the latency is visible
// Each scenario measures
//   throughput  M deliveries enqueued at once between random pairs of bots, until all have settled
//   latency     S deliveries one after another (no queueing): enqueue → settled, p50/p99, and for
//               `openai` the same minus the time spent in the provider call
//   CPU         process CPU time per delivery in both phases: our compute cost, independent of how
//               long the disk takes to fsync (which dominates the wall-clock figures on a busy VM);
//               and the event loop's busy time per delivery (an fsync on the thread pool is not in it)
//   commits     SQLite commits that wrote something per delivery in both phases, counted on every
//               database file of the process (state.db and the profiles' transcripts;
//               bench/lib/commit-counter.mjs); state.db's are fsynced (synchronous=FULL), the profile
//               transcripts' (NORMAL) are made durable by fsyncs of their -wal files off the event
//               loop, counted too (`wal fsyncs`; concurrent commits to one file share one)
//   file checks `statSync` + `existsSync` calls per delivery in both phases (the turn's config files,
//               profile liveness and identity checks): each a system call on the event loop
//   statements  with `--statements N`: the N SQLite statements that took the event loop longest
//               per delivery under load (calls and µs per delivery, by database and SQL;
//               bench/lib/statement-timer.mjs; off by default: timing every call costs a little)
// The machine's fsync cost is measured in the same run (the ratio shows how many commits' worth of
// time one delivery costs; the CPU of one such commit times the fsyncs per delivery is their floor
// in the CPU per delivery), and the load average is printed before and after.
//
// `--baseline <checkout>` measures the same scenarios on another checkout's build (e.g. a worktree
// of main, built with `npx tsc -b tsconfig.build.json`) in a child process of the same run, first,
// and prints this build's figures as ratios of it. `--root <checkout>` says whose build this process
// measures (default: this one).

import { execFileSync } from "node:child_process";
import fs, { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { installCommitCounter } from "./lib/commit-counter.mjs";
import { benchOptions, intOption } from "./lib/options.mjs";
import { withDaemonFlags } from "./lib/processes.mjs";
import { installStatementTimer } from "./lib/statement-timer.mjs";

await withDaemonFlags(import.meta.url);

const opts = benchOptions(import.meta.url, {
  root: { type: "string", default: fileURLToPath(new URL("..", import.meta.url)) },
  baseline: { type: "string" },
  bots: { type: "string", default: "100" },
  messages: { type: "string", default: "5000" },
  samples: { type: "string", default: "500" },
  "model-ms": { type: "string", default: "0" },
  scenarios: { type: "string", default: "local,openai" },
  statements: { type: "string", default: "0" },
  json: { type: "boolean", default: false },
});

const ROOT = resolve(opts.root);
const DIST = {
  gateway: join(ROOT, "services/gateway/dist/index.js"),
  common: join(ROOT, "services/common/dist/index.js"),
};
// The better-sqlite3 the gateway under test loads (another checkout has its own copy): its commits are counted.
const Database = createRequire(join(ROOT, "services/gateway/package.json"))("better-sqlite3");
const BOTS = intOption(opts, "bots", 2);
const MESSAGES = intOption(opts, "messages", 1);
const SAMPLES = intOption(opts, "samples", 1);
const MODEL_MS = intOption(opts, "model-ms", 0);
const STATEMENTS = intOption(opts, "statements", 0);

// The asynchronous fsyncs (the transcripts' -wal files), counted from before the gateway is loaded.
let walSyncs = 0;
const realFsync = fs.fsync;
fs.fsync = (...args) => {
  walSyncs++;
  return realFsync(...args);
};
// The file-system checks on the way (config files, profile liveness): `statSync` and `existsSync` calls.
let fileChecks = 0;
for (const name of ["statSync", "existsSync"]) {
  const real = fs[name];
  fs[name] = (...args) => {
    fileChecks++;
    return real(...args);
  };
}
syncBuiltinESMExports();

let gatewayModule;
let commonModule;
try {
  gatewayModule = await import(DIST.gateway);
  commonModule = await import(DIST.common);
} catch (err) {
  process.stderr.write(`cannot load the built packages (${err.message}); run \`npm run build\` first\n`);
  process.exit(2);
}
const { Gateway } = gatewayModule;
const commits = installCommitCounter(Database);
const statements = STATEMENTS > 0 ? installStatementTimer(Database) : undefined;
function resetCounts() {
  commits.reset();
  statements?.reset();
  walSyncs = 0;
  fileChecks = 0;
}
/** Commits per delivery since `resetCounts()`: all files, the gateway's state.db alone, the -wal fsyncs (and the file checks). */
function commitsPer(deliveries, home) {
  const byFile = commits.byFile();
  const main = byFile.get(join(home, "state.db")) ?? 0;
  return {
    all: commits.total() / deliveries,
    state_db: main / deliveries,
    transcripts: (commits.total() - main) / deliveries,
    wal_fsyncs: walSyncs / deliveries,
    file_checks: fileChecks / deliveries,
  };
}
const { createLogger } = commonModule;

const log = (line) => {
  if (!opts.json) process.stdout.write(`${line}\n`);
};

function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

const ms = (x) => `${x.toFixed(2)} ms`;

/** An OpenAI-compatible endpoint that echoes the newest message, after `delayMs`. */
async function startFakeProvider(delayMs) {
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const last = body.messages.at(-1);
      const reply = JSON.stringify({
        id: "chatcmpl-bench",
        object: "chat.completion",
        created: 0,
        model: body.model,
        choices: [
          { index: 0, message: { role: "assistant", content: `ok: ${String(last?.content ?? "").slice(0, 40)}` }, finish_reason: "stop" },
        ],
      });
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(reply);
      }, delayMs);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(r);
      }),
  };
}

/** Time spent inside fetch (the provider call), for the latency phase's "our share". */
let fetchMs = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = async (...args) => {
  const t0 = performance.now();
  try {
    const res = await realFetch(...args);
    const text = await res.text();
    return new Response(text, { status: res.status, headers: res.headers });
  } finally {
    fetchMs += performance.now() - t0;
  }
};

/** The machine's cost of one fsynced one-row SQLite commit (WAL, synchronous=FULL), measured now: wall time and CPU. */
function commitCost(dir) {
  const db = new Database(join(dir, "fsync-baseline.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
  const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
  for (let i = 0; i < 20; i++) insert.run("warm");
  const n = 300;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) insert.run("x".repeat(200));
  const per = (performance.now() - t0) / n;
  const cpu = process.cpuUsage(cpu0);
  db.close();
  return { ms: per, cpuMs: (cpu.user + cpu.system) / 1000 / n };
}

async function scenario(name, provider) {
  const home = mkdtempSync(join(tmpdir(), `hermes-bench-delivery-${name}-`));
  try {
    const config = {
      agents: { max_warm: Math.min(64, BOTS + 8) },
      delivery: { max_parallel_targets: 8 },
      ...(provider ? { providers: { fake: { base_url: provider.url, api_key_env: "FAKE_KEY" } } } : {}),
    };
    writeFileSync(join(home, "config.yaml"), JSON.stringify(config));
    const gateway = await Gateway.start({
      home,
      overrides: { grpc: "127.0.0.1:0", http: "127.0.0.1:0" },
      logger: createLogger("gateway", "silent"),
      env: { FAKE_KEY: "sk-bench" },
    });
    const bots = Array.from({ length: BOTS }, (_, i) => `bot${String(i).padStart(3, "0")}`);
    const tCreate = performance.now();
    for (const bot of bots) gateway.profiles.create(bot, provider ? { provider: "fake", model: "bench-model" } : {});
    const createMs = performance.now() - tCreate;
    gateway.deliveries.rosterChanged();
    const d = gateway.deliveries;
    const pair = (i) => {
      const from = bots[i % BOTS];
      let to = bots[(i * 37 + 11) % BOTS];
      if (to === from) to = bots[(i + 1) % BOTS];
      return [from, to];
    };
    // `send` acks once the delivery is committed (a promise; an older build answered at once).
    const sendAndWait = async (from, to, text) => d.wait((await d.send(from, to, text)).delivery_id);
    // Every ended delivery's notification written and recorded, so a phase's commits are all counted.
    const state = new Database(join(home, "state.db"), { readonly: true });
    const unnotified = state.prepare("SELECT count(*) FROM delivery_outbox WHERE notified_at IS NULL").pluck();
    const allNotified = async () => {
      while (unnotified.get() > 0) await new Promise((r) => setTimeout(r, 20));
    };
    // Warm-up: every bot receives once (agents built, files cached).
    await Promise.all(bots.map((b, i) => sendAndWait(bots[(i + 1) % BOTS], b, "warm up")));
    await allNotified();

    // Throughput: everything enqueued at once.
    resetCounts();
    const cpu0 = process.cpuUsage();
    const loop0 = performance.eventLoopUtilization();
    const t0 = performance.now();
    const waits = [];
    for (let i = 0; i < MESSAGES; i++) {
      const [from, to] = pair(i);
      waits.push(sendAndWait(from, to, `note ${i}: please have a look at the figures`));
    }
    const enqueuedMs = performance.now() - t0;
    const receipts = await Promise.all(waits);
    const throughputMs = performance.now() - t0;
    await allNotified();
    const cpu1 = process.cpuUsage(cpu0);
    const loop1 = performance.eventLoopUtilization(loop0);
    const throughputCommits = commitsPer(MESSAGES, home);
    const throughputStatements = statements?.top(STATEMENTS, MESSAGES);
    const settled = receipts.filter((r) => r.state === "settled").length;

    // Latency: one at a time, so nothing queues.
    const e2e = [];
    const own = [];
    const enqueue = [];
    resetCounts();
    const cpu2 = process.cpuUsage();
    const loop2 = performance.eventLoopUtilization();
    for (let i = 0; i < SAMPLES; i++) {
      const [from, to] = pair(i + 7);
      fetchMs = 0;
      const s0 = performance.now();
      const ack = await d.send(from, to, `sample ${i}`);
      const s1 = performance.now();
      await d.wait(ack.delivery_id);
      const s2 = performance.now();
      enqueue.push(s1 - s0);
      e2e.push(s2 - s0);
      own.push(s2 - s0 - fetchMs);
    }
    await allNotified();
    const cpu3 = process.cpuUsage(cpu2);
    const loop3 = performance.eventLoopUtilization(loop2);
    const latencyCommits = commitsPer(SAMPLES, home);
    state.close();
    await gateway.stop();
    const sort = (a) => [...a].sort((x, y) => x - y);
    const [se2e, sown, senq] = [sort(e2e), sort(own), sort(enqueue)];
    return {
      scenario: name,
      bots: BOTS,
      profiles_created_ms: Math.round(createMs),
      throughput: {
        messages: MESSAGES,
        settled,
        enqueue_ms: enqueuedMs,
        total_ms: throughputMs,
        per_second: (MESSAGES / throughputMs) * 1000,
        // CPU of this process per delivery (user + system; time blocked in fsync is not CPU).
        cpu_ms_per_delivery: (cpu1.user + cpu1.system) / 1000 / MESSAGES,
        cpu_user_ms_per_delivery: cpu1.user / 1000 / MESSAGES,
        // Time the event loop was busy per delivery (blocking fsyncs included, the thread pool's not).
        loop_ms_per_delivery: loop1.active / MESSAGES,
        commits_per_delivery: throughputCommits,
        ...(throughputStatements ? { statements: throughputStatements } : {}),
      },
      latency: {
        samples: SAMPLES,
        enqueue_p50_ms: percentile(senq, 50),
        enqueue_p99_ms: percentile(senq, 99),
        settled_p50_ms: percentile(se2e, 50),
        settled_p99_ms: percentile(se2e, 99),
        own_p50_ms: percentile(sown, 50),
        own_p99_ms: percentile(sown, 99),
        cpu_ms_per_delivery: (cpu3.user + cpu3.system) / 1000 / SAMPLES,
        cpu_user_ms_per_delivery: cpu3.user / 1000 / SAMPLES,
        loop_ms_per_delivery: loop3.active / SAMPLES,
        commits_per_delivery: latencyCommits,
      },
    };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(", ");
const loadBefore = load();
log(`load average (1, 5, 15 min) before: ${loadBefore}`);
const scratch = mkdtempSync(join(tmpdir(), "hermes-bench-fsync-"));
mkdirSync(scratch, { recursive: true });
const { ms: commitMs, cpuMs: commitCpuMs } = commitCost(scratch);
rmSync(scratch, { recursive: true, force: true });
log(`machine: one fsynced SQLite commit (WAL, synchronous=FULL) = ${ms(commitMs)}, ${ms(commitCpuMs)} of CPU`);

/** The same scenarios on the baseline checkout's build, in a child process (its own modules and counter). */
function measureBaseline(checkout) {
  const args = [fileURLToPath(import.meta.url), "--root", checkout, "--json"];
  for (const name of ["bots", "messages", "samples", "model-ms", "scenarios"]) args.push(`--${name}`, opts[name]);
  log(`baseline: measuring ${resolve(checkout)} first, in a child process`);
  // With this process's node flags (the daemons'), whatever the baseline's own script does.
  const out = execFileSync(process.execPath, [...process.execArgv, ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 << 20,
  });
  return JSON.parse(out);
}
const baseline = opts.baseline ? measureBaseline(opts.baseline) : undefined;
if (baseline) log(`baseline: one fsynced commit = ${ms(baseline.commit_ms)}; measuring ${ROOT}`);

const results = [];
for (const name of opts.scenarios.split(",").map((s) => s.trim())) {
  if (name === "local") results.push(await scenario("local"));
  else if (name === "openai") {
    const provider = await startFakeProvider(MODEL_MS);
    try {
      results.push(await scenario("openai", provider));
    } finally {
      await provider.close();
    }
  } else {
    process.stderr.write(`unknown scenario ${name} (local, openai)\n`);
    process.exit(2);
  }
}

for (const r of results) {
  const l = r.latency;
  log(`\n[${r.scenario}] ${r.bots} bots${r.scenario === "openai" ? `, provider answers after ${MODEL_MS} ms` : ""}`);
  log(
    `  throughput: ${r.throughput.messages} deliveries (${r.throughput.settled} settled) in ${ms(r.throughput.total_ms)} ` +
      `(enqueued in ${ms(r.throughput.enqueue_ms)}) = ${r.throughput.per_second.toFixed(0)} deliveries/s`,
  );
  log(
    `  CPU per delivery (this process, user + system): ${ms(r.throughput.cpu_ms_per_delivery)} under load (user ${ms(r.throughput.cpu_user_ms_per_delivery)}), ${ms(l.cpu_ms_per_delivery)} one at a time (user ${ms(l.cpu_user_ms_per_delivery)})` +
      (r.scenario === "openai" ? " (includes the in-process provider server)" : ""),
  );
  log(
    `  event loop busy per delivery (the one thread turns run on): ${ms(r.throughput.loop_ms_per_delivery)} under load, ${ms(l.loop_ms_per_delivery)} one at a time`,
  );
  const c = (x) =>
    `${x.all.toFixed(2)} (state.db ${x.state_db.toFixed(2)}, transcripts ${x.transcripts.toFixed(2)}` +
    `${x.wal_fsyncs === undefined ? "" : `, wal fsyncs ${x.wal_fsyncs.toFixed(2)}`})`;
  log(`  commits per delivery: ${c(r.throughput.commits_per_delivery)} under load, ${c(l.commits_per_delivery)} one at a time`);
  // Every delivery fsyncs the files its commits wrote; each fsync costs at least what the bare
  // commit above costs in CPU, whatever else is trimmed.
  const fsyncFloor = (x) => (x.state_db + (x.wal_fsyncs ?? 0)) * commitCpuMs;
  log(
    `  the fsyncs alone, at a bare fsynced commit's CPU each: ${ms(fsyncFloor(r.throughput.commits_per_delivery))} per delivery under load, ${ms(fsyncFloor(l.commits_per_delivery))} one at a time`,
  );
  const checks = (x) => (x.file_checks === undefined ? "?" : x.file_checks.toFixed(2));
  log(
    `  file-system checks per delivery (statSync + existsSync): ${checks(r.throughput.commits_per_delivery)} under load, ${checks(l.commits_per_delivery)} one at a time`,
  );
  const timed = r.throughput.statements;
  if (timed) {
    log(`  SQLite statements under load: ${timed.total_us.toFixed(0)} µs per delivery on the event loop; the longest:`);
    for (const t of timed.statements) {
      log(`    ${t.us.toFixed(1).padStart(7)} µs  ${t.calls.toFixed(2).padStart(5)} calls  ${t.statement.slice(0, 110)}`);
    }
  }
  log(`  enqueue (send → ack): p50 ${ms(l.enqueue_p50_ms)}, p99 ${ms(l.enqueue_p99_ms)}`);
  log(`  enqueue → settled:    p50 ${ms(l.settled_p50_ms)}, p99 ${ms(l.settled_p99_ms)}`);
  if (r.scenario === "openai") log(`  of which ours (minus the provider call): p50 ${ms(l.own_p50_ms)}, p99 ${ms(l.own_p99_ms)}`);
  log(
    `  p50 in fsynced commits: ${(l.settled_p50_ms / commitMs).toFixed(1)}; goal "p99 of our own overhead < 10 ms": p99 ${ms(r.scenario === "openai" ? l.own_p99_ms : l.settled_p99_ms)}`,
  );
}
const local = results.find((r) => r.scenario === "local");
const openai = results.find((r) => r.scenario === "openai");
if (local && openai) {
  log("\nratios (openai / local)");
  log(`  throughput: ${(openai.throughput.per_second / local.throughput.per_second).toFixed(2)}`);
  log(
    `  settled p50: ${(openai.latency.settled_p50_ms / local.latency.settled_p50_ms).toFixed(2)}, p99: ${(openai.latency.settled_p99_ms / local.latency.settled_p99_ms).toFixed(2)}`,
  );
  log(`  our share of the openai latency at p50: ${((openai.latency.own_p50_ms / openai.latency.settled_p50_ms) * 100).toFixed(0)} %`);
}
if (baseline) {
  const ratio = (x, y) => `${(x / y).toFixed(2)}×`;
  for (const r of results) {
    const b = baseline.results.find((x) => x.scenario === r.scenario);
    if (!b) continue;
    const [t, bt, l, bl] = [r.throughput, b.throughput, r.latency, b.latency];
    log(`\n[${r.scenario}] this build vs the baseline (${resolve(opts.baseline)}), same run`);
    log(`  throughput:             ${t.per_second.toFixed(0)}/s vs ${bt.per_second.toFixed(0)}/s = ${ratio(t.per_second, bt.per_second)}`);
    log(
      `  commits per delivery:   ${t.commits_per_delivery.all.toFixed(2)} vs ${bt.commits_per_delivery.all.toFixed(2)} under load, ` +
        `${l.commits_per_delivery.all.toFixed(2)} vs ${bl.commits_per_delivery.all.toFixed(2)} one at a time`,
    );
    log(
      `  CPU per delivery:       ${ms(t.cpu_ms_per_delivery)} vs ${ms(bt.cpu_ms_per_delivery)} under load (${ratio(t.cpu_ms_per_delivery, bt.cpu_ms_per_delivery)}), ` +
        `${ms(l.cpu_ms_per_delivery)} vs ${ms(bl.cpu_ms_per_delivery)} one at a time`,
    );
    log(
      `  enqueue → settled p50:  ${ms(l.settled_p50_ms)} vs ${ms(bl.settled_p50_ms)}; p99 ${ms(l.settled_p99_ms)} vs ${ms(bl.settled_p99_ms)}`,
    );
  }
}
const loadAfter = load();
log(`\nload average (1, 5, 15 min) after: ${loadAfter}`);
if (opts.json) {
  process.stdout.write(
    `${JSON.stringify({ root: ROOT, commit_ms: commitMs, commit_cpu_ms: commitCpuMs, model_ms: MODEL_MS, load_before: loadBefore, load_after: loadAfter, results, baseline }, null, 2)}\n`,
  );
}
