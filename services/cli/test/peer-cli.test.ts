import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  assertBuilt,
  type CliResult,
  cleanEnv,
  type GatewayProcess,
  HERMES_BIN,
  hermes,
  NAME_RULE,
  removeHome,
  startGatewayProcess,
  TEST_KEY,
  tempHome,
} from "./support/cli-harness.js";

/**
 * `hermes peer …` as an operator runs it (the built command, a subprocess per call): the registry
 * in config.yaml and .env (comments and other lines kept, mode 0600, keys never printed), and dm,
 * run, status and stop against a second gateway process, with exit codes 0/1/2.
 */

const PEER_KEY = "peer-cli-key-0123456789";
let homeA: string;
let homeB: string;
let a: GatewayProcess;
let b: GatewayProcess;
const homes: string[] = [];

/** `hermes ARGS…` with `stdin` piped in (the CLI's harness closes stdin; dm and run read it). */
function hermesWithStdin(args: string[], stdin: string, home: string, env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [HERMES_BIN, ...args], {
      env: cleanEnv({ HERMES_HOME: home, ...env }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === null) reject(new Error(`hermes ${args.join(" ")} died (${signal}); stderr: ${stderr}`));
      else resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

const onA = (args: string[], env?: Record<string, string>) => hermes(args, { home: homeA, ...(env ? { env } : {}) });
const dmFromA = (args: string[], stdin: string) => hermesWithStdin(args, stdin, homeA);
const json = <T = Record<string, unknown>>(r: { stdout: string }) => JSON.parse(r.stdout) as T;

function newHome(): string {
  const home = tempHome("hcli-p-");
  homes.push(home);
  return home;
}

beforeAll(async () => {
  assertBuilt();
  homeA = tempHome("hcli-pa-");
  homeB = tempHome("hcli-pb-");
  [a, b] = await Promise.all([
    startGatewayProcess(homeA, { API_SERVER_KEY: TEST_KEY }),
    startGatewayProcess(homeB, { API_SERVER_KEY: PEER_KEY }),
  ]);
  const created = await hermes(["profile", "create", "bob", "--title", "Remote reviewer"], { home: homeB });
  expect(created.code, created.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  for (const h of [homeA, homeB, ...homes]) if (h) removeHome(h);
});

describe("peer add, list, remove", () => {
  it("writes name/url under bot_peers and the key to .env (0600), keeping comments and other lines", async () => {
    const home = newHome();
    writeFileSync(
      join(home, "config.yaml"),
      "# my gateway\nmodel: gpt-4o-mini # the usual\nbot_peers:\n  # the old box\n  old: {url: grpc://10.0.0.9:7440}\n",
    );
    writeFileSync(join(home, ".env"), "# secrets\nOPENAI_API_KEY=sk-keep-me\nexport HERMES_PEER_MY_VPS_KEY=stale\n", { mode: 0o644 });
    const r = await hermes(
      ["peer", "add", "my-vps", "--url", "grpc://203.0.113.5:7440", "--key", "s3cret-key-for-vps", "--note", "the VPS"],
      { home },
    );
    expect(r, r.stderr).toMatchObject({ code: 0 });
    expect(r.stdout).toContain("added peer my-vps (grpc://203.0.113.5:7440)");
    expect(r.stdout).not.toContain("s3cret");
    const config = readFileSync(join(home, "config.yaml"), "utf8");
    expect(config).toContain("# my gateway\nmodel: gpt-4o-mini # the usual\n");
    expect(config).toContain("# the old box");
    expect(config).toMatch(/my-vps:\n\s+url: grpc:\/\/203\.0\.113\.5:7440\n\s+note: the VPS/);
    expect(config).not.toContain("s3cret");
    const env = readFileSync(join(home, ".env"), "utf8");
    expect(env).toBe("# secrets\nOPENAI_API_KEY=sk-keep-me\nHERMES_PEER_MY_VPS_KEY=s3cret-key-for-vps\n");
    expect(statSync(join(home, ".env")).mode & 0o777).toBe(0o600);

    const list = await hermes(["--json", "peer", "list"], { home });
    expect(list.code).toBe(0);
    expect(json(list)).toEqual({
      peers: [
        {
          name: "my-vps",
          kind: "gateway",
          url: "grpc://203.0.113.5:7440",
          note: "the VPS",
          key_variable: "HERMES_PEER_MY_VPS_KEY",
          key_set: true,
        },
        { name: "old", kind: "gateway", url: "grpc://10.0.0.9:7440", note: null, key_variable: "HERMES_PEER_OLD_KEY", key_set: false },
      ],
    });
    const human = await hermes(["peer", "list"], { home });
    expect(human.stdout).toMatch(/my-vps\s+gateway\s+grpc:\/\/203\.0\.113\.5:7440\s+HERMES_PEER_MY_VPS_KEY \(set\)\s+the VPS/);
    expect(human.stdout).toMatch(/old\s+gateway\s+grpc:\/\/10\.0\.0\.9:7440\s+HERMES_PEER_OLD_KEY \(missing\)/);
    for (const out of [list.stdout, human.stdout]) expect(out).not.toContain("s3cret");

    // Adding again updates it (a new key, a new url).
    const again = await hermes(["peer", "add", "my-vps", "--url", "grpcs://vps.example.com:443", "--key", "rotated-key-000000"], { home });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("updated peer my-vps");
    expect(readFileSync(join(home, ".env"), "utf8")).toBe(
      "# secrets\nOPENAI_API_KEY=sk-keep-me\nHERMES_PEER_MY_VPS_KEY=rotated-key-000000\n",
    );

    const removed = await hermes(["peer", "remove", "my-vps"], { home });
    expect(removed.code).toBe(0);
    expect(removed.stdout).toContain("removed peer my-vps and HERMES_PEER_MY_VPS_KEY");
    expect(readFileSync(join(home, ".env"), "utf8")).toBe("# secrets\nOPENAI_API_KEY=sk-keep-me\n");
    const after = readFileSync(join(home, "config.yaml"), "utf8");
    expect(after).not.toContain("my-vps");
    expect(after).toContain("# the old box");
    expect(after).toContain("model: gpt-4o-mini # the usual");
  });

  it("refuses bad usage with exit 2 and an unknown peer with exit 1, changing nothing", async () => {
    const home = newHome();
    const cases: [string[], RegExp, Record<string, string>?][] = [
      [["peer", "add", "My VPS", "--url", "grpc://h:1", "--key", "k"], new RegExp(NAME_RULE.replace(/[\^$[\]{}()|+?*.\\]/g, "\\$&"))],
      [["peer", "add", "vps", "--url", "http://h:1", "--key", "k"], /expected grpc:\/\/HOST:PORT/],
      [["peer", "add", "vps", "--url", "grpc://h:1"], /a key is required/],
      // HERMES_KEY is the key for --gateway, never a peer's key.
      [["peer", "add", "vps", "--url", "grpc://h:1"], /a key is required/, { HERMES_KEY: "from-the-env" }],
      [["peer", "add", "vps", "--url", "grpc://h:1", "--key", "has space but long enough"], /contains whitespace/],
      // The one key rule of API_SERVER_KEY and gateway.api_key.
      [["peer", "add", "vps", "--url", "grpc://h:1", "--key", "short"], /is 5 characters long; at least 16/],
      [["peer", "add", "vps"], /name the peer's URL once/],
      [["peer", "dm", "Bad/bob"], /invalid peer name/],
    ];
    for (const [args, message, env] of cases) {
      const r = await hermes(args, { home, ...(env ? { env } : {}) });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
    expect(existsSync(join(home, ".env"))).toBe(false);
    expect(existsSync(join(home, "config.yaml"))).toBe(false);

    const unknown = await hermes(["peer", "remove", "ghost"], { home });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no peer called ghost");

    // a-b and a_b would share one key variable.
    expect((await hermes(["peer", "add", "a-b", "--url", "grpc://h:1", "--key", "key-one-0123456789"], { home })).code).toBe(0);
    const clash = await hermes(["--json", "peer", "add", "a_b", "--url", "grpc://h:2", "--key", "key-two-0123456789"], { home });
    expect(clash.code).toBe(2);
    expect(JSON.parse(clash.stderr).error).toMatchObject({ reason: "already_exists", data: { key_variable: "HERMES_PEER_A_B_KEY" } });
  });
});

describe("peer dm, run, status, stop against a second gateway", () => {
  beforeAll(async () => {
    const added = await onA(["peer", "add", "b", "--url", `grpc://${b.grpc}`, "--key", PEER_KEY]);
    expect(added.code, added.stderr).toBe(0);
    for (const [name, url, key] of [
      ["bwrong", `grpc://${b.grpc}`, "definitely-not-b-key"],
      ["dead", "grpc://127.0.0.1:1", "whatever-key-000"],
    ] as const) {
      expect((await onA(["peer", "add", name, "--url", url, "--key", key])).code).toBe(0);
    }
    // A peer whose key was never set.
    const config = readFileSync(join(homeA, "config.yaml"), "utf8");
    writeFileSync(join(homeA, "config.yaml"), `${config}`.replace("bot_peers:\n", `bot_peers:\n  nokey:\n    url: grpc://${b.grpc}\n`));
  });

  it("dm prints the reply of one turn in the peer bot's Bot Chat; the message is read verbatim from stdin", async () => {
    const text = 'please review `make deploy` && $(rm -rf ~) "quoted"\n';
    const r = await dmFromA(["peer", "dm", "b/bob"], text);
    expect(r, r.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(r.stdout).toMatch(/^Hi default, bob \(Remote reviewer\) here\./);
    const db = new Database(join(homeB, "profiles", "bob", "state.db"), { readonly: true });
    try {
      const users = db.prepare("SELECT content FROM messages WHERE role = 'user' ORDER BY seq").all() as { content: string }[];
      expect(users.at(-1)!.content).toBe(`Message from 🤖 default (@default@${a.id}): ${text}`);
    } finally {
      db.close();
    }
    const asJson = await dmFromA(["--json", "peer", "dm", "b"], "hello default bot");
    expect(asJson.code).toBe(0);
    expect(json(asJson)).toMatchObject({ status: "completed", kind: "dm", profile: "default", from: `default@${a.id}`, replayed: false });
  });

  it("dm exit codes: 1 for peer/transport errors (a peer refusing our key too), 2 for refusals and usage errors", async () => {
    const cases: [string[], string, number, RegExp][] = [
      [["peer", "dm", "ghost"], "hi", 1, /unknown peer ghost: register it with hermes peer add ghost/],
      [["peer", "dm", "nokey/bob"], "hi", 1, /no key for peer nokey: set HERMES_PEER_NOKEY_KEY/],
      [["peer", "dm", "dead/bob"], "hi", 1, /^hermes: cannot reach peer dead \(grpc:\/\/127\.0\.0\.1:1\): connection refused\n$/],
      // The command was right; the key stored for the peer is not: a peer failure, like a missing key.
      [["peer", "dm", "bwrong/bob"], "hi", 1, /peer bwrong .* refused our key \(HERMES_PEER_BWRONG_KEY\)/],
      [["peer", "dm", "b/zed"], "hi", 2, /no bot called "zed" on this gateway; it has: default, bob/],
      [["peer", "dm", "b/bob"], "  \n", 2, /the message on stdin is empty/],
      [["peer", "dm", "b/bob/x"], "hi", 2, /invalid profile name/],
      [["-p", "nobody", "peer", "dm", "b/bob"], "hi", 1, /no profile nobody/],
    ];
    for (const [args, stdin, code, message] of cases) {
      const r = await dmFromA(args, stdin);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(code);
      expect(r.stderr).toMatch(message);
      // One line saying what failed and what to do, without grpc-js's wording.
      expect(r.stderr.trimEnd().split("\n"), r.stderr).toHaveLength(1);
      expect(r.stderr).not.toMatch(/Resolution note|No connection established|Last error/);
      expect(r.stdout).toBe("");
    }
    const refusedJson = await dmFromA(["--json", "peer", "dm", "bwrong/bob"], "hi");
    expect(refusedJson.code).toBe(1);
    expect(JSON.parse(refusedJson.stderr).error).toMatchObject({ reason: "unauthenticated", data: { peer: "bwrong" } });
    // Nothing ran on b for the refused key.
    const db = new Database(join(homeB, "state.db"), { readonly: true });
    try {
      const inputs = (db.prepare("SELECT input FROM peer_runs").all() as { input: string }[]).map((x) => x.input);
      expect(inputs).not.toContain("hi");
    } finally {
      db.close();
    }
  });

  it("run prints the run id at once; status and stop follow it; an idempotency key replays (exit 0) or conflicts (exit 2)", async () => {
    const started = await dmFromA(["peer", "run", "b/bob", "--idempotency-key", "ticket-9"], "triage ticket 9");
    expect(started, started.stderr).toMatchObject({ code: 0, stderr: "" });
    const runId = started.stdout.trim();
    expect(runId).toMatch(/^run_[0-9a-f]{24}$/);

    const status = await onA(["--json", "peer", "status", "b", runId, "--wait", "10"]);
    expect(status.code).toBe(0);
    expect(json(status)).toMatchObject({ run_id: runId, status: "completed", kind: "run", idempotency_key: "ticket-9", reason: null });
    const human = await onA(["peer", "status", "b", runId]);
    expect(human.stdout).toMatch(/status:\s+completed/);
    expect(human.stdout).toContain("triage ticket 9");

    const replay = await dmFromA(["peer", "run", "b/bob", "--idempotency-key", "ticket-9"], "triage ticket 9");
    expect(replay.code).toBe(0);
    expect(replay.stdout.trim()).toBe(runId);
    expect(replay.stderr).toContain(`replayed: key "ticket-9" already started run ${runId}`);
    const conflict = await dmFromA(["--json", "peer", "run", "b/bob", "--idempotency-key", "ticket-9"], "something else");
    expect(conflict.code).toBe(2);
    expect(JSON.parse(conflict.stderr).error).toMatchObject({ reason: "idempotency_conflict", data: { run_id: runId } });

    const stopped = await onA(["--json", "peer", "stop", "b", runId]);
    expect(stopped.code).toBe(0);
    expect(json(stopped)).toMatchObject({ run_id: runId, status: "completed" });
    const missing = await onA(["peer", "status", "b", "run_000000000000000000000000"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no run run_000000000000000000000000");
  });

  it("gateway status lists the peers with their URLs", async () => {
    const r = await onA(["--json", "gateway", "status"]);
    expect(r.code).toBe(0);
    expect(json<{ peers: { name: string; url: string }[] }>(r).peers).toEqual(
      expect.arrayContaining([
        { name: "b", url: `grpc://${b.grpc}` },
        { name: "dead", url: "grpc://127.0.0.1:1" },
      ]),
    );
    const human = await onA(["gateway", "status"]);
    expect(human.stdout).toContain(`b (grpc://${b.grpc})`);
  });
});
