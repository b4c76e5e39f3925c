// Split brain on three gateway containers: the authority gw-a is partitioned from gw-b,
// the operator promotes gw-b anyway while gw-a is still writable, clients keep writing to both,
// then the partition heals. gw-a learns of the higher epoch and fences itself; the operator
// follows the split-brain runbook of docs/OPERATIONS.md with the CLI. Divergence is detected,
// both branches are preserved, no acknowledged write is lost, and gw-a's late sends are refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, type GatewayNode, Ledger, observed, RoomsClient, startWriter, useMesh } from "../harness/index.js";

const ROOM = "sb";
const CONFIG = "rooms:\n  follow_max_backoff_seconds: 2\n";

describe("scenario: split brain — promote while the old authority is partitioned, keep writing, heal", () => {
  const mesh = useMesh("split-brain");
  let a: GatewayNode;
  let b: GatewayNode;
  let c: GatewayNode;
  let ra: RoomsClient;
  let rb: RoomsClient;
  let rc: RoomsClient;

  beforeAll(async () => {
    const lan = await mesh.network("lan");
    const start = (name: string) => mesh.gateway({ name, networks: [lan], config: CONFIG });
    [a, b, c] = await Promise.all([start("gw-a"), start("gw-b"), start("gw-c")]);
    [ra, rb, rc] = [RoomsClient.of(a), RoomsClient.of(b), RoomsClient.of(c)];
  });

  afterAll(() => {
    for (const r of [ra, rb, rc]) r?.close();
  });

  const ok = async (gw: GatewayNode, args: string[]) => {
    const out = await gw.hermes(args);
    if (out.exitCode !== 0) throw new Error(`${gw.name}: hermes ${args.join(" ")} exited ${out.exitCode}\n${out.stderr}`);
    return out.stdout;
  };
  const follow = (gw: GatewayNode, from: GatewayNode) =>
    ok(gw, ["groups", "replicate", ROOM, "--from", from.grpcUrl, "--from-key", mesh.apiKey, "--follow"]);

  it("detects the divergence, preserves both branches, loses no acknowledged write and fences the old authority", async () => {
    const ledger = new Ledger("split-brain");
    await ra.create(ROOM, "Split", ["alice", "bob"]);
    await follow(b, a);
    await follow(c, a);
    const onA = startWriter(ledger, ra, ROOM, "a", { concurrency: 2, pauseMs: 5 });
    await eventually(async () => (await rb.replicaState(ROOM)).last_seq >= 100, { what: "gw-b to follow gw-a" });

    // The partition: gw-a <-/-> gw-b. gw-a stays writable for its clients (and for gw-c).
    const heal = await mesh.cut(a, b);
    const bStopped = (await rb.replicaState(ROOM)).last_seq;
    await eventually(async () => (await ra.state(ROOM)).latest_seq > bStopped + 50, { what: "gw-a to write past gw-b's copy" });

    // The operator promotes gw-b without fencing gw-a (the mistake this design survives). The
    // replica may still say "caught up" as of its last page, so this is the disaster-recovery form.
    const promoted = await ok(b, ["groups", "promote", ROOM, "--confirm", "--reason", "authority-unreachable", "--allow-incomplete"]);
    expect(promoted).toMatch(/promoted: gw-b leads sb at epoch 2 \(was gw-a@1\); authority\.claimed at seq (\d+)/);
    const claimSeq = Number(/authority\.claimed at seq (\d+)/.exec(promoted)![1]);
    expect(claimSeq).toBeGreaterThan(bStopped);
    const onB = startWriter(ledger, rb, ROOM, "b", { concurrency: 2, pauseMs: 5 });
    await eventually(
      () => {
        const ackedPastClaim = (via: string) =>
          ledger.all.filter((r) => r.via === via && r.outcome === "acked" && (r.ack?.seq ?? 0) > claimSeq).length;
        return ackedPastClaim("gw-a") >= 30 && ackedPastClaim("gw-b") >= 30;
      },
      { what: "both sides to accept writes after the claim" },
    );

    // Heal: gw-b's fence notice reaches gw-a, which refuses its clients from then on.
    await heal();
    await eventually(
      () => ledger.all.filter((r) => r.via === "gw-a" && r.outcome === "refused" && r.reason === "authority_conflict").length >= 5,
      { what: "gw-a to fence itself", timeoutMs: 60_000 },
    );
    await Promise.all([onA.stop(), onB.stop()]);
    const fencedState = await ok(a, ["groups", "state", ROOM]);
    expect(fencedState).toMatch(/fenced by\s+gw-b@2/);
    expect(fencedState).toMatch(/role here\s+authority/);
    const lateSend = await a.hermes(["--json", "groups", "send", ROOM, "still here?", "--event-id", "late-on-a"]);
    expect(lateSend.exitCode).toBe(2);
    expect(JSON.parse(lateSend.stderr)).toMatchObject({
      error: { reason: "authority_conflict", data: { authority: { gateway_id: "gw-b", epoch: 2 } } },
    });

    // Runbook, split-brain recovery. 2. Demote the losing authority and replicate it from the winner.
    await ok(a, ["groups", "demote", ROOM, "--observed-gateway", "gw-b", "--observed-epoch", "2"]);
    const healedA = await follow(a, b);
    expect(healedA).toMatch(new RegExp(`DIVERGED: (\\d+) event\\(s\\) from seq ${claimSeq} of gw-a@1 were preserved`));
    expect(healedA).toContain("see hermes groups divergence sb");
    //    The third gateway followed gw-a during the split: stop, replicate from gw-b.
    await ok(c, ["groups", "stop", ROOM]);
    await follow(c, b);

    // 3. Read and keep the branch.
    const shown = await ok(a, ["groups", "divergence", ROOM]);
    expect(shown).toMatch(/branch \d+: \d+ event\(s\) from seq \d+ of gw-a@1; gw-b@2 won/);
    await ok(a, ["groups", "divergence", ROOM, "--export", "/data/sb-branch.json"]);
    const exported = JSON.parse(await a.execOk(["cat", "/data/sb-branch.json"])) as { room_id: string; branches: unknown[] };
    expect(exported).toMatchObject({ room_id: ROOM, branches: [expect.anything()] });
    const replicaState = await a.hermesJson<{ safety_status: string }>(["groups", "replica-state", ROOM]);
    expect(replicaState.safety_status).toBe("diverged");
    const metrics = await a.httpGet("http://127.0.0.1:7441/metrics");
    expect("body" in metrics && /hermes_room_divergences_detected_total(\{[^}]*\})? 1\b/.test(metrics.body)).toBe(true);

    // The ledger: the winning log (gw-b) plus what every gateway preserved.
    const final = (await rb.state(ROOM)).latest_seq;
    await eventually(
      async () => {
        const [sa, sc] = await Promise.all([ra.replicaState(ROOM), rc.replicaState(ROOM)]);
        return sa.last_seq === final && sc.last_seq === final;
      },
      { what: "gw-a and gw-c to follow gw-b" },
    );
    const [logB, logA, logC] = await Promise.all([rb.fullLog(ROOM), ra.fullLog(ROOM), rc.fullLog(ROOM)]);
    expect(logA.map((e) => e.hash)).toEqual(logB.map((e) => e.hash));
    expect(logC.map((e) => e.hash)).toEqual(logB.map((e) => e.hash));
    const [branchesA, branchesC] = await Promise.all([ra.divergence(ROOM), rc.divergence(ROOM)]);
    const preservedA = branchesA.flatMap((br) => br.events);
    const verdict = ledger.verify({
      main: observed(logB, "gw-b"),
      divergent: [
        ...observed(preservedA, "gw-a"),
        ...observed(
          branchesC.flatMap((br) => br.events),
          "gw-c",
        ),
      ],
    });
    ledger.assertClean(verdict);
    expect(verdict.preserved).toBeGreaterThanOrEqual(30);
    expect(verdict.refused).toBeGreaterThanOrEqual(5);
    // Each acknowledged send sits where its ack said: (seq, epoch) on the winning log or in the branch.
    const where = new Map([...logB, ...preservedA].map((e) => [e.event_id, e]));
    for (const r of ledger.all.filter((x) => x.outcome === "acked")) {
      expect(where.get(r.eventId), r.eventId).toMatchObject({ seq: r.ack!.seq, epoch: r.ack!.epoch });
    }
    // gw-a's branch holds only gw-a's epoch-1 writes after the split, never gw-b's.
    expect(preservedA.filter((e) => e.kind === "message.user").every((e) => e.epoch === 1 && e.event_id.startsWith("a-"))).toBe(true);

    // 4. Repost what matters (twice: appended once), 5. clear the status.
    const picked = preservedA.filter((e) => e.kind === "message.user").slice(0, 2);
    const seqs = picked.map((e) => String(e.seq));
    expect(await ok(a, ["groups", "divergence", ROOM, "--repost", ...seqs])).toMatch(/reposted as seq \d+/);
    expect(await ok(a, ["groups", "divergence", ROOM, "--repost", ...seqs])).toMatch(/already reposted as seq \d+/);
    const reposted = (await rb.fullLog(ROOM)).slice(final);
    expect(reposted.map((e) => JSON.parse(e.payload_json).text)).toEqual(picked.map((e) => JSON.parse(e.payload_json).text));
    expect(reposted.every((e) => e.epoch === 2)).toBe(true);
    expect(await ok(a, ["groups", "release", ROOM])).toMatch(/released sb: safety is passive/);
  });
});
