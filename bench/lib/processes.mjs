// Processes for benchmarks that keep servers and clients apart (the server in its own process, so
// the two do not share one event loop): a real `hermes gateway start` from the BUILT CLI, one-shot child phases that
// print a JSON result line, and the CPU time a process has used so far (from /proc).
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const HERMES_BIN = `${ROOT}services/cli/bin/hermes.js`;

/** Line prefixes a child phase prints: its result, or (long-running servers) that it is ready. */
export const RESULT = "BENCH-RESULT ";
export const READY = "BENCH-READY ";

/** Linux clock ticks per second for /proc/<pid>/stat (USER_HZ, 100 on every mainstream kernel). */
const TICKS_PER_SECOND = 100;

/** A TCP port free on 127.0.0.1 right now (for servers that cannot be told to take port 0). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** User + system CPU milliseconds a process has used so far, or NaN when /proc is not readable. */
export function processCpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start at ") ": utime is field 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

function collect(child) {
  const out = { stdout: "", stderr: "" };
  child.stdout.setEncoding("utf8").on("data", (d) => {
    out.stdout += d;
  });
  child.stderr.setEncoding("utf8").on("data", (d) => {
    out.stderr += d;
  });
  return out;
}

function tail(text, n = 2000) {
  return text.length > n ? `…${text.slice(-n)}` : text;
}

/** The daemons' node flags, from the built package (what `hermes up` and the images start a daemon with). */
async function daemonNodeFlags() {
  return (await import(`${ROOT}services/common/dist/pure/index.js`)).DAEMON_NODE_FLAGS;
}

/**
 * For a benchmark that hosts a gateway in its own process (bench:delivery): runs the script again
 * with the daemons' node flags when it was started without them, so the gateway in it runs as
 * `hermes up` and the images run one. Returns only in the process that has them.
 */
export async function withDaemonFlags(scriptUrl) {
  const flags = await daemonNodeFlags();
  if (flags.every((flag) => process.execArgv.includes(flag))) return;
  const args = [...process.execArgv, ...flags, fileURLToPath(scriptUrl), ...process.argv.slice(2)];
  const run = spawnSync(process.execPath, args, { stdio: "inherit" });
  process.exit(run.status ?? 1);
}

/**
 * `hermes --home HOME gateway start` on ephemeral loopback ports, logs silenced. Resolves once the
 * ready line is printed, with its gRPC URL, HTTP base URL, pid, `stop()` (SIGTERM, SIGKILL after 10 s) and
 * `kill9()`. `nodeArgs` go to node itself (e.g. `--cpu-prof` to see where a gateway spends its time),
 * `args` to `gateway start` (e.g. `--coordinator etcd://…`).
 */
export async function startGateway({ home, id, key, env = {}, nodeArgs = [], args: extraArgs = [] }) {
  const args = [
    // Started as `hermes up` and the images start a gateway: with the daemons' node flags.
    ...(await daemonNodeFlags()),
    ...nodeArgs,
    HERMES_BIN,
    "--home",
    home,
    "gateway",
    "start",
    "--grpc",
    "127.0.0.1:0",
    "--http",
    "127.0.0.1:0",
    ...extraArgs,
  ];
  if (id) args.push("--id", id);
  const child = spawn(process.execPath, args, {
    env: { ...process.env, HERMES_LOG_LEVEL: "silent", API_SERVER_KEY: key, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = collect(child);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`gateway not ready within 60 s: ${tail(out.stderr)}`));
    }, 60_000);
    const onData = () => {
      const m = /^gateway ready: (.*)$/m.exec(out.stdout);
      if (!m) return;
      clearTimeout(timer);
      child.stdout.off("data", onData);
      const ready = Object.fromEntries(m[1].split(" ").map((kv) => kv.split("=", 2)));
      resolve({
        id: ready.id,
        url: `grpc://${ready.grpc}`,
        http: `http://${ready.http}`,
        pid: child.pid,
        cpuMs: () => processCpuMs(child.pid),
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return exited;
          child.kill("SIGTERM");
          const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
          const result = await exited;
          clearTimeout(killer);
          return result;
        },
        /** kill -9, like a machine dying; resolves once the process is gone. */
        async kill9() {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
          return exited;
        },
      });
    };
    child.stdout.on("data", onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (code ${code}, signal ${signal}) before it was ready: ${tail(out.stderr)}`));
    });
  });
}

/**
 * Runs `node SCRIPT --phase NAME --args JSON` in a fresh process and resolves with the JSON it printed
 * after RESULT. The child's stderr is passed through (progress notes, warnings).
 */
export function runPhase(script, phase, args = {}) {
  const child = spawn(process.execPath, [script, "--phase", phase, "--args", JSON.stringify(args)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = collect(child);
  return new Promise((resolve, reject) => {
    child.once("exit", (code, signal) => {
      const line = out.stdout.split("\n").find((l) => l.startsWith(RESULT));
      if (code === 0 && line) return resolve(JSON.parse(line.slice(RESULT.length)));
      reject(new Error(`phase ${phase} failed (code ${code}, signal ${signal}): ${tail(out.stderr)}`));
    });
  });
}

/**
 * Starts a long-running child phase (a server) and resolves once it printed READY, with what it
 * printed there, its pid and `stop()`.
 */
export function startPhase(script, phase, args = {}) {
  const child = spawn(process.execPath, [script, "--phase", phase, "--args", JSON.stringify(args)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = collect(child);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  return new Promise((resolve, reject) => {
    const onData = () => {
      const line = out.stdout.split("\n").find((l) => l.startsWith(READY));
      if (!line) return;
      child.stdout.off("data", onData);
      resolve({
        ...JSON.parse(line.slice(READY.length)),
        pid: child.pid,
        cpuMs: () => processCpuMs(child.pid),
        async stop() {
          child.kill("SIGTERM");
          await exited;
        },
      });
    };
    child.stdout.on("data", onData);
    void exited.then((code) => reject(new Error(`phase ${phase} exited (code ${code}) before it was ready: ${tail(out.stderr)}`)));
  });
}

/** Prints the child's result line (the last thing a phase does). */
export function printResult(result) {
  process.stdout.write(`${RESULT}${JSON.stringify(result)}\n`);
}

export function printReady(info) {
  process.stdout.write(`${READY}${JSON.stringify(info)}\n`);
}

/** The text of a process's /metrics. */
async function metricsText(httpBase, key) {
  const res = await fetch(`${httpBase}/metrics`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  return res.text();
}

/** The value of a sample of a Prometheus metric (the first one, whatever its labels), or NaN. */
function metricValue(text, name) {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

/** The sum and count of a Prometheus histogram on a process's /metrics (for deltas around a phase). */
export async function histogramTotals(httpBase, name, key) {
  const text = await metricsText(httpBase, key);
  return { sum: metricValue(text, `${name}_sum`), count: metricValue(text, `${name}_count`) };
}

/**
 * The user and system CPU milliseconds a gateway has used so far, as the process itself reads them
 * with process.cpuUsage() (microsecond resolution; prom-client's process_cpu_* counters on /metrics).
 */
export async function gatewayCpuUsageMs(httpBase, key) {
  const text = await metricsText(httpBase, key);
  return {
    user: metricValue(text, "hermes_process_cpu_user_seconds_total") * 1000,
    system: metricValue(text, "hermes_process_cpu_system_seconds_total") * 1000,
  };
}
