// Rooms that survive a dead machine: three gateways of one coordinated mesh on a 3-member etcd
// cluster (all in containers), a quorum room per scenario (replicas: the two other gateways,
// min_insync 2), clients writing through the whole of each fault and following the authority.
// After each scenario everything is healed and the invariants are checked on every gateway's log
// (harness/quorum-ledger.ts): 0 acknowledged sends lost (each at the seq and epoch it was acked
// with, in the final authority's log), at most one gateway acked in any epoch, logs
// prefix-consistent (here: equal) after the heal. Each prints its ledger line.
//
// The scenarios share one mesh (set-up is most of the cost); each uses its own room, and the mesh is
// restored (cuts healed, paused nodes resumed, crashed ones restarted) after each.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  assertQuorumClean,
  describePlan,
  describeStep,
  eventually,
  type GatewayNode,
  Ledger,
  type MeshNode,
  nemesisSettings,
  planNemesis,
  QuorumMesh,
  type QuorumWriter,
  type Recovery,
  runNemesis,
  secondsToFirstAck,
  useMesh,
  verifyQuorum,
} from "../harness/index.js";

const TTL_SECONDS = 3;
const WRITERS = 4;
/** The nemesis run's length unless HERMES_NEMESIS_SECONDS says otherwise (longer runs by hand). */
const NEMESIS_SECONDS = 30;

describe("scenario: quorum rooms fail over by themselves and lose no acknowledged send", () => {
  const mesh = useMesh("quorum");
  let qm: QuorumMesh;

  beforeAll(async () => {
    qm = await QuorumMesh.start(mesh, { ttlSeconds: TTL_SECONDS });
  });
  afterEach(async () => {
    await qm.restoreAll();
  });
  afterAll(() => qm?.close());

  /** The scenario's room, with clients writing to it until the returned writer is stopped. */
  async function writing(room: string, creator: GatewayNode, ledger: Ledger): Promise<{ writer: QuorumWriter; epoch: number }> {
    await qm.createRoom(room, creator);
    const writer = qm.writer(ledger, room, "w", { concurrency: WRITERS });
    await eventually(() => acked(ledger) >= 100, { what: "sends to be acknowledged", timeoutMs: 30_000 });
    return { writer, epoch: (await qm.record(room)).epoch };
  }

  const acked = (ledger: Ledger, filter: (r: (typeof ledger.all)[number]) => boolean = () => true) =>
    ledger.all.filter((r) => r.outcome === "acked" && filter(r)).length;

  /** Waits for `n` more acks, stops the writers, heals everything, converges and checks the ledger. */
  async function finish(
    room: string,
    ledger: Ledger,
    writer: QuorumWriter,
    recovery: (final: { authority: string; epoch: number }) => Recovery,
    moreAcks = 50,
  ) {
    const before = acked(ledger);
    await eventually(() => acked(ledger) >= before + moreAcks, { what: `${moreAcks} more acks`, timeoutMs: 60_000 });
    await writer.stop();
    await qm.restoreAll();
    const final = await qm.converge(room);
    const verdict = verifyQuorum(ledger, await qm.observe(room, final.authority));
    console.log(`[quorum ${room}] failures seen by clients: ${[...writer.reasons()].map(([r, n]) => `${r} ×${n}`).join(", ") || "none"}`);
    assertQuorumClean(room, verdict, recovery(final));
    return { final, verdict };
  }

  it("kill -9 of the authority under load: an in-sync replica claims the room, the old one follows when back", async () => {
    const room = "kill";
    const ledger = new Ledger(room);
    const authority = qm.gateway("gw-a");
    const { writer, epoch } = await writing(room, authority, ledger);
    const killedAt = Date.now();
    await authority.crash();
    await eventually(() => secondsToFirstAck(ledger, killedAt, { room, aboveEpoch: epoch }) !== null, {
      what: "a send acknowledged at a newer epoch",
      timeoutMs: 60_000,
    });
    const record = await qm.record(room);
    expect(record.gateway_id).not.toBe("gw-a");
    expect(record.epoch).toBeGreaterThan(epoch);
    const { final } = await finish(room, ledger, writer, () => ({
      failoverSeconds: secondsToFirstAck(ledger, killedAt, { room, aboveEpoch: epoch }),
    }));
    expect(final.authority).not.toBe("gw-a");
    const claims = (await qm.rooms(final.authority).fullLog(room)).filter((e) => e.kind === "authority.claimed");
    expect(claims.map((e) => JSON.parse(e.payload_json).reason)).toContain("lease-expired");
  });

  it("the authority cut from etcd only: it fences itself, a replica claims the room, nothing it acked is lost", async () => {
    const room = "etcd-cut";
    const ledger = new Ledger(room);
    const authority = qm.gateway("gw-b");
    const { writer, epoch } = await writing(room, authority, ledger);
    const cutAt = Date.now();
    await qm.cut(authority, qm.etcd.members);
    await eventually(() => secondsToFirstAck(ledger, cutAt, { room, aboveEpoch: epoch }) !== null, {
      what: "a send acknowledged at a newer epoch",
      timeoutMs: 60_000,
    });
    expect((await qm.record(room)).gateway_id).not.toBe("gw-b");
    // The cut-off authority still answers its clients, and refuses them: it has no lease.
    await eventually(() => ledger.all.some((r) => r.via === "gw-b" && r.outcome !== "acked" && r.startedAt > cutAt), {
      what: "gw-b to refuse sends",
    });
    const { final } = await finish(room, ledger, writer, () => ({
      failoverSeconds: secondsToFirstAck(ledger, cutAt, { room, aboveEpoch: epoch }),
    }));
    expect(final.authority).not.toBe("gw-b");
  });

  it("the authority cut from its replicas only: the ISR shrinks, then sends are refused not_enough_replicas; heal grows it back", async () => {
    const room = "replica-cut";
    const ledger = new Ledger(room);
    const authority = qm.gateway("gw-c");
    const { writer, epoch } = await writing(room, authority, ledger);
    const cutAt = Date.now();
    const heal = await qm.cut(authority, qm.others(authority));
    await eventually(async () => (await qm.record(room)).isr.join(",") === "gw-c", {
      what: "the ISR to shrink to the authority alone",
      timeoutMs: 60_000,
    });
    const shrunkAt = Date.now();
    await eventually(() => (writer.reasons().get("not_enough_replicas") ?? 0) >= 3, {
      what: "sends refused not_enough_replicas",
      timeoutMs: 30_000,
    });
    const ackedDuringCut = acked(ledger);
    // No failover: gw-c keeps its lease (it reaches etcd), and the replicas are not in sync to claim.
    expect((await qm.record(room)).gateway_id).toBe("gw-c");
    const healedAt = Date.now();
    await heal();
    await qm.waitIsr(room, 3);
    const { final } = await finish(room, ledger, writer, () => ({
      noFailover: `gw-c kept its lease; ISR 3 → 1 recorded ${((shrunkAt - cutAt) / 1000).toFixed(1)} s after the cut; sends accepted again ${secondsToFirstAck(ledger, healedAt, { room })?.toFixed(1)} s after the heal`,
    }));
    expect(final.authority).toBe("gw-c");
    expect(final.epoch).toBe(epoch);
    expect(acked(ledger)).toBeGreaterThan(ackedDuringCut);
  });

  it("SIGSTOP of the authority for 2 × TTL, then SIGCONT: a replica claims the room; the resumed one acks nothing and demotes itself (an unacknowledged suffix goes aside)", async () => {
    const room = "sigstop";
    const ledger = new Ledger(room);
    const authority = qm.gateway("gw-a");
    const { writer, epoch } = await writing(room, authority, ledger);
    const pausedAt = Date.now();
    await authority.pause();
    await eventually(() => secondsToFirstAck(ledger, pausedAt, { room, aboveEpoch: epoch }) !== null, {
      what: "a send acknowledged at a newer epoch",
      timeoutMs: 60_000,
    });
    // The fault lasts 2 × TTL however fast the failover was.
    await new Promise((r) => setTimeout(r, Math.max(0, pausedAt + 2 * TTL_SECONDS * 1000 - Date.now())));
    const resumedAt = Date.now();
    await authority.resume();
    await eventually(async () => (await qm.rooms("gw-a").state(room)).role === "replica", {
      what: "gw-a to demote itself",
      timeoutMs: 30_000,
    });
    // A send made to gw-a after it resumed is never acknowledged by it: its lease ran out while it was frozen.
    expect(ledger.all.filter((r) => r.via === "gw-a" && r.outcome === "acked" && r.startedAt > resumedAt)).toEqual([]);
    await finish(room, ledger, writer, () => ({ failoverSeconds: secondsToFirstAck(ledger, pausedAt, { room, aboveEpoch: epoch }) }));
  });

  it("etcd majority lost and back: quorum sends are refused while it is gone, nothing acknowledged is lost, sends resume by themselves", async () => {
    const room = "etcd-majority";
    const ledger = new Ledger(room);
    const { writer, epoch } = await writing(room, qm.gateway("gw-b"), ledger);
    const majority = qm.etcd.majority();
    const lostAt = Date.now();
    for (const m of majority) await m.crash();
    // The majority is gone once the last of these kills is done (a crash also waits for the
    // container's removal, which takes a second on a busy machine; until the second kill the
    // two members left still renew leases). Every lease runs out by its holder's clock within one
    // TTL of its last renewal; from then on nothing is acknowledged.
    const majorityGoneAt = Date.now();
    const fencedBy = majorityGoneAt + TTL_SECONDS * 1000;
    await eventually(() => ledger.all.some((r) => r.outcome !== "acked" && r.startedAt > fencedBy + 1_000), {
      what: "sends refused after the leases ran out",
      timeoutMs: 30_000,
    });
    const backAt = Date.now();
    await Promise.all(majority.map((m) => m.restart()));
    await qm.etcd.waitHealthy();
    // Sends started once every lease had run out and settled before etcd was back: none acked.
    const whileGone = ledger.all.filter((r) => r.startedAt > fencedBy + 500 && (r.settledAt ?? Number.POSITIVE_INFINITY) < backAt);
    expect(whileGone.length).toBeGreaterThan(0);
    expect(whileGone.filter((r) => r.outcome === "acked")).toEqual([]);
    await eventually(() => secondsToFirstAck(ledger, backAt, { room }) !== null, { what: "sends acknowledged again", timeoutMs: 60_000 });
    const { final } = await finish(room, ledger, writer, (end) =>
      end.epoch > epoch
        ? { failoverSeconds: secondsToFirstAck(ledger, backAt, { room }) }
        : {
            noFailover: `etcd down ${((backAt - lostAt) / 1000).toFixed(1)} s; sends accepted again ${secondsToFirstAck(ledger, backAt, { room })?.toFixed(1)} s after it was back`,
          },
    );
    console.log(
      `[quorum ${room}] majority killed in ${((majorityGoneAt - lostAt) / 1000).toFixed(1)} s; epoch before ${epoch}, after ${final.epoch} (authority ${final.authority})`,
    );
  });

  it("nemesis: random kills, pauses and partitions of gateways and etcd members for a bounded time (seed printed, replayable)", async () => {
    const { seed, seconds, replayed } = nemesisSettings(process.env, NEMESIS_SECONDS);
    const plan = planNemesis({ seed, seconds, gateways: qm.gateways.map((g) => g.name), etcd: qm.etcd.members.map((m) => m.name) });
    console.log(`[quorum nemesis] ${describePlan(plan)}${replayed ? " (replayed from HERMES_NEMESIS_SEED)" : ""}`);
    const room = "nemesis";
    const ledger = new Ledger(room);
    const { writer } = await writing(room, qm.gateway("gw-c"), ledger);
    const nodes = new Map<string, MeshNode>([...qm.gateways, ...qm.etcd.members].map((n) => [n.name, n]));
    const applied = await runNemesis(mesh, plan, nodes, {
      etcd: qm.etcd.members,
      onStep: (step) => console.log(`[quorum nemesis] seed ${seed} ${describeStep(step)}`),
    });
    const recoveries = applied.map((a) => secondsToFirstAck(ledger, a.startedAt, { room }));
    const worst = recoveries.some((r) => r === null) ? null : Math.max(0, ...(recoveries as number[]));
    const { final } = await finish(room, ledger, writer, () => ({ worstSeconds: worst, faults: applied.length }));
    console.log(`[quorum nemesis] seed ${seed}: ${applied.length} faults, final authority ${final.authority} at epoch ${final.epoch}`);
  });
});
