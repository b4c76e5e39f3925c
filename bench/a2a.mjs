#!/usr/bin/env node
// Benchmark: A2A serving (issue #37). Prints figures and ratios only; no pass/fail.
//
//   npm run build && npm run bench:a2a [-- --clients 50 --bots 50 --turns 40 --rounds 2 --json]
//
// One gateway process (the BUILT `hermes gateway start`) with N bots on the embedded deterministic
// `local` provider, so everything measured is our own overhead. C clients in this process each
// send T turns one after another to their own bot (client i → bot i mod N), all clients at once:
//   a2a    JSON-RPC `SendMessage` (A2A 1.0) over HTTP/1.1 keep-alive (node:http, Nagle off), blocking until the task has
//          completed; each answer is checked to be a completed task with the reply as its artifact
//   rpc    the same turns through the console's JSON-RPC `bots.chat` over one WebSocket per client
//          (the baseline: the gateway's own chat path, same bots, same turns)
// Both run in each of R rounds, alternating (rpc first), and the figures are the medians of the
// rounds: turns/s, turn latency p50/p99 as the client sees it, and the gateway's CPU per turn.
// The ratio a2a/rpc is what the A2A layer costs: its HTTP and protocol handling, its task rows
// (one fsynced commit when admitted, one when ended; bots.chat writes its turn obligation twice).

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { benchOptions, intOption } from "./lib/options.mjs";
import { HERMES_BIN, startGateway } from "./lib/processes.mjs";
import { fmt, header, line, machine, median, percentile } from "./lib/report.mjs";

const opts = benchOptions(import.meta.url, {
  clients: { type: "string", default: "50" },
  bots: { type: "string", default: "50" },
  turns: { type: "string", default: "40" },
  rounds: { type: "string", default: "2" },
  json: { type: "boolean", default: false },
});
const CLIENTS = intOption(opts, "clients");
const BOTS = intOption(opts, "bots");
const TURNS = intOption(opts, "turns");
const ROUNDS = intOption(opts, "rounds");
const KEY = "bench-a2a-key-0123456789abcdef";
const WebSocket = createRequire(import.meta.url)("ws");

const say = (text) => (opts.json ? process.stderr.write(`${text}\n`) : console.log(text));
const bot = (i) => `bot-${String(i % BOTS).padStart(3, "0")}`;

/** A keep-alive HTTP/1.1 connection per client, Nagle off (as the WebSocket side has it). */
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

function post(url, body) {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: {
          authorization: `Bearer ${KEY}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "a2a-version": "1.0",
        },
      },
      (response) => {
        const chunks = [];
        response.on("data", (chunk) => chunks.push(chunk));
        response.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
      },
    );
    request.on("socket", (socket) => socket.setNoDelay(true));
    request.on("error", reject);
    request.end(body);
  });
}

/** One client's turns over A2A: SendMessage, blocking, one after another. */
async function a2aClient(base, i, turns, latencies) {
  const url = `${base}/a2a/${bot(i)}/`;
  for (let n = 0; n < turns; n++) {
    const started = performance.now();
    const answer = await post(
      url,
      JSON.stringify({
        jsonrpc: "2.0",
        id: n,
        method: "SendMessage",
        params: { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: `turn ${n} from client ${i}` }] } },
      }),
    );
    const task = answer.result?.task;
    if (task?.status?.state !== "TASK_STATE_COMPLETED" || !task.artifacts?.[0]?.parts?.[0]?.text) {
      throw new Error(`a2a turn did not complete: ${JSON.stringify(answer).slice(0, 300)}`);
    }
    latencies.push(performance.now() - started);
  }
}

/** One client's turns through `bots.chat` on its own WebSocket. */
async function rpcClient(base, i, turns, latencies) {
  const ws = new WebSocket(`${base.replace("http:", "ws:")}/rpc`, { headers: { authorization: `Bearer ${KEY}` } });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let waiting;
  ws.on("message", (data) => waiting?.(JSON.parse(data.toString())));
  try {
    for (let n = 0; n < turns; n++) {
      const started = performance.now();
      const answer = await new Promise((resolve) => {
        waiting = resolve;
        ws.send(
          JSON.stringify({ jsonrpc: "2.0", id: n, method: "bots.chat", params: { profile: bot(i), text: `turn ${n} from client ${i}` } }),
        );
      });
      if (!answer.result?.reply) throw new Error(`bots.chat failed: ${JSON.stringify(answer).slice(0, 300)}`);
      latencies.push(performance.now() - started);
    }
  } finally {
    ws.close();
  }
}

/** All clients at once, T turns each; turns/s, latency percentiles and the gateway's CPU per turn. */
async function measure(gateway, client, turns) {
  const latencies = [];
  const cpuBefore = gateway.cpuMs();
  const started = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(gateway.http, i, turns, latencies)));
  const seconds = (performance.now() - started) / 1000;
  const cpuMs = gateway.cpuMs() - cpuBefore;
  latencies.sort((a, b) => a - b);
  return {
    rate: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuMsPerTurn: cpuMs / latencies.length,
  };
}

const home = mkdtempSync(join(tmpdir(), "hermes-bench-a2a-"));
writeFileSync(join(home, "config.yaml"), "provider: local\n");
say(`creating ${BOTS} bots…`);
for (let i = 0; i < BOTS; i++)
  execFileSync(process.execPath, [HERMES_BIN, "--home", home, "profile", "create", bot(i)], { stdio: "ignore" });
const gateway = await startGateway({ home, key: KEY });
const results = { a2a: [], rpc: [] };
try {
  // Warm-up: every bot's agent built, every connection open, the JIT warm.
  await measure(gateway, rpcClient, 2);
  await measure(gateway, a2aClient, 2);
  for (let r = 0; r < ROUNDS; r++) {
    results.rpc.push(await measure(gateway, rpcClient, TURNS));
    results.a2a.push(await measure(gateway, a2aClient, TURNS));
    say(`round ${r + 1}: rpc ${fmt(results.rpc.at(-1).rate)}/s, a2a ${fmt(results.a2a.at(-1).rate)}/s`);
  }
} finally {
  await gateway.stop();
  rmSync(home, { recursive: true, force: true });
}

const summary = (side) => ({
  rate: median(results[side].map((x) => x.rate)),
  p50: median(results[side].map((x) => x.p50)),
  p99: median(results[side].map((x) => x.p99)),
  cpuMsPerTurn: median(results[side].map((x) => x.cpuMsPerTurn)),
});
const rpc = summary("rpc");
const a2a = summary("a2a");
if (opts.json) {
  console.log(JSON.stringify({ clients: CLIENTS, bots: BOTS, turns: TURNS, rounds: ROUNDS, rpc, a2a, ratio: a2a.rate / rpc.rate }));
} else {
  header(`A2A SendMessage vs bots.chat: ${CLIENTS} clients, ${BOTS} bots, ${TURNS} turns each, median of ${ROUNDS} rounds (${machine()})`);
  const base = { label: "bots.chat", value: rpc.rate };
  line("bots.chat over /rpc (WebSocket), turns/s", rpc.rate, "turns/s");
  line("A2A SendMessage → completed task, turns/s", a2a.rate, "turns/s", base);
  line("bots.chat latency p50", rpc.p50, "ms");
  line("bots.chat latency p99", rpc.p99, "ms");
  line("A2A latency p50", a2a.p50, "ms", { label: "bots.chat", value: rpc.p50 });
  line("A2A latency p99", a2a.p99, "ms", { label: "bots.chat", value: rpc.p99 });
  say(`gateway CPU per turn: bots.chat ${fmt(rpc.cpuMsPerTurn, 2)} ms, A2A ${fmt(a2a.cpuMsPerTurn, 2)} ms`);
  say(
    `load average ${loadavg()
      .map((l) => fmt(l, 2))
      .join(" ")}`,
  );
}
