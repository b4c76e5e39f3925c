// Replication catch-up between three gateway containers: gw-b pulls a room of hundreds of events
// from its authority gw-a with `hermes groups replicate --follow` and then follows the live tail;
// gw-c follows too, is cut off from gw-a while writes go on, and catches up by itself after the
// heal. Every acknowledged send ends up on all three, in the same order, with the same hashes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, type GatewayNode, Ledger, observed, RoomsClient, sendMany, startWriter, useMesh } from "../harness/index.js";

const ROOM = "ops";
// Followers retry a lost authority with back-off; keep its ceiling short so the heal is seen fast.
const CONFIG = "rooms:\n  follow_max_backoff_seconds: 2\n";

describe("scenario: replication catch-up between three gateways", () => {
  const mesh = useMesh("catch-up");
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
    [ra, rb, rc] = [a, b, c].map((gw) => RoomsClient.of(gw)) as [RoomsClient, RoomsClient, RoomsClient];
  });

  afterAll(() => {
    for (const r of [ra, rb, rc]) r?.close();
  });

  const replicate = (gw: GatewayNode, from: GatewayNode) =>
    gw.hermesJson<{ stored_seq: number; caught_up: boolean; following: boolean; authority: { gateway_id: string; epoch: number } }>([
      "groups",
      "replicate",
      ROOM,
      "--from",
      from.grpcUrl,
      "--from-key",
      mesh.apiKey,
      "--follow",
    ]);

  it("catches up, follows the live tail, and resumes after a partition with nothing lost", async () => {
    const ledger = new Ledger("catch-up");
    await ra.create(ROOM, "Ops", ["alice", "bob"]);
    await sendMany(ledger, ra, ROOM, "before", 600);
    const head = (await ra.state(ROOM)).latest_seq;
    expect(head).toBe(601); // room.created + 600 messages

    // gw-b: one command pulls everything there is, then keeps following.
    const t0 = Date.now();
    const pulled = await replicate(b, a);
    console.log(`[catch-up] gw-b pulled ${pulled.stored_seq} events in ${Date.now() - t0} ms (CLI in the container, included)`);
    expect(pulled).toMatchObject({ stored_seq: head, caught_up: true, following: true, authority: { gateway_id: "gw-a", epoch: 1 } });
    expect(await replicate(c, a)).toMatchObject({ stored_seq: head, caught_up: true, following: true });

    // Writes go on; gw-c loses gw-a (both stay up and reachable from here).
    const writer = startWriter(ledger, ra, ROOM, "during", { concurrency: 4, pauseMs: 5 });
    await eventually(async () => (await rb.replicaState(ROOM)).last_seq > head + 50, { what: "gw-b to follow the live tail" });
    // A silent partition (packets dropped, no resets): gw-c's stream just stops delivering. Its
    // keepalive (30 s + 10 s) would declare it dead later; the heal comes before that, so this is
    // the "long pause" case: TCP retransmits resume the same stream, or the follower reconnects.
    const heal = await mesh.cut(a, c);
    const cutAt = (await rc.replicaState(ROOM)).last_seq;
    await eventually(async () => (await ra.state(ROOM)).latest_seq > cutAt + 300, { what: "gw-a to move well past gw-c" });
    const stalledAt = (await rc.replicaState(ROOM)).last_seq;
    expect(stalledAt).toBeLessThan((await ra.state(ROOM)).latest_seq - 250);
    await heal();
    await writer.stop();
    const final = (await ra.state(ROOM)).latest_seq;

    // gw-c's follower reconnects by itself and catches up; gw-b never stopped.
    const t1 = Date.now();
    await eventually(
      async () => {
        const s = await rc.replicaState(ROOM);
        return s.last_seq === final && s.following?.state === "following";
      },
      { what: "gw-c to catch up after the heal", timeoutMs: 30_000 },
    );
    console.log(`[catch-up] gw-c caught up ${final - stalledAt} events ${Date.now() - t1} ms after the heal`);
    await eventually(async () => (await rb.replicaState(ROOM)).last_seq === final, { what: "gw-b to hold the head" });

    // Same log everywhere: order and hashes.
    const [logA, logB, logC] = await Promise.all([ra.fullLog(ROOM), rb.fullLog(ROOM), rc.fullLog(ROOM)]);
    expect(logA).toHaveLength(final);
    expect(logB.map((e) => e.hash)).toEqual(logA.map((e) => e.hash));
    expect(logC.map((e) => e.hash)).toEqual(logA.map((e) => e.hash));
    for (const [name, log] of [
      ["gw-b", logB],
      ["gw-c", logC],
    ] as const) {
      const v = ledger.verify({ main: observed(log, name) });
      expect(v.lost, `${name} misses acknowledged sends`).toEqual([]);
    }
    const verdict = ledger.verify({ main: observed(logA, "gw-a") });
    ledger.assertClean(verdict);
    expect(verdict.preserved).toBe(0);
    expect(verdict.acknowledged).toBeGreaterThan(900);

    // What an operator sees on the replica that was cut off.
    const shown = await c.hermes(["groups", "replica-state", ROOM]);
    expect(shown.exitCode).toBe(0);
    expect(shown.stdout).toMatch(/caught up\s+yes/);
    expect(shown.stdout).toMatch(/safety\s+passive/);
    expect(shown.stdout).toMatch(/following\s+following from grpc:\/\/gw-a:7440/);
  });
});
