// NATS JetStream as the peer baseline for the room-log benchmarks: a real
// nats-server started here on 127.0.0.1 with file storage (one server, or a 3-server cluster for
// R3 streams), measured in the same run as our code.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { paced, pacedCounts } from "./pipeline.mjs";
import { freePort } from "./processes.mjs";

const HOW_TO_GET =
  "install Debian's nats-server (as root: apt-get install --no-install-recommends nats-server), or put nats-server 2.9+ on PATH";

/** Finds nats-server, installing Debian's package when running as root on Debian; else says how to get it. */
export function ensureNatsServer() {
  try {
    return execFileSync("sh", ["-c", "command -v nats-server"], { encoding: "utf8" }).trim();
  } catch {
    if (process.getuid?.() === 0) {
      console.error("bench: nats-server is missing: installing Debian's package (apt-get install -y --no-install-recommends nats-server)");
      try {
        execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "nats-server"], { stdio: "ignore" });
      } catch {
        execFileSync("apt-get", ["update"], { stdio: "ignore" });
        execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "nats-server"], { stdio: "ignore" });
      }
      return execFileSync("sh", ["-c", "command -v nats-server"], { encoding: "utf8" }).trim();
    }
    throw new Error(`nats-server is needed for the JetStream baseline: ${HOW_TO_GET}`);
  }
}

async function connectWithin(servers, ms = 10_000) {
  const deadline = performance.now() + ms;
  for (;;) {
    try {
      return await connect({ servers });
    } catch (err) {
      if (performance.now() > deadline) throw new Error(`nats-server did not start: ${err.message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * `size` JetStream servers clustered on 127.0.0.1 (file storage, one store folder each), connected
 * to all of them. Resolves once the cluster has a JetStream meta leader (a stream can be created).
 */
export async function startNatsCluster(size = 3) {
  const bin = ensureNatsServer();
  const ports = [];
  for (let i = 0; i < size; i++) ports.push({ client: await freePort(), cluster: await freePort() });
  const routes = ports.map((p) => `nats://127.0.0.1:${p.cluster}`).join(",");
  const servers = ports.map((p, i) => {
    const dir = mkdtempSync(join(tmpdir(), `bench-nats-r${size}-${i}-`));
    const child = spawn(
      bin,
      [
        "-js",
        "-a",
        "127.0.0.1",
        "-p",
        String(p.client),
        "-sd",
        dir,
        "-n",
        `bench-${i}`,
        "--cluster_name",
        "bench",
        "--cluster",
        `nats://127.0.0.1:${p.cluster}`,
        "--routes",
        routes,
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    const exited = new Promise((r) => child.once("exit", r));
    return { child, dir, exited };
  });
  const nc = await connectWithin(ports.map((p) => `127.0.0.1:${p.client}`));
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  const deadline = performance.now() + 30_000;
  for (;;) {
    try {
      await jsm.getAccountInfo();
      break;
    } catch (err) {
      if (performance.now() > deadline) throw new Error(`the nats-server cluster has no JetStream leader: ${err.message}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const leaderConnections = [];
  return {
    nc,
    pids: servers.map((s) => s.child.pid),
    /**
     * A connection to the server that leads `stream` only (as a client of our rooms sends to the
     * room's authority): publishes then take no extra hop through a follower.
     */
    async connectToLeader(stream) {
      const info = await jsm.streams.info(stream);
      const index = servers.findIndex((_, i) => info.cluster?.leader === `bench-${i}`);
      if (index < 0) throw new Error(`stream ${stream} has no leader among the bench servers (${info.cluster?.leader})`);
      const leaderNc = await connectWithin(`127.0.0.1:${ports[index].client}`);
      leaderConnections.push(leaderNc);
      return leaderNc;
    },
    async stop() {
      for (const c of leaderConnections) await c.close();
      await nc.close();
      for (const s of servers) s.child.kill("SIGTERM");
      await Promise.all(servers.map((s) => s.exited));
      for (const s of servers) rmSync(s.dir, { recursive: true, force: true });
    },
  };
}

export async function startNats() {
  const bin = ensureNatsServer();
  const dir = mkdtempSync(join(tmpdir(), "bench-nats-"));
  const port = await freePort();
  const child = spawn(bin, ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", dir], { stdio: ["ignore", "ignore", "pipe"] });
  const nc = await connectWithin(`127.0.0.1:${port}`);
  return {
    nc,
    pid: child.pid,
    async stop() {
      await nc.close();
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Acknowledged publishes/s with `window` publishes in flight (file storage, R1). */
export async function jetStreamPublish({ count, bytes = 200, window = 1000 }) {
  const nats = await startNats();
  try {
    const jsm = await jetstreamManager(nats.nc);
    await jsm.streams.add({ name: "EVENTS", subjects: ["events.>"], storage: "file" });
    const js = jetstream(nats.nc);
    const payload = new Uint8Array(bytes).fill(120);
    const started = performance.now();
    const inflight = new Set();
    for (let i = 0; i < count; i++) {
      const p = js.publish("events.room", payload).then(() => inflight.delete(p));
      inflight.add(p);
      if (inflight.size >= window) await Promise.race(inflight);
    }
    await Promise.all(inflight);
    const secs = (performance.now() - started) / 1000;
    return { count, secs, rate: count / secs };
  } finally {
    await nats.stop();
  }
}

/**
 * Mirror catch-up: `count` messages published first, then a mirror stream created and timed until
 * it holds them all. `cpuMs(pid)`, when given, reads nats-server's CPU over that time (`serverCpuMs`).
 */
export async function jetStreamMirror({ count, bytes = 200, cpuMs }) {
  const nats = await startNats();
  try {
    const jsm = await jetstreamManager(nats.nc);
    await jsm.streams.add({ name: "EVENTS", subjects: ["events.>"], storage: "file" });
    const payload = new Uint8Array(bytes).fill(120);
    // Seed quickly with core-NATS publishes (no acks), then wait until the stream holds them.
    for (let i = 0; i < count; i++) {
      nats.nc.publish("events.room", payload);
      if (i % 10_000 === 0) await nats.nc.flush();
    }
    await nats.nc.flush();
    while ((await jsm.streams.info("EVENTS")).state.messages < count) await new Promise((r) => setTimeout(r, 20));
    const cpu0 = cpuMs?.(nats.pid);
    const started = performance.now();
    await jsm.streams.add({ name: "EVENTS_M", mirror: { name: "EVENTS" }, storage: "file" });
    while ((await jsm.streams.info("EVENTS_M")).state.messages < count) await new Promise((r) => setTimeout(r, 20));
    const secs = (performance.now() - started) / 1000;
    const serverCpuMs = cpuMs ? cpuMs(nats.pid) - cpu0 : undefined;
    return { count, secs, rate: count / secs, serverCpuMs };
  } finally {
    await nats.stop();
  }
}

/**
 * Live tail of a mirror: acknowledged publishes at `rate` messages/s into EVENTS while an ordered
 * consumer reads the mirror EVENTS_M: per message, publish → ack, and publish → read from the
 * mirror (the room log's live tail to a replica, JetStream's way). `cpuMs()` reads nats-server's CPU.
 */
export async function jetStreamTail({ rate, seconds, warmupSeconds, bytes = 200, cpuMs }) {
  const nats = await startNats();
  try {
    const jsm = await jetstreamManager(nats.nc);
    await jsm.streams.add({ name: "EVENTS", subjects: ["events.>"], storage: "file" });
    await jsm.streams.add({ name: "EVENTS_M", mirror: { name: "EVENTS" }, storage: "file" });
    const js = jetstream(nats.nc);
    const consumer = await js.consumers.get("EVENTS_M");
    const messages = await consumer.consume();
    const { total, warm } = pacedCounts(rate, seconds, warmupSeconds);
    const sentAt = new Array(total);
    const ack = [];
    const mirrored = [];
    const read = (async () => {
      let seen = 0;
      for await (const m of messages) {
        const i = new DataView(m.data.buffer, m.data.byteOffset, 4).getUint32(0);
        if (i >= warm) mirrored.push(performance.now() - sentAt[i]);
        if (++seen === total) break;
      }
    })();
    const cpu0 = cpuMs(nats.pid);
    const acks = [];
    await paced(total, rate, (i) => {
      const payload = new Uint8Array(bytes).fill(120);
      new DataView(payload.buffer).setUint32(0, i);
      sentAt[i] = performance.now();
      acks.push(
        js.publish("events.room", payload).then(() => {
          if (i >= warm) ack.push(performance.now() - sentAt[i]);
        }),
      );
    });
    await Promise.all(acks);
    const finished = await Promise.race([read.then(() => "ok"), new Promise((r) => setTimeout(() => r("timeout"), 30_000))]);
    const serverCpuMs = cpuMs(nats.pid) - cpu0;
    messages.stop();
    return { finished, sent: total, ack, mirrored, serverCpuMs };
  } finally {
    await nats.stop();
  }
}
