// `kill -9` of a gateway container in the middle of a stream of appends, then a restart on the
// same volume: every acknowledged event is present after the restart with the seq and epoch its
// ack named, the log is dense and hash-chained (its replica, which kept following, agrees byte for
// byte), and the sends that were in flight resolve by their idempotency keys — once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertDense, eventually, type GatewayNode, Ledger, observed, RoomsClient, startWriter, useMesh } from "../harness/index.js";

const ROOM = "journal";
const CONFIG = "rooms:\n  follow_max_backoff_seconds: 2\n";

describe("scenario: kill -9 of a gateway during appends", () => {
  const mesh = useMesh("kill-appends");
  let a: GatewayNode;
  let b: GatewayNode;
  let ra: RoomsClient;
  let rb: RoomsClient;

  beforeAll(async () => {
    const lan = await mesh.network("lan");
    [a, b] = await Promise.all([
      mesh.gateway({ name: "gw-a", networks: [lan], config: CONFIG }),
      mesh.gateway({ name: "gw-b", networks: [lan], config: CONFIG }),
    ]);
    ra = RoomsClient.of(a);
    rb = RoomsClient.of(b);
  });

  afterAll(() => {
    ra?.close();
    rb?.close();
  });

  it("keeps every acknowledged event across the crash", async () => {
    const ledger = new Ledger("kill-appends");
    await ra.create(ROOM, "Journal", ["alice", "bob"]);
    const followed = await b.hermes(["groups", "replicate", ROOM, "--from", a.grpcUrl, "--from-key", mesh.apiKey, "--follow"]);
    expect(followed.exitCode).toBe(0);

    // Eight concurrent clients; the crash lands in the middle of their group commits.
    const writer = startWriter(ledger, ra, ROOM, "w", { concurrency: 8 });
    await eventually(() => ledger.all.filter((r) => r.outcome === "acked").length >= 400, { what: "appends to flow" });
    const ackedBeforeCrash = ledger.all.filter((r) => r.outcome === "acked").length;
    await a.crash();
    const crashedAt = Date.now();
    await eventually(() => ledger.all.some((r) => r.startedAt > crashedAt && r.outcome), { what: "the clients to see the gateway gone" });
    await a.restart();
    console.log(`[kill-appends] gw-a back ${Date.now() - crashedAt} ms after kill -9 (container start ${a.startDurationsMs.at(-1)} ms)`);
    const ackedAfterRestart = ledger.all.filter((r) => r.outcome === "acked").length;
    await eventually(() => ledger.all.filter((r) => r.outcome === "acked").length >= ackedAfterRestart + 200, {
      what: "appends to flow again",
    });
    await writer.stop();

    // Every acknowledged send is there, where its ack said, once; the log is dense.
    const logA = await ra.fullLog(ROOM);
    assertDense(logA, "gw-a after restart");
    const verdict = ledger.verify({ main: observed(logA, "gw-a") });
    ledger.assertClean(verdict);
    const bySeq = new Map(logA.map((e) => [e.seq, e]));
    for (const r of ledger.all.filter((x) => x.outcome === "acked")) {
      expect(bySeq.get(r.ack!.seq)?.event_id, `ack of ${r.eventId}`).toBe(r.eventId);
    }
    expect(ackedBeforeCrash).toBeGreaterThanOrEqual(400);
    expect(verdict.indeterminate).toBeGreaterThan(0); // the crash did cut sends in flight

    // In-flight sends resolve by idempotency key: landed ones answer "idempotent", the others append once.
    const inFlight = ledger.all.filter((r) => r.outcome === "indeterminate");
    const cutByCrash = inFlight.filter((r) => r.startedAt < crashedAt).length;
    let landed = 0;
    for (const r of inFlight) {
      const again = await ra.send(ROOM, r.eventId, `message ${r.eventId}`);
      if (again.idempotent) landed++;
    }
    const afterResend = await ra.fullLog(ROOM);
    assertDense(afterResend, "gw-a after the re-sends");
    const ids = afterResend.map((e) => e.event_id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const r of inFlight) expect(ids).toContain(r.eventId);
    console.log(
      `[kill-appends] ${inFlight.length} sends without an answer (${cutByCrash} in flight at the kill, the rest refused connections while it restarted): ${landed} had landed, ${inFlight.length - landed} appended on re-send`,
    );

    // The replica reconnected to the restarted gateway and holds the same chain.
    const head = afterResend.length;
    await eventually(async () => (await rb.replicaState(ROOM)).last_seq === head, {
      what: "gw-b to catch up with the restarted gw-a",
      timeoutMs: 30_000,
    });
    const logB = await rb.fullLog(ROOM);
    expect(logB.map((e) => e.hash)).toEqual(afterResend.map((e) => e.hash));
    expect((await rb.replicaState(ROOM)).safety_status).toBe("passive");
  });
});
