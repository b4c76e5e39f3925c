// A real etcd for the coordinated-mesh benchmark: Debian's `etcd` binary (scripts/ensure-etcd.sh
// installs etcd-server when it is missing), one member on random 127.0.0.1 ports with a temporary
// data folder removed at stop.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./processes.mjs";

const ENSURE = fileURLToPath(new URL("../../scripts/ensure-etcd.sh", import.meta.url));

/** The etcd binary; runs scripts/ensure-etcd.sh (which installs Debian's etcd-server as root, or says how). */
export function ensureEtcd() {
  try {
    execFileSync("bash", [ENSURE], { stdio: ["ignore", "ignore", "inherit"] });
    return execFileSync("sh", ["-c", "command -v etcd || { test -x /usr/bin/etcd && echo /usr/bin/etcd; }"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      "etcd is needed for the quorum benchmark: install Debian's etcd-server (apt-get install etcd-server) or put etcd 3.4+ on PATH",
    );
  }
}

/** One etcd member; resolves once /health says it has a leader, with its client URL and `stop()`. */
export async function startEtcd() {
  const bin = ensureEtcd();
  const dir = mkdtempSync(join(tmpdir(), "bench-etcd-"));
  const [client, peer] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${client}`;
  const peerUrl = `http://127.0.0.1:${peer}`;
  const child = spawn(
    bin,
    [
      "--name",
      "bench",
      "--data-dir",
      dir,
      "--listen-client-urls",
      url,
      "--advertise-client-urls",
      url,
      "--listen-peer-urls",
      peerUrl,
      "--initial-advertise-peer-urls",
      peerUrl,
      "--initial-cluster",
      `bench=${peerUrl}`,
      "--log-level",
      "error",
      "--logger",
      "zap",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const deadline = performance.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`etcd exited before it was healthy: ${stderr}`);
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      if ((await res.json()).health === "true") break;
    } catch {
      // not up yet
    }
    if (performance.now() > deadline) throw new Error(`etcd not healthy within 20 s: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const version = execFileSync(bin, ["--version"], { encoding: "utf8" }).split("\n")[0];
  return {
    url,
    /** What `--coordinator` takes. */
    coordinator: `etcd://127.0.0.1:${client}`,
    version,
    pid: child.pid,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
