import { setTimeout as delay } from "node:timers/promises";
import { HermesError } from "@hermes/common";
import type { SendReply } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type EtcdMember, startEtcd } from "../../../../test/support/etcd.js";
import { eventually } from "../../../../test/support/eventually.js";
import type { RoomEvent } from "../../src/rooms/core/index.js";
import { freshPrefix, type MeshConfig, quorumHome, removeHome } from "../support/quorum-fixtures.js";
import {
  createQuorumRoom,
  divergenceOf,
  logOf,
  type MeshProcess,
  pause,
  resume,
  resumeFollowing,
  sendTo,
  startMeshProcess,
  stateOf,
  stopFollowing,
} from "../support/quorum-processes.js";

/**
 * Quorum rooms survive a dead machine: three gateway PROCESSES of the built CLI on a real etcd,
 * one quorum room (min_insync 2 of 3), lease TTL 3 s. Each test keeps a ledger of what clients were
 * told (acknowledged sends with their seq, epoch and the gateway that acknowledged them), prints it,
 * and checks after the fault: no acknowledged send lost (each at the seq it was acknowledged with),
 * at most one gateway acknowledged in any epoch, and the logs prefix-consistent once healed.
 */

const ROOM = "qf";
const TTL_SECONDS = 3;
const IDS = ["gw-a", "gw-b", "gw-c"] as const;

let etcd: EtcdMember & { stopAll(): Promise<void> };
const running: MeshProcess[] = [];
const homes: string[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
});

afterAll(async () => {
  await etcd?.stopAll();
});

afterEach(async () => {
  for (const gw of running.splice(0)) {
    gw.daemon.child.kill("SIGCONT");
    await gw.daemon.kill9();
  }
  for (const home of homes.splice(0)) removeHome(home);
});

async function start(id: string, home: string): Promise<MeshProcess> {
  const gw = await startMeshProcess(id, home);
  running.push(gw);
  return gw;
}

/** Three gateways, one after the other (starts at once keep two cores too busy for a short lease), and the room led by gw-a with all three in sync. */
async function mesh(endpoint: string, options: { maxLagSeconds?: number } = {}): Promise<MeshProcess[]> {
  const config: MeshConfig = { endpoint, prefix: freshPrefix(), ttlSeconds: TTL_SECONDS, ...options };
  const gws: MeshProcess[] = [];
  for (const id of IDS) {
    const home = quorumHome(config);
    homes.push(home);
    gws.push(await start(id, home));
  }
  await createQuorumRoom(gws[0]!, ROOM, ["gw-b", "gw-c"], 2);
  await eventually(async () => expect((await stateOf(gws[0]!, ROOM)).replication?.isr).toEqual([...IDS]), {
    timeoutMs: 30_000,
    what: "all three gateways in sync",
  });
  return gws;
}

/** What clients were told. */
class Ledger {
  /** `by`: the gateway that answered; `idempotent`: a retry answered with the event already in its log (written in an earlier epoch, maybe by another gateway). */
  readonly acked = new Map<string, { seq: number; epoch: number; by: string; idempotent: boolean }>();
  readonly refusals = new Map<string, number>();
  attempts = 0;

  ack(eventId: string, reply: SendReply, by: string): void {
    this.acked.set(eventId, { seq: Number(reply.event!.seq), epoch: Number(reply.event!.epoch), by, idempotent: reply.idempotent });
  }

  refused(err: unknown): string {
    const reason = err instanceof HermesError ? err.reason : "other";
    this.refusals.set(reason, (this.refusals.get(reason) ?? 0) + 1);
    return reason;
  }

  /** The gateways that acknowledged a send they wrote, in each epoch. */
  ackersByEpoch(): Record<number, string[]> {
    const by = new Map<number, Set<string>>();
    for (const { epoch, by: gw, idempotent } of this.acked.values())
      if (!idempotent) by.set(epoch, new Set([...(by.get(epoch) ?? []), gw]));
    return Object.fromEntries([...by].map(([epoch, gws]) => [epoch, [...gws].sort()]));
  }

  /** Acknowledged sends missing from `log`, or not at the seq they were acknowledged with. */
  lostFrom(log: RoomEvent[]): string[] {
    const at = new Map(log.map((e) => [e.event_id, e.seq]));
    return [...this.acked].filter(([id, { seq }]) => at.get(id) !== seq).map(([id]) => id);
  }

  line(extra: string): string {
    const epochs = Object.entries(this.ackersByEpoch())
      .map(([epoch, gws]) => `${epoch}:${gws.join("+")}`)
      .join(" ");
    const refusals = [...this.refusals].map(([r, n]) => `${r}×${n}`).join(" ");
    return `${this.attempts > 0 ? `${this.attempts} sends, ` : ""}${this.acked.size} acked; ${extra}; epochs ${epochs}; refusals ${refusals || "none"}`;
  }
}

/**
 * A client sending until `done()`: each send is retried (same event id, so never twice in the
 * log) on the next gateway until one acknowledges it, with a short pause between tries as any
 * client backs off.
 */
async function writer(name: string, gws: MeshProcess[], ledger: Ledger, done: () => boolean): Promise<void> {
  let target = 0;
  for (let i = 0; !done(); i++) {
    const eventId = `${name}-${i}`;
    ledger.attempts += 1;
    while (!done()) {
      const gw = gws[target % gws.length]!;
      try {
        ledger.ack(eventId, await sendTo(gw, ROOM, eventId, 3000), gw.id);
        break;
      } catch (err) {
        ledger.refused(err);
        target += 1;
        await delay(50);
      }
    }
  }
}

async function authorityAmong(gws: MeshProcess[], epochAbove: number): Promise<MeshProcess> {
  return eventually(
    async () => {
      for (const gw of gws) {
        const room = await stateOf(gw, ROOM)
          .then((s) => s.room)
          .catch(() => undefined);
        if (room?.role === "authority" && Number(room.authority_epoch) > epochAbove) return gw;
      }
      return false;
    },
    { timeoutMs: 30_000, what: `an authority above epoch ${epochAbove} among ${gws.map((g) => g.id).join(", ")}` },
  );
}

/** Waits until `gw` holds every acknowledged send at its seq, and its log is a prefix of (or equals) `leader`'s. */
async function converged(gw: MeshProcess, leader: MeshProcess, ledger: Ledger): Promise<void> {
  await eventually(
    async () => {
      const [mine, theirs] = await Promise.all([logOf(gw, ROOM), logOf(leader, ROOM)]);
      expect(ledger.lostFrom(mine)).toEqual([]);
      expect(mine.map((e) => e.hash)).toEqual(theirs.slice(0, mine.length).map((e) => e.hash));
    },
    { timeoutMs: 30_000, what: `${gw.id} to hold every acknowledged send, in ${leader.id}'s order` },
  );
}

function claimOf(log: RoomEvent[], epoch: number): Record<string, unknown> | undefined {
  const claim = log.find((e) => e.kind === "authority.claimed" && e.epoch === epoch);
  return claim ? (JSON.parse(claim.payload_json) as Record<string, unknown>) : undefined;
}

describe("kill -9 of the authority", () => {
  it("under load: an in-sync replica takes over by itself, no acknowledged send is lost; the old authority returns, demotes itself and follows", async () => {
    const gws = await mesh(etcd.endpoint);
    const [a, b, c] = gws as [MeshProcess, MeshProcess, MeshProcess];
    const ledger = new Ledger();
    let stop = false;
    const writers = [0, 1].map((w) => writer(`w${w}`, gws, ledger, () => stop));

    await eventually(() => ledger.acked.size >= 40, { timeoutMs: 30_000, what: "40 sends acknowledged by gw-a" });
    await a.daemon.kill9();
    const killedAt = performance.now();
    const ackedBeforeKill = ledger.acked.size;
    let failoverMs = 0;
    await eventually(
      () => {
        const after = [...ledger.acked.values()].filter((v) => v.epoch >= 2);
        if (failoverMs === 0 && after.length > 0) failoverMs = performance.now() - killedAt;
        return after.length >= 30;
      },
      { timeoutMs: 40_000, what: "30 sends acknowledged after the failover" },
    );
    stop = true;
    await Promise.all(writers);

    const leader = await authorityAmong([b, c], 1);
    const other = leader === b ? c : b;
    const leaderLog = await logOf(leader, ROOM);
    expect(ledger.lostFrom(leaderLog)).toEqual([]);
    expect(claimOf(leaderLog, 2)).toMatchObject({ reason: "lease-expired", authority_epoch: 2 });
    expect(ledger.ackersByEpoch()).toEqual({ 1: ["gw-a"], 2: [leader.id] });
    await converged(other, leader, ledger);

    // gw-a returns on its home: it reads the record, demotes itself and follows the new authority.
    const back = await start("gw-a", a.home);
    await eventually(
      async () =>
        expect((await stateOf(back, ROOM)).room).toMatchObject({
          role: "replica",
          authority_gateway_id: leader.id,
          demoted: { previous_gateway_id: "gw-a" },
        }),
      { timeoutMs: 30_000, what: "the returning gw-a to demote itself" },
    );
    await converged(back, leader, ledger);
    // What it kept aside is what it wrote and did not acknowledge. A send in flight at the kill may
    // be kept here AND acknowledged later: the writer's retry (same event id) was written anew by the
    // new authority, and that copy is in the leader's log at the seq acknowledged (checked above).
    const preserved = (await divergenceOf(back, ROOM)).branches.flatMap((b) => b.events.map((e) => e.event_id));
    expect(preserved.filter((id) => ledger.acked.get(id)?.by === "gw-a")).toEqual([]);

    console.log(
      `[quorum kill -9] ${ledger.line(
        `0 lost; ${ackedBeforeKill} acked before the kill; failover (kill -9 → first send acknowledged by ${leader.id}) in ${(failoverMs / 1000).toFixed(2)} s; ${preserved.length} preserved unacknowledged`,
      )}`,
    );
  }, 180_000);

  it("with a send written on the authority and acknowledged by nobody: the new authority lacks it, the returning old one keeps it as a divergence", async () => {
    // A long max_lag: the replicas that stopped following stay in the ISR, so the send waits for them.
    const gws = await mesh(etcd.endpoint, { maxLagSeconds: 60 });
    const [a, b, c] = gws as [MeshProcess, MeshProcess, MeshProcess];
    const ledger = new Ledger();
    ledger.ack("m1", await sendTo(a, ROOM, "m1"), "gw-a");

    for (const replica of [b, c]) expect(await stopFollowing(replica, ROOM)).toMatchObject({ following_stopped: true });
    const unacknowledged = sendTo(a, ROOM, "m2", 30_000).then(
      () => "acknowledged",
      (err: unknown) => ledger.refused(err),
    );
    await eventually(async () => (await logOf(a, ROOM)).some((e) => e.event_id === "m2"), { what: "m2 in gw-a's log" });
    await a.daemon.kill9();
    expect(await unacknowledged).toBe("unavailable");

    // Both are in the ISR: one claims by itself; the other is told to follow again (groups replicate).
    const leader = await authorityAmong([b, c], 1);
    const other = leader === b ? c : b;
    expect(await resumeFollowing(other, ROOM)).toBe("ok");
    const m3 = await eventually(() => sendTo(leader, ROOM, "m3"), { timeoutMs: 30_000, what: "m3 acknowledged by the new authority" });
    ledger.ack("m3", m3, leader.id);
    const leaderLog = await logOf(leader, ROOM);
    expect(ledger.lostFrom(leaderLog)).toEqual([]);
    expect(leaderLog.some((e) => e.event_id === "m2")).toBe(false);
    expect(claimOf(leaderLog, 2)).toMatchObject({ reason: "lease-expired" });

    const back = await start("gw-a", a.home);
    await eventually(async () => expect((await stateOf(back, ROOM)).room).toMatchObject({ role: "replica", authority_epoch: 2 }), {
      timeoutMs: 30_000,
      what: "the returning gw-a to demote itself",
    });
    await converged(back, leader, ledger);
    const { branches } = await divergenceOf(back, ROOM);
    expect(branches).toHaveLength(1);
    expect(branches[0]).toMatchObject({ branch_gateway_id: "gw-a", branch_epoch: 1, winning_gateway_id: leader.id, winning_epoch: 2 });
    expect(branches[0]!.events.map((e) => e.event_id)).toContain("m2");
    console.log(`[quorum divergence] ${ledger.line(`0 lost; m2 preserved on gw-a, absent from ${leader.id}`)}`);
  }, 180_000);
});

describe("a frozen authority (SIGSTOP past its lease)", () => {
  it("is replaced while frozen, and on SIGCONT acknowledges nothing: it fences itself, demotes and follows", async () => {
    const gws = await mesh(etcd.endpoint);
    const [a, b, c] = gws as [MeshProcess, MeshProcess, MeshProcess];
    const ledger = new Ledger();
    ledger.ack("m1", await sendTo(a, ROOM, "m1"), "gw-a");

    pause(a);
    const leader = await authorityAmong([b, c], 1);
    ledger.ack("m2", await eventually(() => sendTo(leader, ROOM, "m2"), { timeoutMs: 30_000, what: "m2 acknowledged" }), leader.id);
    resume(a);
    // The first send it sees after waking is refused: its lease is past by its own monotonic clock.
    const refusal = await sendTo(a, ROOM, "m3").then(
      () => "acknowledged",
      (err: unknown) => ledger.refused(err),
    );
    expect(["lease_lost", "not_authority"]).toContain(refusal);
    await eventually(async () => expect((await stateOf(a, ROOM)).room).toMatchObject({ role: "replica", authority_epoch: 2 }), {
      timeoutMs: 30_000,
      what: "gw-a to demote itself",
    });
    await converged(a, leader, ledger);
    expect((await logOf(leader, ROOM)).some((e) => e.event_id === "m3")).toBe(false);
    expect(ledger.ackersByEpoch()).toEqual({ 1: ["gw-a"], 2: [leader.id] });
    console.log(`[quorum SIGSTOP] ${ledger.line(`0 lost; gw-a woke fenced (${refusal})`)}`);
  }, 180_000);
});

describe("etcd gone", () => {
  it("the authority fences itself once its lease is past (lease_lost), a quorum create is coordinator_unavailable; etcd back, sends are acknowledged again and nothing acknowledged is lost", async () => {
    const own = await startEtcd();
    try {
      const gws = await mesh(own.endpoint);
      const [a, b, c] = gws as [MeshProcess, MeshProcess, MeshProcess];
      const ledger = new Ledger();
      for (const id of ["m1", "m2", "m3"]) {
        ledger.attempts += 1;
        ledger.ack(id, await sendTo(a, ROOM, id), "gw-a");
      }

      await own.kill9();
      // Sends while the lease is still valid may be acknowledged (the ISR stands); then refused.
      let i = 0;
      await eventually(
        async () => {
          const eventId = `during-${i++}`;
          ledger.attempts += 1;
          const reply = await sendTo(a, ROOM, eventId).catch((err: unknown) => ledger.refused(err));
          if (typeof reply !== "string") ledger.ack(eventId, reply, "gw-a");
          return reply === "lease_lost";
        },
        { timeoutMs: 30_000, what: "gw-a to refuse sends with lease_lost" },
      );
      await expect(createQuorumRoom(a, "q-new", ["gw-b"], 2)).rejects.toMatchObject({ reason: "coordinator_unavailable" });

      await own.restart();
      const leader = await authorityAmong(gws, 0);
      ledger.ack(
        "after",
        await eventually(() => sendTo(leader, ROOM, "after"), { timeoutMs: 30_000, what: "a send acknowledged" }),
        leader.id,
      );
      expect(ledger.lostFrom(await logOf(leader, ROOM))).toEqual([]);
      for (const gw of [a, b, c].filter((g) => g !== leader)) await converged(gw, leader, ledger);
      console.log(`[quorum etcd lost] ${ledger.line(`0 lost; authority after etcd returned: ${leader.id}`)}`);
    } finally {
      await own.stopAll();
    }
  }, 180_000);
});
