import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import { FakeGateway } from "./support/fake-gateway.js";

/**
 * `hermes relay start` and `hermes relay key add/list/revoke` as an operator runs them: the BUILT
 * command (`npm run build` first), as subprocesses, against a relay running in its own process.
 */

const BIN = fileURLToPath(new URL("../../cli/bin/hermes.js", import.meta.url));
const DIST = fileURLToPath(new URL("../../cli/dist/commands/relay.js", import.meta.url));

function env(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, HERMES_LOG_LEVEL: "warn" };
  for (const k of Object.keys(e)) if (k.startsWith("HERMES_") && k !== "HERMES_LOG_LEVEL") delete e[k];
  return e;
}

function hermes(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [BIN, ...args], { env: env(), timeout: 30_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end();
  });
}

let dir: string;
let relay: ChildProcess;
let grpc: string;
let exited: Promise<number | null>;

beforeAll(async () => {
  if (!existsSync(DIST)) throw new Error(`${DIST} is missing: run \`npm run build\` first (this test runs the built CLI)`);
  dir = mkdtempSync(join(tmpdir(), "hrelay-cli-"));
  // A key issued before the relay ever ran (creates the data folder and database).
  const early = await hermes(["relay", "key", "add", "early", "--data", dir]);
  expect(early.code).toBe(0);
  relay = spawn(process.execPath, [BIN, "relay", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data", dir], {
    env: env(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  exited = new Promise((resolve) => relay.once("exit", (code) => resolve(code)));
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    relay.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      const l = out.split("\n").find((x) => x.startsWith("relay ready:"));
      if (l) resolve(l);
    });
    relay.once("exit", (code) => reject(new Error(`relay exited (${code}): ${out}`)));
  });
  grpc = /grpc=(\S+)/.exec(line)![1]!;
  expect(line).toContain(`data=${dir}`);
}, 60_000);

afterAll(async () => {
  if (relay && relay.exitCode === null) {
    relay.kill("SIGKILL");
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("hermes relay", () => {
  it("key add prints the key as the last word (and as JSON); a gateway can connect with it", async () => {
    const human = await hermes(["relay", "key", "add", "laptop", "--data", dir]);
    expect(human.code).toBe(0);
    const key = human.stdout.trim().split(/\s+/).at(-1)!;
    expect(key).toMatch(/^hrk_[A-Za-z0-9_-]{43}$/);
    const json = await hermes(["relay", "key", "add", "vps", "--data", dir, "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({ connection: "vps", key: expect.stringMatching(/^hrk_/) });
    const again = await hermes(["relay", "key", "add", "laptop", "--data", dir]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("already has a key");
    const bad = await hermes(["relay", "key", "add", "../x", "--data", dir]);
    expect(bad.code).toBe(2);

    const g = await FakeGateway.connect(grpc, key, "laptop");
    g.announce([{ handle: "alice" }, { handle: "bob" }]);
    // The list shows the announced bots once the relay has taken the announcement.
    const list = await eventually(async () => {
      const listed = JSON.parse((await hermes(["relay", "key", "list", "--data", dir, "--json"])).stdout) as {
        connections: { connection: string; online: boolean; bots: number; gateway_id: string }[];
      };
      expect(listed.connections.find((c) => c.connection === "laptop")).toMatchObject({ online: true, bots: 2, gateway_id: "gw-laptop" });
      return listed;
    });
    expect(list.connections.map((c) => c.connection)).toEqual(["early", "laptop", "vps"]);

    // Revoking through the running relay disconnects the gateway at once.
    const revoked = await hermes(["relay", "key", "revoke", "laptop", "--data", dir]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toContain("disconnected");
    expect((await g.ended).error?.reason).toBe("unauthenticated");
    await g.close();
    const missing = await hermes(["relay", "key", "revoke", "laptop", "--data", dir]);
    expect(missing.code).toBe(1);
  });

  it("relay status answers through the control socket", async () => {
    const status = JSON.parse((await hermes(["relay", "status", "--data", dir, "--json"])).stdout) as Record<string, unknown>;
    expect(status).toMatchObject({ grpc_address: grpc, data_dir: dir, connections_known: 2 });
  });

  it("refuses a second relay on the same data folder; SIGTERM stops gracefully", async () => {
    const second = await hermes(["relay", "start", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data", dir]);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain("another relay is already serving");
    relay.kill("SIGTERM");
    expect(await exited).toBe(0);
    // Keys are still there, and can be listed without a running relay.
    const list = await hermes(["relay", "key", "list", "--data", dir]);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain("early");
    const status = await hermes(["relay", "status", "--data", dir]);
    expect(status.code).toBe(1);
    expect(status.stderr).toContain("no relay is serving");
  });
});
