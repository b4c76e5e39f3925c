#!/usr/bin/env node
// Benchmark: renaming a profile that owns 1,000,000 session rows and 100,000 routing entries
// (goal: under 1 s, other profiles' turns delayed < 200 ms at p99). Prints figures only; there is no pass/fail on time.
//
//   npm run build && npm run bench:rename [-- --sessions 1000000 --routing 100000 --json --keep]
//
// It seeds one HERMES_HOME, then runs each scenario in a fresh child process on its own copy of
// that home, so every scenario starts from the same bytes and its peak RSS
// (process.resourceUsage().maxRSS) is its own, not the seeder's. Scenarios:
//   baseline  a plain one-column UPDATE of the same session rows (their profile id, or name before ids)
//   direct    ProfileService.migrateIdentity with no gateway running (what the CLI does itself)
//   live      ProfileService.migrateIdentity inside a running Gateway (in-memory index rekeyed and persisted)
//   cli       `hermes profile rename` end to end (directory move + migration), in-process via the CLI's main()
//   turns     `rename` in a running Gateway while the other profiles keep sending each other mail (real
//             turns on the embedded `local` provider): the rename's wall time, and the latency (p50,
//             p99, max) of the other profiles' turns that overlapped it, against the same figures of a
//             quiet window just before
// It imports the BUILT packages (services/*/dist), like the `hermes` binary does.

import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { benchOptions } from "./lib/options.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DIST = {
  gateway: join(ROOT, "services/gateway/dist/index.js"),
  common: join(ROOT, "services/common/dist/index.js"),
  cli: join(ROOT, "services/cli/dist/main.js"),
  sessionsStore: join(ROOT, "services/gateway/dist/identity/store/sessions-store.js"),
  routingStore: join(ROOT, "services/gateway/dist/identity/store/routing-store.js"),
};
const OLD = "mybot";
const NEW = "assistant";
/** Other profiles; `mybot2` and `mybo` share a prefix with `mybot`, so a sloppy key match would take their rows. */
const OTHERS = ["mybot2", "mybo", "zeta"];
/** Line prefix of a child's result on stdout (the CLI scenario prints its own output too). */
const RESULT = "BENCH-RESULT ";

const opts = benchOptions(import.meta.url, {
  sessions: { type: "string", default: "1000000" },
  routing: { type: "string", default: "100000" },
  "other-sessions": { type: "string", default: "20000" },
  scenarios: { type: "string", default: "baseline,direct,live,cli,turns" },
  dir: { type: "string" },
  keep: { type: "boolean", default: false },
  json: { type: "boolean", default: false },
  phase: { type: "string" },
  home: { type: "string" },
});

const int = (name) => {
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < 0) {
    process.stderr.write(`--${name} must be a non-negative integer (got ${opts[name]})\n`);
    process.exit(2);
  }
  return n;
};

// ---------------------------------------------------------------------------------------------
// Seeding

/** A small deterministic PRNG (xorshift32), so every run seeds the same ids. */
function prng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

const PLATFORMS = [
  ["telegram", "group"],
  ["telegram", "dm"],
  ["discord", "channel"],
  ["api", "session"],
];

/**
 * Builds HOME: the gateway schema (real migrations), `profile` owning `sessions` session rows of
 * which the first `routing` also have a routing entry, plus obligations, and the other profiles.
 */
async function seed(home, counts) {
  const { openGatewayDb, HermesHome } = await import(DIST.gateway);
  const h = new HermesHome(home);
  h.ensureRoot();
  const db = openGatewayDb(h);
  db.pragma("cache_size = -262144"); // seeding only: 256 MiB of page cache
  const next = prng(0x5eed);
  const hex = (n) => {
    let s = "";
    while (s.length < n) s += next().toString(16).padStart(8, "0");
    return s.slice(0, n);
  };
  const now = new Date("2026-11-30T00:00:00Z").toISOString();
  // Sessions and routing entries go in through their stores, whatever the schema keeps of the name.
  const { SessionsStore } = await import(DIST.sessionsStore);
  const { persistRoutingChanges } = await import(DIST.routingStore);
  const sessions = new SessionsStore(db);
  const insertObligation = db.prepare(
    `INSERT INTO delivery_obligations (obligation_id, adapter_profile, session_key, kind, state, payload_json, created_at, updated_at)
     VALUES (?, ?, ?, 'turn_reply', ?, ?, ?, ?)`,
  );
  const insertHeartbeat = db.prepare(
    "INSERT INTO gateway_heartbeats (profile, gateway_id, pid, state, last_seen_at) VALUES (?, 'gw-bench', 1, 'stopped', ?)",
  );

  const addProfile = (profile, count, routing, obligations) => {
    const routes = [];
    for (let i = 0; i < count; i++) {
      const [platform, chatType] = PLATFORMS[i % PLATFORMS.length];
      const origin = { profile, platform, chat_type: chatType, chat_id: `-100${1_000_000_000 + i}` };
      const key = `agent:${profile}:${platform}:${chatType}:${origin.chat_id}`;
      const sessionId = `ses_${hex(24)}`;
      sessions.insert({
        session_id: sessionId,
        session_key: key,
        profile_name: profile,
        title: `Chat ${i}`,
        kind: "chat",
        origin,
        model_override: null,
        provider_override: null,
        created_at: now,
        updated_at: now,
      });
      if (i < routing) routes.push({ routing_key: key, session_key: key, session_id: sessionId, origin, updated_at: now });
      if (i < obligations) {
        insertObligation.run(
          `obl_${hex(24)}`,
          profile,
          key,
          i % 10 === 0 ? "pending" : "delivered",
          JSON.stringify({ session_id: sessionId }),
          now,
          now,
        );
      }
    }
    persistRoutingChanges(db, { upserts: routes, deletes: [] });
  };

  const started = performance.now();
  db.transaction(() => {
    addProfile(OLD, counts.sessions, counts.routing, Math.floor(counts.sessions / 100));
    for (const other of OTHERS) {
      addProfile(other, counts.otherSessions, Math.floor(counts.otherSessions / 10), Math.floor(counts.otherSessions / 100));
      insertHeartbeat.run(other, now);
    }
    // No heartbeat row for OLD: a running gateway writes one for the new name too, and the rekey of
    // gateway_heartbeats.profile then fails on its primary key (reported with the CLI tests).
  })();
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.close();
  for (const profile of [OLD, ...OTHERS]) {
    const dir = h.publishProfileDir(h.stageProfileDir(profile), profile);
    writeFileSync(join(dir, "config.yaml"), `title: ${profile}\n`);
    writeFileSync(join(dir, "profile.yaml"), `created_at: ${now}\n`);
  }
  return { seconds: (performance.now() - started) / 1000, bytes: statSync(h.stateDb).size };
}

// ---------------------------------------------------------------------------------------------
// Scenarios (each runs in its own child process)

/** Rows still naming `name`, per table (sessions/routing/obligations), read after the timed step. */
async function ownership(home, name) {
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(join(home, "state.db"), { readonly: true });
  try {
    const one = (sql, ...p) => db.prepare(sql).get(...p).n;
    const prefix = `agent:${name}:%`;
    // Filtered by profile_name first, so the `sessions` view (which shows the id-keyed rows with
    // their names) is read through its indexes.
    return {
      sessions: one("SELECT count(*) AS n FROM sessions WHERE profile_name = ?", name),
      session_keys: one("SELECT count(*) AS n FROM sessions WHERE profile_name = ? AND session_key LIKE ?", name, prefix),
      session_origins: one(
        "SELECT count(*) AS n FROM sessions WHERE profile_name = ? AND json_extract(origin_json, '$.profile') = ?",
        name,
        name,
      ),
      routing: one("SELECT count(*) AS n FROM gateway_routing WHERE routing_key LIKE ?", prefix),
      routing_json: one(
        "SELECT count(*) AS n FROM gateway_routing WHERE json_extract(entry_json, '$.origin.profile') = ? AND json_extract(entry_json, '$.session_key') LIKE ?",
        name,
        prefix,
      ),
      obligations: one("SELECT count(*) AS n FROM delivery_obligations WHERE adapter_profile = ? AND session_key LIKE ?", name, prefix),
    };
  } finally {
    db.close();
  }
}

/** True when `to` owns exactly what `from` owned in the seed and `from` owns nothing (or, for the baseline, only profile_name moved). */
async function verify(home, counts, scenario) {
  const expectSessions = counts.sessions;
  const oldNow = await ownership(home, OLD);
  const newNow = await ownership(home, scenario === "baseline" ? OLD : NEW);
  const others = await Promise.all(OTHERS.map((o) => ownership(home, o)));
  // The other profiles' own turns (the `turns` scenario) may add sessions of theirs: none may be lost.
  const atLeast = scenario === "turns" ? (n, want) => n >= want : (n, want) => n === want;
  const otherOk = others.every(
    (o) =>
      atLeast(o.sessions, counts.otherSessions) &&
      atLeast(o.session_keys, counts.otherSessions) &&
      atLeast(o.routing, Math.floor(counts.otherSessions / 10)),
  );
  if (scenario === "baseline") return otherOk && oldNow.sessions === expectSessions; // undone after timing
  const moved =
    newNow.sessions === expectSessions &&
    newNow.session_keys === expectSessions &&
    newNow.session_origins === expectSessions &&
    newNow.routing === counts.routing &&
    newNow.routing_json === counts.routing &&
    newNow.obligations === Math.floor(counts.sessions / 100);
  const gone = Object.values(oldNow).every((n) => n === 0);
  return moved && gone && otherOk;
}

/**
 * This process's own peak RSS: VmHWM of /proc/self/status (Linux; the high-water mark of this
 * process image). process.resourceUsage().maxRSS is reported too, but on Linux it starts from the
 * parent's RSS at spawn, which is why the orchestrator stays small and seeds in a child.
 */
function ownPeakRss() {
  try {
    const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

function report(result) {
  const usage = process.resourceUsage();
  process.stdout.write(`${RESULT}${JSON.stringify({ ...result, max_rss_bytes: usage.maxRSS * 1024, vm_hwm_bytes: ownPeakRss() })}\n`);
}

async function runPhase(phase, home, counts) {
  if (phase === "seed") {
    report({ phase, ...(await seed(home, counts)) });
    return;
  }
  let rssBefore = 0;
  /** Starts the clock; the RSS just before it shows what the timed step itself added. */
  const start = () => {
    rssBefore = process.memoryUsage().rss;
    return performance.now();
  };
  if (phase === "baseline") {
    const { openGatewayDb, HermesHome } = await import(DIST.gateway);
    const db = openGatewayDb(new HermesHome(home));
    // One indexed column of every session row of the profile: its name, or (since sessions hold
    // the profile's id) its id, moved to a spare one and back.
    const byId = db.prepare("SELECT type FROM sqlite_master WHERE name = 'sessions'").pluck().get() === "view";
    const [update, from, to] = byId
      ? [
          db.prepare("UPDATE session_records SET profile_id = ? WHERE profile_id = ?"),
          db.prepare("SELECT id FROM profiles WHERE name = ?").pluck().get(OLD),
          db.prepare("INSERT INTO profiles (name) VALUES (?) RETURNING id").pluck().get(`${OLD}-tmp`),
        ]
      : [db.prepare("UPDATE sessions SET profile_name = ? WHERE profile_name = ?"), OLD, `${OLD}-tmp`];
    const t0 = start();
    const changed = db.transaction(() => update.run(to, from).changes).immediate();
    const seconds = (performance.now() - t0) / 1000;
    db.transaction(() => update.run(from, to)).immediate(); // undo, untimed
    db.close();
    report({ phase, seconds, rows: changed, rss_before_bytes: rssBefore, verified: await verify(home, counts, phase) });
    return;
  }
  // The filesystem half of the rename already happened: the directory carries the new name.
  if (phase === "direct" || phase === "live") renameSync(join(home, "profiles", OLD), join(home, "profiles", NEW));
  if (phase === "direct") {
    const { openGatewayDb, HermesHome, ProfileDatabases, ProfileService, SessionService, directRouting } = await import(DIST.gateway);
    const { systemClock } = await import(DIST.common);
    const h = new HermesHome(home);
    const db = openGatewayDb(h);
    const routing = directRouting(db);
    const service = new ProfileService(
      h,
      db,
      new ProfileDatabases(h, db),
      new SessionService(db, routing, systemClock),
      routing,
      systemClock,
    );
    const t0 = start();
    const m = service.migrateIdentity(OLD, NEW);
    const seconds = (performance.now() - t0) / 1000;
    db.close();
    report({ phase, seconds, rows: m.counts, rss_before_bytes: rssBefore, verified: await verify(home, counts, phase) });
    return;
  }
  if (phase === "live") {
    const { Gateway } = await import(DIST.gateway);
    const { createLogger } = await import(DIST.common);
    const s0 = performance.now();
    const gw = await Gateway.start({
      home,
      overrides: { grpc: "127.0.0.1:0", http: "127.0.0.1:0" },
      logger: createLogger("gateway", "silent"),
      env: {},
    });
    const startSeconds = (performance.now() - s0) / 1000;
    const t0 = start();
    const m = gw.profiles.migrateIdentity(OLD, NEW);
    const seconds = (performance.now() - t0) / 1000;
    await gw.stop();
    report({
      phase,
      seconds,
      rows: m.counts,
      routing_in_memory: m.routing_in_memory,
      gateway_start_seconds: startSeconds,
      rss_before_bytes: rssBefore,
      verified: await verify(home, counts, phase),
    });
    return;
  }
  if (phase === "turns") {
    report({ phase, ...(await renameUnderTurns(home)), verified: await verify(home, counts, phase) });
    return;
  }
  if (phase === "cli") {
    const { main } = await import(DIST.cli);
    process.env.HERMES_HOME = home;
    const t0 = start();
    const code = await main([process.execPath, "hermes", "--json", "profile", "rename", OLD, NEW]);
    const seconds = (performance.now() - t0) / 1000;
    report({ phase, seconds, exit_code: code, rss_before_bytes: rssBefore, verified: code === 0 && (await verify(home, counts, phase)) });
    return;
  }
  throw new Error(`unknown phase ${phase}`);
}

/** Concurrent senders among the other profiles, each sending the next mail once its last one settled. */
const TURN_SENDERS = 4;
/** The quiet window before the rename and the tail after it, in ms. */
const TURN_WINDOW_MS = 2000;

const percentile = (sorted, p) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]);
function latencies(turns) {
  const ms = turns.map((t) => t.end - t.start).sort((a, b) => a - b);
  return { turns: ms.length, p50_ms: percentile(ms, 50), p99_ms: percentile(ms, 99), max_ms: ms.at(-1) ?? 0 };
}

/**
 * The live gateway's own `rename` (folder move + identity migration) while the other profiles'
 * turns run: every turn is a delivery from one of them to another, answered by the target's agent.
 */
async function renameUnderTurns(home) {
  const { Gateway } = await import(DIST.gateway);
  const { createLogger } = await import(DIST.common);
  const gw = await Gateway.start({
    home,
    overrides: { grpc: "127.0.0.1:0", http: "127.0.0.1:0" },
    logger: createLogger("gateway", "silent"),
    env: {},
  });
  const d = gw.deliveries;
  const turns = [];
  let running = true;
  const sender = async (i) => {
    for (let n = 0; running; n++) {
      const from = OTHERS[(i + n) % OTHERS.length];
      const to = OTHERS[(i + n + 1) % OTHERS.length];
      const start = performance.now();
      await d.wait((await d.send(from, to, `turn ${i}.${n}`)).delivery_id);
      turns.push({ start, end: performance.now() });
    }
  };
  const senders = Array.from({ length: TURN_SENDERS }, (_, i) => sender(i));
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  await sleep(TURN_WINDOW_MS / 2); // warm-up: agents built
  const quietFrom = performance.now();
  await sleep(TURN_WINDOW_MS);
  const rssBefore = process.memoryUsage().rss;
  const t0 = performance.now();
  const r = gw.profiles.rename(OLD, NEW);
  const t1 = performance.now();
  await sleep(TURN_WINDOW_MS);
  running = false;
  await Promise.all(senders);
  await gw.stop();
  if (!r.migration?.ok) throw new Error(`rename failed: ${r.warning}`);
  return {
    seconds: (t1 - t0) / 1000,
    rows: r.migration.counts,
    rss_before_bytes: rssBefore,
    turns_quiet: latencies(turns.filter((t) => t.start >= quietFrom && t.end < t0)),
    turns_during: latencies(turns.filter((t) => t.start <= t1 && t.end >= t0)),
  };
}

function runChild(phase, home, counts) {
  return new Promise((resolve, reject) => {
    const args = [
      fileURLToPath(import.meta.url),
      "--phase",
      phase,
      "--home",
      home,
      "--sessions",
      String(counts.sessions),
      "--routing",
      String(counts.routing),
      "--other-sessions",
      String(counts.otherSessions),
    ];
    const child = spawn(process.execPath, args, {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, HERMES_LOG_LEVEL: "silent" },
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d) => {
      out += d;
    });
    child.on("exit", (code) => {
      const line = out.split("\n").find((l) => l.startsWith(RESULT));
      if (code !== 0 || !line) reject(new Error(`scenario ${phase} failed (exit ${code}): ${out}`));
      else resolve(JSON.parse(line.slice(RESULT.length)));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Orchestration and report

const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
const secs = (s) => `${s.toFixed(2)} s`;

async function main() {
  const counts = { sessions: int("sessions"), routing: int("routing"), otherSessions: int("other-sessions") };
  if (counts.routing > counts.sessions) {
    process.stderr.write("--routing cannot exceed --sessions (each routing entry points at a session)\n");
    process.exit(2);
  }
  if (opts.phase) {
    await runPhase(opts.phase, opts.home, counts);
    return;
  }
  for (const [what, path] of Object.entries(DIST)) {
    if (!existsSync(path)) {
      process.stderr.write(`${path} is missing (${what}): run \`npm run build\` first\n`);
      process.exit(2);
    }
  }
  const scenarios = opts.scenarios.split(",").filter(Boolean);
  if (opts.dir) mkdirSync(opts.dir, { recursive: true });
  const base = mkdtempSync(opts.dir ? join(opts.dir, "rename-") : join(tmpdir(), "hermes-bench-rename-"));
  const seedHome = join(base, "seed");
  const log = (text) => {
    if (!opts.json) process.stdout.write(text);
  };
  log(
    `seeding ${seedHome}: ${OLD} owns ${counts.sessions.toLocaleString("en")} sessions and ${counts.routing.toLocaleString("en")} routing entries; ${OTHERS.join(", ")} own ${counts.otherSessions.toLocaleString("en")} sessions each\n`,
  );
  const seeded = await runChild("seed", seedHome, counts);
  log(`seeded in ${secs(seeded.seconds)}; state.db is ${mb(seeded.bytes)}\n\n`);

  const results = [];
  try {
    for (const scenario of scenarios) {
      const home = join(base, scenario);
      cpSync(seedHome, home, { recursive: true });
      const r = await runChild(scenario, home, counts);
      results.push(r);
      if (!opts.keep) rmSync(home, { recursive: true, force: true });
    }
  } finally {
    if (!opts.keep) rmSync(base, { recursive: true, force: true });
  }

  const baseline = results.find((r) => r.phase === "baseline");
  const label = {
    baseline: "baseline: UPDATE of 1 column of the sessions",
    direct: "migrateIdentity, no gateway (CLI path)",
    live: "migrateIdentity in a live gateway",
    cli: "hermes profile rename, end to end (in-process main)",
    turns: "rename in a live gateway, other profiles' turns running",
  };
  const rows = results.map((r) => ({
    scenario: r.phase,
    seconds: r.seconds,
    ratio_to_baseline: baseline && r.phase !== "baseline" ? r.seconds / baseline.seconds : undefined,
    max_rss_bytes: r.max_rss_bytes,
    vm_hwm_bytes: r.vm_hwm_bytes,
    rss_before_bytes: r.rss_before_bytes,
    verified: r.verified,
    ...(r.rows !== undefined ? { rows: r.rows } : {}),
    ...(r.gateway_start_seconds !== undefined
      ? { gateway_start_seconds: r.gateway_start_seconds, routing_in_memory: r.routing_in_memory }
      : {}),
    ...(r.turns_during !== undefined ? { turns_quiet: r.turns_quiet, turns_during: r.turns_during } : {}),
  }));
  if (opts.json) {
    process.stdout.write(
      `${JSON.stringify({ counts, state_db_bytes: seeded.bytes, seed_seconds: seeded.seconds, node: process.version, results: rows }, null, 2)}\n`,
    );
  } else {
    const head = ["scenario", "wall", "x baseline", "maxRSS", "VmHWM", "RSS before", "rows correct"];
    const body = rows.map((r) => [
      label[r.scenario] ?? r.scenario,
      secs(r.seconds),
      r.ratio_to_baseline === undefined ? "-" : `${r.ratio_to_baseline.toFixed(2)}x`,
      mb(r.max_rss_bytes),
      r.vm_hwm_bytes === undefined ? "-" : mb(r.vm_hwm_bytes),
      mb(r.rss_before_bytes),
      r.verified ? "yes" : "NO",
    ]);
    const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
    for (const line of [head, ...body]) log(`${line.map((c, i) => c.padEnd(widths[i])).join("  ")}\n`);
    const live = rows.find((r) => r.scenario === "live");
    if (live)
      log(`\nlive gateway start (loads ${counts.routing.toLocaleString("en")}+ routing entries): ${secs(live.gateway_start_seconds)}\n`);
    const turns = rows.find((r) => r.scenario === "turns");
    if (turns) {
      const line = (l) => `${l.turns} turns, p50 ${l.p50_ms.toFixed(1)} ms, p99 ${l.p99_ms.toFixed(1)} ms, max ${l.max_ms.toFixed(1)} ms`;
      log(`\nother profiles' turns (${TURN_SENDERS} senders), quiet window before the rename: ${line(turns.turns_quiet)}\n`);
      log(`other profiles' turns that overlapped the rename:                      ${line(turns.turns_during)}\n`);
    }
    log(
      "goal: rename under 1 s end to end, other profiles' turns delayed < 200 ms (p99) while it runs. Peak RSS per scenario process: maxRSS = process.resourceUsage().maxRSS, VmHWM = /proc/self/status;\n" +
        "both include Node and the loaded packages; RSS before = just before the timed step.\n",
    );
  }
  if (rows.some((r) => !r.verified)) {
    process.stderr.write("some scenario left rows under the wrong name: the figures above are not valid\n");
    process.exitCode = 1;
  }
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exitCode = 1;
});
