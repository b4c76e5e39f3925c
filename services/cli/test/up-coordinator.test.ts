import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findEtcdBinary } from "../../../test/support/etcd.js";
import { eventually } from "../../../test/support/eventually.js";
import { assertBuilt, cleanEnv, HERMES_BIN, hermes, removeHome, tempHome } from "./support/cli-harness.js";

/**
 * `hermes up --coordinator` (the built CLI, in a folder of its own): a local single-node etcd next to
 * the relay and three gateways, the demo room created with quorum replication over all three,
 * acknowledged sends, and Ctrl-C stopping etcd with the rest.
 */

let workDir: string;

beforeAll(() => {
  assertBuilt();
  if (!findEtcdBinary()) throw new Error("no etcd binary: run scripts/ensure-etcd.sh (Debian package etcd-server)");
  workDir = tempHome("hupq-");
  mkdirSync(workDir, { recursive: true });
});

afterAll(() => {
  if (workDir) removeHome(workDir);
});

describe("hermes up --coordinator", () => {
  it("starts etcd and a mesh whose demo room is a quorum room over the three gateways; Ctrl-C stops etcd too", async () => {
    const child = spawn(process.execPath, [HERMES_BIN, "up", "--dir", "mesh", "--coordinator"], {
      cwd: workDir,
      env: cleanEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await eventually(
        () => {
          if (child.exitCode !== null) throw new Error(`hermes up exited ${child.exitCode}:\n${out}`);
          expect(out).toMatch(/^mesh ready: /m);
        },
        { timeoutMs: 120_000, intervalMs: 200, what: "hermes up --coordinator to be ready" },
      );
      expect(out).toMatch(/hermes up: etcd on http:\/\/127\.0\.0\.1:\d+ \(pid \d+/);

      const home = { home: `${workDir}/mesh/gw-1` };
      await eventually(
        async () => {
          const state = await hermes(["--json", "groups", "state", "lobby"], home);
          expect(JSON.parse(state.stdout)).toMatchObject({
            room: { role: "authority", authority_gateway_id: "gw-1" },
            replication: { mode: "quorum", replicas: ["gw-1", "gw-2", "gw-3"], min_insync: 2, isr: ["gw-1", "gw-2", "gw-3"] },
          });
        },
        { timeoutMs: 30_000, intervalMs: 200, what: "all three gateways in sync" },
      );
      const sent = await hermes(["--json", "groups", "send", "lobby", "hello quorum", "--event-id", "q-hello"], home);
      expect(sent.code, sent.stderr).toBe(0);
      const onReplica = await hermes(["--json", "groups", "log", "lobby"], { home: `${workDir}/mesh/gw-3` });
      expect((JSON.parse(onReplica.stdout) as { events: { event_id: string }[] }).events.map((e) => e.event_id)).toContain("q-hello");
    } finally {
      if (child.exitCode === null) child.kill("SIGINT");
    }
    expect(await exited).toBe(0);
    expect(out).toMatch(/hermes up: stopped .*etcd/);
  }, 180_000);
});
