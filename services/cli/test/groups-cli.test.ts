import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import { assertBuilt, type GatewayProcess, hermes, removeHome, startGatewayProcess, TEST_KEY, tempHome } from "./support/cli-harness.js";

/**
 * `hermes groups …` against two gateway processes (the built CLI, as an operator runs it): the
 * planned-move runbook of docs/OPERATIONS.md step by step — create, send, replicate, promote (with
 * its refusals), demote, replicate back, divergence — with --json and exit codes 0/1/2.
 */

let homeA: string;
let homeB: string;
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  assertBuilt();
  homeA = tempHome("hcli-a-");
  homeB = tempHome("hcli-b-");
  [a, b] = await Promise.all([
    startGatewayProcess(homeA, { API_SERVER_KEY: TEST_KEY }),
    startGatewayProcess(homeB, { API_SERVER_KEY: TEST_KEY }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  for (const h of [homeA, homeB]) if (h) removeHome(h);
});

const onA = (args: string[]) => hermes(args, { home: homeA });
const onB = (args: string[]) => hermes(args, { home: homeB });
const json = <T = Record<string, unknown>>(r: { stdout: string }) => JSON.parse(r.stdout) as T;

describe("hermes groups", () => {
  it("creates a room, sends (idempotently) and reads the log", async () => {
    const created = await onA(["--json", "groups", "create", "--name", "Demo", "--members", "alice,bob", "--id", "demo"]);
    expect(created.code).toBe(0);
    expect(json(created)).toMatchObject({ room: { room_id: "demo", authority_gateway_id: a.id, authority_epoch: 1 } });

    const sent = await onA(["--json", "groups", "send", "demo", "hello", "--event-id", "e1"]);
    expect(sent.code).toBe(0);
    expect(json(sent)).toMatchObject({ accepted: true, idempotent: false, event: { seq: 2, payload: { text: "hello" } } });
    const again = await onA(["groups", "send", "demo", "hello", "--event-id", "e1"]);
    expect(again).toMatchObject({ code: 0 });
    expect(again.stdout).toMatch(/already sent: seq 2/);
    const conflict = await onA(["groups", "send", "demo", "other", "--event-id", "e1"]);
    expect(conflict.code).toBe(2);
    expect(conflict.stderr).toMatch(/e1 was already used/);

    const log = await onA(["--json", "groups", "log", "demo"]);
    expect(json<{ events: { seq: number }[] }>(log).events.map((e) => e.seq)).toEqual([1, 2]);
    const human = await onA(["groups", "log", "demo"]);
    expect(human.stdout).toMatch(/message\.user\s+user\s+hello/);
  });

  it("refuses bad usage with exit 2 and an unreachable authority with exit 1", async () => {
    const noMembers = await onA(["groups", "create", "--name", "X"]);
    expect(noMembers.code).toBe(2);
    const oneMember = await onA(["groups", "create", "--name", "X", "--members", "alice"]);
    expect(oneMember.code).toBe(2);
    expect(oneMember.stderr).toMatch(/2–6 members/);
    // An empty message is the user's text, not an API field: said in the CLI's words.
    const empty = await onA(["groups", "send", "demo", ""]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/the message is empty; give the text to send/);
    expect(empty.stderr).not.toMatch(/payload/);
    // So is one that is too long (counted in UTF-8 bytes: 40,000 "é" are 80,000).
    const long = await onA(["groups", "send", "demo", "é".repeat(40_000)]);
    expect(long.code).toBe(2);
    expect(long.stderr).toMatch(/the message is 80000 bytes of UTF-8; a room message holds at most 65536 \(64 KiB\)\. Split it/);
    expect(long.stderr).not.toMatch(/payload/);
    const unreachable = await onB(["groups", "replicate", "demo", "--from", "grpc://127.0.0.1:1", "--from-key", TEST_KEY]);
    expect(unreachable.code).toBe(1);
    const missing = await onB(["groups", "state", "nope"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no room nope/);
  });

  it("runs the planned authority move of OPERATIONS.md", async () => {
    // 1. Replicate onto b and check coverage.
    const replicated = await onB(["--json", "groups", "replicate", "demo", "--from", `grpc://${a.grpc}`, "--from-key", TEST_KEY]);
    expect(replicated.code).toBe(0);
    expect(json(replicated)).toMatchObject({ stored_seq: 2, caught_up: true, authority: { gateway_id: a.id, epoch: 1 } });
    const state = await onB(["--json", "groups", "replica-state", "demo"]);
    expect(json(state)).toMatchObject({ last_seq: 2, latest_seq: 2, caught_up: true, role: "replica", safety_status: "passive" });

    // 2. Promote: refused without --confirm (exit 2); the checklist is printed first.
    const unconfirmed = await onB(["groups", "promote", "demo"]);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toMatch(/Fencing checklist/);
    expect(unconfirmed.stderr).toMatch(/confirm=true/);
    const promoted = await onB(["--json", "groups", "promote", "demo", "--confirm", "--reason", "planned-handover"]);
    expect(promoted.code).toBe(0);
    expect(json(promoted)).toMatchObject({
      authority_gateway_id: b.id,
      authority_epoch: 2,
      previous_gateway_id: a.id,
      previous_epoch: 1,
      claim_seq: 3,
      checklist: expect.arrayContaining([expect.stringMatching(/cannot commit/)]),
    });

    // 3. The old authority has been told (fence notice) and refuses sends; demote it.
    let attempt = 0;
    const refused = await eventually(
      async () => {
        const r = await onA(["groups", "send", "demo", "late", "--event-id", `late-${attempt++}`]);
        expect(r.code).toBe(2);
        return r;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: "gw-a to refuse sends once it knows of the promote" },
    );
    expect(refused.stderr).toMatch(/fenced/);
    const regression = await onA(["groups", "demote", "demo", "--observed-gateway", b.id, "--observed-epoch", "1"]);
    expect(regression.code).toBe(2);
    const demoted = await onA(["--json", "groups", "demote", "demo", "--observed-gateway", b.id, "--observed-epoch", "2"]);
    expect(json(demoted)).toMatchObject({ authority_gateway_id: b.id, authority_epoch: 2, idempotent: false });

    // Promoting the demoted gateway back is refused until it caught up (or --allow-incomplete).
    const incomplete = await onA(["groups", "promote", "demo", "--confirm"]);
    expect(incomplete.code).toBe(2);
    expect(incomplete.stderr).toMatch(/not caught up/);

    // 4. The old authority replicates from the new one: its log simply continues, nothing is off
    // the winning lineage, and the demotion is an audit record in its replica state.
    await onB(["groups", "send", "demo", "after the move", "--event-id", "e2"]);
    const back = await onA(["--json", "groups", "replicate", "demo", "--from", `grpc://${b.grpc}`, "--from-key", TEST_KEY]);
    expect(json(back)).toMatchObject({ stored_seq: 4, caught_up: true, divergences: [] });
    const [stateA, stateB] = await Promise.all([onA(["--json", "groups", "state", "demo"]), onB(["--json", "groups", "state", "demo"])]);
    for (const s of [stateA, stateB])
      expect(json(s)).toMatchObject({ room: { authority_gateway_id: b.id, authority_epoch: 2, latest_seq: 4, safety_status: "passive" } });
    expect(json(stateA)).toMatchObject({ room: { demoted: { previous_gateway_id: a.id, authority_gateway_id: b.id, last_seq: 2 } } });
    expect(json(stateB)).toMatchObject({ room: { demoted: null } });
    const replicaA = await onA(["groups", "replica-state", "demo"]);
    expect(replicaA.stdout).toMatch(/safety\s+passive/);
    expect(replicaA.stdout).toContain(`demoted here`);
    expect(replicaA.stdout).toContain(`${a.id}@1 → ${b.id}@2`);

    // No branch to show, export or repost.
    const exportFile = join(homeA, "branches.json");
    const divergence = await onA(["--json", "groups", "divergence", "demo", "--export", exportFile]);
    expect(json(divergence)).toMatchObject({ branches: [] });
    expect(JSON.parse(readFileSync(exportFile, "utf8"))).toMatchObject({ room_id: "demo", branches: [] });
    expect((await onA(["groups", "divergence", "demo"])).stdout).toMatch(/no divergent branches preserved/);
    const repost = await onA(["groups", "divergence", "demo", "--repost", "3"]);
    expect(repost.code).not.toBe(0);

    const list = await onB(["--json", "groups", "list"]);
    expect(json<{ rooms: { room_id: string; role: string }[] }>(list).rooms).toMatchObject([{ room_id: "demo", role: "authority" }]);
  }, 60_000);
});
