import { HermesError } from "@hermes/common";
import { RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type EtcdMember, startEtcd } from "../../../../test/support/etcd.js";
import { eventually } from "../../../../test/support/eventually.js";
import { RoomLog } from "../../src/rooms/app/room-log.js";
import { call, startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { freshPrefix, MEMBERS, type MeshConfig, startQuorumGateway } from "../support/quorum-fixtures.js";
import { expectRefusal } from "../support/rooms-fixtures.js";
import { RpcClient } from "../support/rpc-client.js";

/**
 * Quorum rooms with a real etcd and three real gateways in this process (lease TTL 4 s, max_lag
 * 1 s): acknowledgement over the in-sync replicas, the ISR shrinking and growing, refusals,
 * hand-edited records, the planned move through the coordinator, a wall-clock jump. Kills and
 * pauses of whole processes are in quorum-failover.test.ts.
 */

let etcd: EtcdMember & { stopAll(): Promise<void> };
let raw: Etcd3;
const started: TestGateway[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
  raw = new Etcd3({ hosts: etcd.endpoint });
});

afterAll(async () => {
  raw?.close();
  await etcd?.stopAll();
});

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(started.splice(0).map((g) => g.destroy()));
});

async function mesh(ids: string[]): Promise<{ config: MeshConfig; gws: TestGateway[] }> {
  const config = { endpoint: etcd.endpoint, prefix: freshPrefix() };
  const gws: TestGateway[] = [];
  // One at a time: three starts at once keep this process's event loop busier than a short lease allows.
  for (const id of ids) {
    const gw = await startQuorumGateway(id, config);
    started.push(gw);
    gws.push(gw);
  }
  return { config, gws };
}

const ROOM = "q1";
const quorum = (replicas: string[], min_insync = 2) => ({ mode: "quorum", replicas, min_insync });

function send(gw: TestGateway, id: string) {
  return gw.gateway.rooms.send({ room_id: ROOM, event_id: id, payload: { text: `text of ${id}` } });
}

const isrOf = (gw: TestGateway) => gw.gateway.rooms.state(ROOM).replication.isr;
const holds = (gw: TestGateway, seq: number) => (gw.gateway.rooms.store.state(ROOM)?.last_seq ?? 0) >= seq;

async function recordOf(config: MeshConfig): Promise<Record<string, unknown> | null> {
  const text = await raw.get(`${config.prefix}/rooms/${ROOM}/authority`).string();
  return text === null ? null : (JSON.parse(text) as Record<string, unknown>);
}

describe("quorum acknowledgement", () => {
  it("acknowledges a send only once every in-sync replica holds it; a stopped replica leaves the ISR (recorded first), too few in sync is not_enough_replicas", async () => {
    const { config, gws } = await mesh(["gw-a", "gw-b", "gw-c"]);
    const [a, b, c] = gws as [TestGateway, TestGateway, TestGateway];
    await a.gateway.rooms.create({ room_id: ROOM, name: "Quorum", members: MEMBERS, replication: quorum(["gw-b", "gw-c"]) });
    // Only the creator is in sync at first: nothing can be acknowledged yet.
    await expect(send(a, "early")).rejects.toMatchObject({ reason: "not_enough_replicas", data: { min_insync: 2 } });
    await eventually(() => expect(isrOf(a)).toEqual(["gw-a", "gw-b", "gw-c"]));

    // Acknowledged = on every ISR member's disk at the moment the answer comes.
    const first = await send(a, "m1").then((r) => ({ seq: r.event.seq, b: holds(b, r.event.seq), c: holds(c, r.event.seq) }));
    expect(first).toEqual({ seq: 2, b: true, c: true });

    // C stops following: the next send waits for C until max_lag passes, C leaves the ISR (written
    // to etcd before acks stop waiting for it), and only then is the send acknowledged, without C.
    c.gateway.rooms.stopRoom(ROOM);
    const held = await send(a, "m2").then(async (r) => ({
      seq: r.event.seq,
      isr: isrOf(a),
      b: holds(b, r.event.seq),
      c: holds(c, r.event.seq),
    }));
    expect(held).toEqual({ seq: 3, isr: ["gw-a", "gw-b"], b: true, c: false });
    expect(await recordOf(config)).toMatchObject({ gateway_id: "gw-a", epoch: 1, isr: ["gw-a", "gw-b"] });

    // B stops too: the ISR shrinks to the authority alone, below min_insync. A send that is waiting
    // then is refused, and so is every new one; none is acknowledged.
    b.gateway.rooms.stopRoom(ROOM);
    const waiting = send(a, "m3");
    const refused = await expectRefusal(waiting);
    expect(refused.reason).toBe("not_enough_replicas");
    await eventually(() => expect(isrOf(a)).toEqual(["gw-a"]));
    await expect(send(a, "m4")).rejects.toMatchObject({ reason: "not_enough_replicas", data: { isr_size: 1, min_insync: 2 } });

    // B follows again (groups replicate resumes a quorum replica): it rejoins once it holds every
    // acknowledged send; sends are accepted again, and the retry of m3 (in the log, never
    // acknowledged) is acknowledged now, at its seq.
    await b.gateway.rooms.replicate({ room_id: ROOM, from: { url: "unused" } });
    await eventually(() => expect(isrOf(a)).toEqual(["gw-a", "gw-b"]));
    const retried = await send(a, "m3");
    expect(retried).toMatchObject({ idempotent: true, event: { seq: 4 } });
    expect(holds(b, 4)).toBe(true);
    await expect(send(a, "m5")).resolves.toMatchObject({ idempotent: false });

    // A replica answers not_authority (an idempotent retry there is no acknowledgement either).
    await expect(send(b, "m1")).rejects.toMatchObject({ reason: "not_authority", data: { authority: { gateway_id: "gw-a" } } });
    await expect(send(b, "m9")).rejects.toMatchObject({ reason: "not_authority" });
  }, 90_000);

  it("a listed replica that does not exist: the room is created and reports it missing; sends are refused until min_insync can be met", async () => {
    const { gws } = await mesh(["gw-a", "gw-b"]);
    const [a] = gws as [TestGateway];
    await a.gateway.rooms.create({ room_id: ROOM, name: "Missing", members: MEMBERS, replication: quorum(["gw-b", "gw-x"], 3) });
    const state = a.gateway.rooms.state(ROOM).replication;
    expect(state).toMatchObject({ mode: "quorum", replicas: ["gw-a", "gw-b", "gw-x"], min_insync: 3, missing: ["gw-x"] });
    await eventually(() => expect(isrOf(a)).toEqual(["gw-a", "gw-b"]));
    await expect(send(a, "m1")).rejects.toMatchObject({ reason: "not_enough_replicas", data: { isr_size: 2, min_insync: 3 } });
  }, 60_000);
});

describe("create, state and promote through the method table", () => {
  it("gRPC and JSON-RPC create quorum rooms and show their replication; bad policies are invalid_params", async () => {
    const { gws } = await mesh(["gw-a", "gw-b"]);
    const [a, b] = gws as [TestGateway, TestGateway];
    const client = a.client(RoomServiceClient);
    await call(client, client.create, {
      room_id: ROOM,
      name: "Over gRPC",
      members: MEMBERS,
      replication: { mode: "quorum", replicas: ["gw-b"], min_insync: 0 },
    });
    await eventually(async () => {
      const s = await call(client, client.state, { room_id: ROOM, include_disbanded: false });
      expect(s.replication).toMatchObject({
        mode: "quorum",
        replicas: ["gw-a", "gw-b"],
        min_insync: 2,
        isr: ["gw-a", "gw-b"],
        missing: [],
      });
      expect(s.replication?.lease).toMatchObject({ holder: "gw-a" });
      expect(s.replication!.lease!.expires_in_ms).toBeGreaterThan(0);
    });
    const rpc = await RpcClient.connect(b.gateway.httpAddress);
    try {
      await rpc.call("groups.create", { room_id: "q2", name: "Over JSON-RPC", members: MEMBERS, replication: quorum(["gw-a"], 1) });
      const state = await rpc.call<{ replication: unknown }>("groups.state", { room_id: "q2" });
      expect(state.replication).toMatchObject({ mode: "quorum", replicas: ["gw-a", "gw-b"], min_insync: 1 });
      const bad = await rpc.error("groups.create", {
        name: "Bad",
        members: MEMBERS,
        replication: { mode: "quorum", replicas: ["gw-b", "gw-b"] },
      });
      expect(bad).toMatchObject({ code: 4110, data: { reason: "invalid_params", field: "replication.replicas" } });
      // A room id already used in the mesh is refused on another gateway too.
      const taken = await rpc.error("groups.create", { room_id: ROOM, name: "Again", members: MEMBERS, replication: quorum(["gw-a"]) });
      expect(taken).toMatchObject({ data: { reason: "already_exists" } });
    } finally {
      rpc.close();
    }
    // A local room on a coordinated gateway is exactly as before.
    const local = await call(client, client.create, { room_id: "plain", name: "Local", members: MEMBERS });
    expect(local.room).toMatchObject({ authority_gateway_id: "gw-a", authority_epoch: 1 });
    expect(a.gateway.rooms.state("plain").replication).toEqual({
      mode: "local",
      replicas: [],
      min_insync: 1,
      isr: [],
      missing: [],
      lease: null,
    });
    await expect(a.gateway.rooms.send({ room_id: "plain", event_id: "x", payload: { text: "hi" } })).resolves.toMatchObject({
      accepted: true,
    });
  }, 60_000);

  it("without a coordinator, quorum is invalid_params with data.code coordinator_required", async () => {
    const plain = await startTestGateway();
    started.push(plain);
    expect(() => plain.gateway.rooms.create({ room_id: ROOM, name: "No", members: MEMBERS, replication: quorum(["gw-b"]) })).toThrow(
      expect.objectContaining({ reason: "invalid_params", data: expect.objectContaining({ code: "coordinator_required" }) }),
    );
    expect(plain.gateway.rooms.capabilities().features).not.toContain("quorum_replication");
  });
});

describe("operator moves through the coordinator", () => {
  it("promote is refused while the authority's lease lives; demote hands the room to an in-sync replica; --unclean lets a replica outside the ISR claim", async () => {
    const { config, gws } = await mesh(["gw-a", "gw-b", "gw-c"]);
    const [a, b, c] = gws as [TestGateway, TestGateway, TestGateway];
    await a.gateway.rooms.create({ room_id: ROOM, name: "Move", members: MEMBERS, replication: quorum(["gw-b", "gw-c"]) });
    await eventually(() => expect(isrOf(a)).toEqual(["gw-a", "gw-b", "gw-c"]));
    await send(a, "m1");
    await expect(b.gateway.rooms.promote({ room_id: ROOM, confirm: true })).rejects.toMatchObject({ reason: "authority_conflict" });

    // The planned move: A stops acknowledging, releases the record, an in-sync replica claims it at
    // once, and A demotes itself (the audit record) and follows it.
    const moved = await a.gateway.rooms.demote({ room_id: ROOM });
    expect(moved).toMatchObject({ room_id: ROOM, authority_epoch: 2, idempotent: false });
    const leader = moved.authority_gateway_id === "gw-b" ? b : c;
    const other = leader === b ? c : b;
    expect(a.gateway.rooms.state(ROOM).room).toMatchObject({
      role: "replica",
      demoted: { previous_gateway_id: "gw-a", authority_epoch: 2 },
    });
    await eventually(() => expect(isrOf(leader).length).toBe(3));
    // The claim is in etcd before the leader's own log has taken the room over: wait for that too.
    await eventually(() => expect(leader.gateway.rooms.state(ROOM).room.role).toBe("authority"));
    const after = await send(leader, "m2");
    expect(after.event).toMatchObject({ epoch: 2 });
    expect(holds(a, after.event.seq) && holds(other, after.event.seq)).toBe(true);
    const claim = leader.gateway.rooms.store.events(ROOM, 0, 100).find((e) => e.kind === "authority.claimed");
    expect(JSON.parse(claim!.payload_json)).toMatchObject({ reason: "planned-handover", authority_epoch: 2 });
    expect(a.gateway.rooms.divergence(ROOM).branches).toEqual([]);

    // A record edited by hand to a lower epoch is refused by every gateway: nobody adopts it, and
    // the authority stops acknowledging until the record is valid again.
    const current = (await raw.get(`${config.prefix}/rooms/${ROOM}/authority`).string())!;
    await raw
      .put(`${config.prefix}/rooms/${ROOM}/authority`)
      .value(JSON.stringify({ ...JSON.parse(current), gateway_id: "gw-a", epoch: 1, isr: ["gw-a"] }));
    await eventually(() => expect(send(leader, "m3")).rejects.toMatchObject({ reason: "lease_lost" }));
    expect([a, b, c].map((g) => g.gateway.rooms.state(ROOM).room.authority_epoch)).toEqual([2, 2, 2]);
    // Garbage likewise.
    await raw.put(`${config.prefix}/rooms/${ROOM}/authority`).value("{not a record");
    await expect(send(leader, "m3")).rejects.toMatchObject({ reason: "lease_lost" });
    await raw.put(`${config.prefix}/rooms/${ROOM}/authority`).value(current);
    await eventually(() => expect(send(leader, "m3")).resolves.toMatchObject({ accepted: true }));
    expect([a, b, c].map((g) => g.gateway.rooms.state(ROOM).room.authority_epoch)).toEqual([2, 2, 2]);

    // The other replica stops following and leaves the ISR; after the leader is gone (graceful stop:
    // its lease is revoked), only the ISR member A claims by itself, and an operator may promote the
    // one outside it with --unclean, accepting the loss.
    other.gateway.rooms.stopRoom(ROOM);
    // (A replica that lacks nothing is in sync, stopped or not: the next send makes it lag.)
    await send(leader, "m4");
    expect(isrOf(leader)).toEqual([leader.gateway.id, "gw-a"]);
    await expect(other.gateway.rooms.promote({ room_id: ROOM, confirm: true })).rejects.toMatchObject({ reason: "authority_conflict" });
    await leader.stop();
    started.splice(started.indexOf(leader), 1);
    await eventually(() => expect(a.gateway.rooms.state(ROOM).room).toMatchObject({ role: "authority", authority_epoch: 3 }));
    await expect(other.gateway.rooms.promote({ room_id: ROOM, confirm: true })).rejects.toMatchObject({ reason: "authority_conflict" });
    await a.stop();
    started.splice(started.indexOf(a), 1);
    await expect(other.gateway.rooms.promote({ room_id: ROOM, confirm: true })).rejects.toMatchObject({ data: { code: "not_in_isr" } });
    const unclean = await other.gateway.rooms.promote({ room_id: ROOM, confirm: true, unclean: true, reason: "last-one-standing" });
    expect(unclean).toMatchObject({ authority_gateway_id: other.gateway.id, authority_epoch: 4 });
    expect(await recordOf(config)).toMatchObject({ gateway_id: other.gateway.id, epoch: 4, isr: [other.gateway.id] });
  }, 120_000);
});

describe("failover of a gateway leading several rooms", () => {
  it("every room it led is claimed by the in-sync replica (each at an epoch of its own) and acknowledges sends again; no acknowledged send is lost", async () => {
    const { gws } = await mesh(["gw-a", "gw-b"]);
    const [a, b] = gws as [TestGateway, TestGateway];
    const rooms = ["q1", "q2", "q3"];
    // min_insync 1: gw-b alone may acknowledge once gw-a is gone; while both are in sync, every ack waits for gw-b.
    for (const room_id of rooms)
      await a.gateway.rooms.create({ room_id, name: room_id, members: MEMBERS, replication: quorum(["gw-b"], 1) });
    for (const room_id of rooms) await eventually(() => expect(a.gateway.rooms.state(room_id).replication.isr).toEqual(["gw-a", "gw-b"]));
    const acked = new Map<string, { room_id: string; seq: number }>();
    for (const room_id of rooms) {
      for (const n of [1, 2]) {
        const event_id = `${room_id}-before-${n}`;
        const reply = await a.gateway.rooms.send({ room_id, event_id, payload: { text: event_id } });
        acked.set(event_id, { room_id, seq: reply.event.seq });
      }
    }

    // A graceful stop revokes gw-a's lease: gw-b sees every record's lease gone at once and claims all three rooms.
    const takeovers = vi.spyOn(RoomLog.prototype, "promote");
    await a.stop();
    started.splice(started.indexOf(a), 1);
    for (const room_id of rooms) {
      const event_id = `${room_id}-after`;
      const reply = await eventually(() => b.gateway.rooms.send({ room_id, event_id, payload: { text: event_id } }), {
        timeoutMs: 20_000,
        what: `gw-b to acknowledge a send into ${room_id}`,
      });
      acked.set(event_id, { room_id, seq: reply.event.seq });
    }
    const epochs = rooms.map((room_id) => b.gateway.rooms.state(room_id).room);
    expect(epochs.map((r) => r.role)).toEqual(["authority", "authority", "authority"]);
    // One claim at a time: each took an epoch above every epoch the gateway held, so each won in
    // etcd was taken over here at the first try (none refused and claimed again).
    expect(new Set(epochs.map((r) => r.authority_epoch)).size).toBe(3);
    expect(takeovers.mock.calls.map(([room_id]) => room_id).sort()).toEqual(rooms);
    for (const [event_id, { room_id, seq }] of acked) {
      const event = b.gateway.rooms.store.events(room_id, 0, 100).find((e) => e.event_id === event_id);
      expect(event?.seq, `${event_id} in ${room_id}`).toBe(seq);
    }
  }, 90_000);
  it("a claim that won in etcd but is refused here is released again, and claimed at a higher epoch: the room is not left held by nobody", async () => {
    const { config, gws } = await mesh(["gw-a", "gw-b"]);
    const [a, b] = gws as [TestGateway, TestGateway];
    await a.gateway.rooms.create({ room_id: ROOM, name: "Refused", members: MEMBERS, replication: quorum(["gw-b"], 1) });
    await eventually(() => expect(isrOf(a)).toEqual(["gw-a", "gw-b"]));
    const m1 = await send(a, "m1");
    const before = m1.event.epoch;
    // As when a page of another room at the claimed epoch reaches gw-b while it claims this one.
    const promote = RoomLog.prototype.promote;
    const refusedEpochs: number[] = [];
    vi.spyOn(RoomLog.prototype, "promote").mockImplementation(function (this: RoomLog, roomId, input) {
      if (input.claimEpoch === before + 1) {
        refusedEpochs.push(input.claimEpoch);
        throw new HermesError("epoch_regression", `the claimed epoch ${before + 1} is not above epoch ${before + 1} known here`);
      }
      return promote.call(this, roomId, input);
    });

    await a.stop();
    started.splice(started.indexOf(a), 1);
    const m2 = await eventually(() => send(b, "m2"), { timeoutMs: 20_000, what: "gw-b to acknowledge a send after the refused claim" });
    expect(refusedEpochs).toEqual([before + 1]);
    expect(m2.event).toMatchObject({ epoch: before + 2 });
    expect(b.gateway.rooms.state(ROOM).room).toMatchObject({ role: "authority", authority_epoch: before + 2 });
    expect(await recordOf(config)).toMatchObject({ gateway_id: "gw-b", epoch: before + 2 });
    expect(b.gateway.rooms.store.events(ROOM, 0, 100).find((e) => e.event_id === "m1")?.seq).toBe(m1.event.seq);
  }, 90_000);
});

describe("the lease lives on the monotonic clock", () => {
  it("a jump of the wall clock (a year either way) changes nothing: sends are still acknowledged, the lease still valid", async () => {
    const { gws } = await mesh(["gw-a", "gw-b"]);
    const [a, b] = gws as [TestGateway, TestGateway];
    await a.gateway.rooms.create({ room_id: ROOM, name: "Clock", members: MEMBERS, replication: quorum(["gw-b"]) });
    await eventually(() => expect(isrOf(a)).toEqual(["gw-a", "gw-b"]));
    const realNow = Date.now();
    for (const jump of [365 * 86_400_000, -365 * 86_400_000]) {
      vi.spyOn(Date, "now").mockReturnValue(realNow + jump);
      const r = await send(a, `jump-${jump > 0 ? "ahead" : "back"}`);
      expect(holds(b, r.event.seq)).toBe(true);
      expect(a.gateway.coordinator!.leaseStatus().phase).toBe("valid");
      expect(a.gateway.rooms.state(ROOM).replication.lease).toMatchObject({ holder: "gw-a" });
      vi.restoreAllMocks();
    }
  }, 60_000);
});

describe("metrics", () => {
  it("exports the ISR size, failovers and lease renewal round trips", async () => {
    const { gws } = await mesh(["gw-a", "gw-b"]);
    const [a] = gws as [TestGateway];
    await a.gateway.rooms.create({ room_id: ROOM, name: "Metrics", members: MEMBERS, replication: quorum(["gw-b"]) });
    await eventually(async () => {
      const text = await (await fetch(`http://${a.gateway.httpAddress}/metrics`)).text();
      expect(text).toMatch(/^hermes_room_isr_size\{[^}]*\} 2$/m);
      expect(text).toMatch(/^hermes_room_failovers_total\{[^}]*\} 0$/m);
      expect(text).toMatch(/^hermes_coordinator_lease_renew_seconds_count\{[^}]*\} [1-9]/m);
    });
  }, 60_000);
});
