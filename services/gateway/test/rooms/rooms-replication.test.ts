import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { authMetadata, type HermesError } from "@hermes/common";
import type { LogPage, RoomEvent } from "@hermes/proto/hermes/v1/rooms";
import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { unpackEvents } from "../../src/rooms/app/wire.js";
import { verifyChain } from "../../src/rooms/core/index.js";
import { TEST_KEY } from "../support/gateway-harness.js";
import { rewriteStoredEvent } from "../support/room-log-edits.js";
import { CuttableProxy, expectRefusal, from, MEMBERS, type RoomNode, startRoomNode, stopNodes } from "../support/rooms-fixtures.js";

/**
 * Several gateways in this process, each with its own home, talking real gRPC on 127.0.0.1:
 * catch-up of 100,000 events, follow, a planned authority move, a split brain checked with an
 * acked-write ledger, and quarantine over the wire.
 */

let nodes: RoomNode[] = [];
let proxies: CuttableProxy[] = [];

afterEach(async () => {
  for (const p of proxies) await p.close();
  await stopNodes(...nodes);
  nodes = [];
  proxies = [];
});

async function start(...ids: string[]): Promise<RoomNode[]> {
  const started = await Promise.all(ids.map((id) => startRoomNode(id)));
  nodes.push(...started);
  return started;
}

/** The whole log of a room on a node, verified as one hash chain. */
async function fullLog(node: RoomNode, roomId: string): Promise<RoomEvent[]> {
  const events: RoomEvent[] = [];
  for (let since = 0; ; ) {
    const page: LogPage = await node.call(node.client.log, {
      room_id: roomId,
      since_seq: since,
      limit: 5000,
      packed: true,
      known_authority: undefined,
    });
    events.push(...unpackEvents(roomId, page.packed_events));
    since = page.cursor;
    if (!page.has_more) break;
  }
  const chain = verifyChain(
    events.map((e) => ({ ...e, kind: e.kind as never })),
    0,
    "",
  );
  expect(chain.ok).toBe(true);
  return events;
}

async function sendMany(node: RoomNode, roomId: string, count: number, prefix: string, window = 5000): Promise<void> {
  const stream = node.appendStream();
  for (let i = 0; i < count; i += window) {
    const n = Math.min(window, count - i);
    await Promise.all(
      Array.from({ length: n }, (_, j) =>
        stream.send({ room_id: roomId, event_id: `${prefix}${i + j}`, payload: { text: `${prefix} message ${i + j}` } }),
      ),
    );
  }
  await stream.close();
}

describe("replication between gateways", () => {
  it("catches up 100,000 events with progress, then follows the live tail", async () => {
    const [a, b] = await start("gw-a", "gw-b");
    await a!.call(a!.client.create, { room_id: "big", name: "Big", members: MEMBERS });
    await sendMany(a!, "big", 100_000, "m");

    const started = performance.now();
    const { result, progress } = await b!.replicate({ room_id: "big", from: from(a!), follow: true });
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `catch-up of 100,001 events: ${seconds.toFixed(2)} s = ${Math.round(100_001 / seconds)} events/s (in-process, figure only)`,
    );
    expect(result).toMatchObject({ stored_seq: 100_001, ingested: 100_001, caught_up: true, following: true });
    expect(result.authority).toEqual({ gateway_id: "gw-a", epoch: 1 });
    expect(progress.length).toBeGreaterThan(10);
    expect(progress.map((p) => p.stored_seq)).toEqual([...progress.map((p) => p.stored_seq)].sort((x, y) => x - y));

    const [left, right] = await Promise.all([fullLog(a!, "big"), fullLog(b!, "big")]);
    expect(right.length).toBe(100_001);
    expect(right[right.length - 1]!.hash).toBe(left[left.length - 1]!.hash);

    // Live tail: new sends on the authority arrive on the replica without another call.
    await sendMany(a!, "big", 50, "live");
    await eventually(() => b!.rooms.store.state("big")!.last_seq === 100_051, {
      timeoutMs: 10_000,
      what: "the follower to apply the live sends",
    });
    const state = await b!.call(b!.client.replicaState, { room_id: "big" });
    expect(state).toMatchObject({ last_seq: 100_051, latest_seq: 100_051, caught_up: true, role: "replica", safety_status: "passive" });
    expect(state.following).toMatchObject({ state: "following" });
    const lag = await b!.gw.gateway.metrics.registry.getSingleMetric("hermes_room_replica_lag_events")!.get();
    expect(lag.values[0]!.value).toBe(0);

    // A replica refuses sends and points at the authority.
    const refused = await expectRefusal(b!.call(b!.client.send, { room_id: "big", event_id: "x", payload: { text: "x" } }));
    expect(refused.reason).toBe("not_authority");
    expect(refused.data.authority).toEqual({ gateway_id: "gw-a", epoch: 1 });

    // The follower reconnects after the authority restarts.
    const home = a!.gw.home;
    a!.client.close();
    await a!.gw.stop();
    nodes = nodes.filter((n) => n !== a);
    await eventually(async () => (await b!.call(b!.client.replicaState, { room_id: "big" })).following?.state === "reconnecting", {
      timeoutMs: 10_000,
      what: "reconnecting",
    });
    const a2 = await startRoomNode("gw-a", { home });
    nodes.push(a2);
    // The follower dialled the old port; point it at the new one (an operator re-runs replicate --follow).
    await b!.replicate({ room_id: "big", from: from(a2), follow: true });
    await sendMany(a2, "big", 10, "after");
    await eventually(() => b!.rooms.store.state("big")!.last_seq === 100_061, {
      timeoutMs: 10_000,
      what: "the follower to apply sends after the restart",
    });
  }, 180_000);

  it("follows a registered peer by name, and resumes following it after a restart", async () => {
    const [a] = await start("gw-a");
    await a!.call(a!.client.create, { room_id: "p", name: "Peer", members: MEMBERS });
    const homeB = mkdtempSync(join(tmpdir(), "hermes-gw-"));
    writeFileSync(join(homeB, "config.yaml"), `bot_peers:\n  alpha:\n    url: grpc://${a!.gw.gateway.grpcAddress}\n`);
    writeFileSync(join(homeB, ".env"), `HERMES_PEER_ALPHA_KEY=${TEST_KEY}\n`, { mode: 0o600 });
    let b = await startRoomNode("gw-b", { home: homeB });
    nodes.push(b);
    const first = await b.replicate({ room_id: "p", from: { url: "", key: "", peer: "alpha" }, follow: true });
    expect(first.result).toMatchObject({ stored_seq: 1, following: true });
    const unknown = await expectRefusal(b.replicate({ room_id: "p", from: { url: "", key: "", peer: "nobody" } }));
    expect(unknown.reason).toBe("missing_config");

    // Restart b: it resumes following alpha on its own.
    b.client.close();
    await b.gw.stop();
    nodes = nodes.filter((n) => n !== b);
    b = await startRoomNode("gw-b", { home: homeB });
    nodes.push(b);
    await sendMany(a!, "p", 5, "after-restart");
    await eventually(() => b.rooms.store.state("p")?.last_seq === 6, { timeoutMs: 10_000, what: "the resumed follower" });
    expect((await b.call(b.client.replicaState, { room_id: "p" })).following).toMatchObject({ state: "following" });
    // Stopping forgets the peer: no resume after the next restart.
    expect(await b.call(b.client.stop, { room_id: "p" })).toMatchObject({ following_stopped: true });
    expect(b.rooms.followSource("p")).toBeNull();
  }, 60_000);

  it("moves authority as planned: promote, fence notice, demote, the old authority follows", async () => {
    const [a, b] = await start("gw-a", "gw-b");
    await a!.call(a!.client.create, { room_id: "room", name: "Room", members: MEMBERS });
    await sendMany(a!, "room", 20, "before");
    await b!.replicate({ room_id: "room", from: from(a!), follow: true });
    await eventually(() => b!.rooms.store.state("room")!.last_seq === 21, { timeoutMs: 5000, what: "caught up" });

    // 1. Coverage: the replica is caught up.
    expect(await b!.call(b!.client.replicaState, { room_id: "room" })).toMatchObject({ caught_up: true, last_seq: 21 });
    // 2. Promote without confirm is refused (4118's reason).
    expect((await expectRefusal(b!.call(b!.client.promote, { room_id: "room", confirm: false }))).reason).toBe("confirm_required");
    const promoted = await b!.call(b!.client.promote, { room_id: "room", confirm: true, reason: "planned-handover" });
    expect(promoted).toEqual({
      room_id: "room",
      authority_gateway_id: "gw-b",
      authority_epoch: 2,
      previous_gateway_id: "gw-a",
      previous_epoch: 1,
      claim_seq: 22,
      latest_seq: 22,
    });
    // The new authority told the old one (a log call carrying gw-b@2): gw-a fenced itself.
    await eventually(() => a!.rooms.store.state("room")!.fenced_by !== null, { timeoutMs: 10_000, what: "gw-a to be fenced" });
    const fenced = await expectRefusal(a!.call(a!.client.send, { room_id: "room", event_id: "late", payload: { text: "x" } }));
    expect(fenced.reason).toBe("authority_conflict");
    expect(fenced.data.authority).toEqual({ gateway_id: "gw-b", epoch: 2 });

    // 3. Demote the old authority (all params; a lower epoch is refused), idempotent.
    expect(
      (await expectRefusal(a!.call(a!.client.demote, { room_id: "room", observed_gateway_id: "gw-b", observed_epoch: 1 }))).reason,
    ).toBe("epoch_regression");
    expect(await a!.call(a!.client.demote, { room_id: "room", observed_gateway_id: "gw-b", observed_epoch: 2 })).toEqual({
      room_id: "room",
      authority_gateway_id: "gw-b",
      authority_epoch: 2,
      idempotent: false,
    });
    expect((await a!.call(a!.client.demote, { room_id: "room", observed_gateway_id: "gw-b", observed_epoch: 2 })).idempotent).toBe(true);

    // 4. Sends go to the new authority; the old one follows it; nothing is off the winning lineage.
    await sendMany(b!, "room", 5, "after");
    const pulled = await a!.replicate({ room_id: "room", from: from(b!), follow: true });
    expect(pulled.result).toMatchObject({ caught_up: true, stored_seq: 27, divergences: [] });
    expect(await a!.call(a!.client.replicaState, { room_id: "room" })).toMatchObject({
      safety_status: "passive",
      demoted: { previous_gateway_id: "gw-a", previous_epoch: 1, authority_gateway_id: "gw-b", authority_epoch: 2, last_seq: 21 },
    });
    const [onA, onB] = await Promise.all([fullLog(a!, "room"), fullLog(b!, "room")]);
    expect(onA.map((e) => e.hash)).toEqual(onB.map((e) => e.hash));
    const stateA = await a!.call(a!.client.state, { room_id: "room", include_disbanded: false });
    expect(stateA.room).toMatchObject({ authority_gateway_id: "gw-b", authority_epoch: 2, role: "replica" });
    expect((await expectRefusal(a!.call(a!.client.send, { room_id: "room", event_id: "x", payload: { text: "x" } }))).reason).toBe(
      "not_authority",
    );
  }, 60_000);

  it("split brain: both sides accept writes while cut, then heal; every acknowledged send is kept exactly once", async () => {
    const [a, b, c] = await start("gw-a", "gw-b", "gw-c");
    await a!.call(a!.client.create, { room_id: "sb", name: "Split", members: MEMBERS });
    // b and c follow a; b through a proxy that the test cuts.
    const proxy = new CuttableProxy({ host: "127.0.0.1", port: Number(a!.gw.gateway.grpcAddress.split(":")[1]) });
    await proxy.start();
    proxies.push(proxy);
    await b!.replicate({ room_id: "sb", from: { url: proxy.url, key: TEST_KEY, peer: "" }, follow: true });
    await c!.replicate({ room_id: "sb", from: from(a!), follow: true });

    /** The ledger: every send attempt and what its sender was told. */
    const ledger: { event_id: string; to: string; acked?: { seq: number; epoch: number }; refused?: string }[] = [];
    const writer = (node: RoomNode, prefix: string) => {
      let stop = false;
      let n = 0;
      const done = (async () => {
        while (!stop) {
          const entry: (typeof ledger)[number] = { event_id: `${prefix}-${n++}`, to: node.id };
          ledger.push(entry);
          try {
            const r = await node.call(node.client.send, { room_id: "sb", event_id: entry.event_id, payload: { text: entry.event_id } });
            entry.acked = { seq: r.event!.seq, epoch: r.event!.epoch };
          } catch (err) {
            entry.refused = (err as HermesError).reason;
          }
          // Paces the writer (a steady stream of sends, not a busy loop); nothing waits on it.
          await new Promise((r) => setTimeout(r, 2));
        }
      })();
      return { stop: () => (stop = true), done };
    };

    const onA = writer(a!, "a");
    await eventually(() => ledger.filter((e) => e.acked).length >= 30, { timeoutMs: 10_000, what: "writes before the cut" });
    await eventually(() => b!.rooms.store.state("sb")!.last_seq >= 20, { timeoutMs: 10_000, what: "b to follow" });

    // Partition b from a; a keeps accepting writes.
    proxy.partition();
    await eventually(async () => (await b!.call(b!.client.replicaState, { room_id: "sb" })).following?.state === "reconnecting", {
      timeoutMs: 10_000,
      what: "b to lose a",
    });
    const bStopped = b!.rooms.store.state("sb")!.last_seq;
    // The operator promotes b while a is still writable (the mistake split-brain preservation recovers from).
    const promoted = await b!.call(b!.client.promote, { room_id: "sb", confirm: true });
    expect(promoted).toMatchObject({ authority_gateway_id: "gw-b", authority_epoch: 2, claim_seq: bStopped + 1 });
    const onB = writer(b!, "b");
    await eventually(() => ledger.filter((e) => e.to === "gw-b" && e.acked).length >= 20, { timeoutMs: 10_000, what: "writes on b" });
    await eventually(() => ledger.filter((e) => e.to === "gw-a" && e.acked && e.acked.seq > bStopped + 5).length > 0, {
      timeoutMs: 10_000,
      what: "a to write past the split",
    });

    // a also renames the room on its side of the split.
    await a!.rooms.rename({ room_id: "sb", name: "Renamed on a" });

    // Heal: b's fence notice reaches a, which fences itself; its later sends are refused.
    proxy.heal();
    await eventually(() => a!.rooms.store.state("sb")!.fenced_by !== null, { timeoutMs: 20_000, what: "a to learn of epoch 2" });
    const afterFence = await expectRefusal(a!.call(a!.client.send, { room_id: "sb", event_id: "post-fence", payload: { text: "x" } }));
    expect(afterFence.reason).toBe("authority_conflict");
    expect(afterFence.data.authority).toEqual({ gateway_id: "gw-b", epoch: 2 });
    ledger.push({ event_id: "post-fence", to: "gw-a", refused: "authority_conflict" });
    await eventually(() => ledger.filter((e) => e.to === "gw-a" && e.refused === "authority_conflict").length >= 3, {
      timeoutMs: 10_000,
      what: "refusals on a",
    });
    onA.stop();
    onB.stop();
    await Promise.all([onA.done, onB.done]);

    // Recovery: demote a to b's lineage, then a and c replicate from b.
    await a!.call(a!.client.demote, { room_id: "sb", observed_gateway_id: "gw-b", observed_epoch: 2 });
    const healedA = await a!.replicate({ room_id: "sb", from: from(b!) });
    expect(healedA.result.divergences).toHaveLength(1);
    const record = healedA.result.divergences[0]!;
    expect(record).toMatchObject({
      from_seq: bStopped + 1,
      branch_gateway_id: "gw-a",
      branch_epoch: 1,
      winning_gateway_id: "gw-b",
      markers_only: false,
    });
    await c!.call(c!.client.stop, { room_id: "sb" });
    const healedC = await c!.replicate({ room_id: "sb", from: from(b!) });
    expect(healedC.result.divergences.length).toBeLessThanOrEqual(1);

    const winning = await fullLog(b!, "sb");
    for (const node of [a!, c!]) expect((await fullLog(node, "sb")).map((e) => e.hash)).toEqual(winning.map((e) => e.hash));
    const preserved = (await a!.call(a!.client.divergence, { room_id: "sb" })).branches.flatMap((br) => br.events);
    const everywhere = [
      ...winning,
      ...preserved,
      ...(await c!.call(c!.client.divergence, { room_id: "sb" })).branches.flatMap((br) => br.events),
    ];

    let acked = 0;
    let refused = 0;
    for (const entry of ledger) {
      const onWinning = winning.filter((e) => e.event_id === entry.event_id);
      const inBranch = preserved.filter((e) => e.event_id === entry.event_id);
      if (entry.acked) {
        acked++;
        // Exactly once: on the winning lineage or in a's preserved branch, never both.
        expect(onWinning.length + inBranch.length, `${entry.event_id} acked by ${entry.to}`).toBe(1);
        const where = onWinning[0] ?? inBranch[0]!;
        expect(where.seq).toBe(entry.acked.seq);
        expect(where.epoch).toBe(entry.acked.epoch);
      } else if (entry.refused) {
        refused++;
        expect(
          everywhere.some((e) => e.event_id === entry.event_id),
          `refused ${entry.event_id} is visible`,
        ).toBe(false);
      }
    }
    expect(refused).toBeGreaterThan(0);
    const lost = preserved.filter((e) => e.kind === "message.user").length;
    console.log(
      `split brain ledger: ${ledger.length} sends, ${acked} acknowledged, ${refused} refused, 0 lost, 0 duplicated; ${lost} preserved in the divergent branch`,
    );
    expect(lost).toBeGreaterThan(0);
    const divergences = await a!.gw.gateway.metrics.registry.getSingleMetric("hermes_room_divergences_detected_total")!.get();
    expect(divergences.values[0]!.value).toBe(1);

    // The operator reposts two preserved messages to the winning lineage: asked on a (where the
    // branch is preserved), appended on b (the authority a replicated from), once even if repeated.
    const picked = preserved.filter((e) => e.kind === "message.user").slice(0, 2);
    const reposted = await a!.call(a!.client.repost, {
      room_id: "sb",
      seqs: picked.map((e) => e.seq),
      divergence_id: record.divergence_id,
      messages: [],
    });
    expect(reposted.items.map((i) => i.original_seq)).toEqual(picked.map((e) => e.seq));
    for (const [i, item] of reposted.items.entries()) {
      expect(item.idempotent).toBe(false);
      expect(item.event!.epoch).toBe(2);
      expect(JSON.parse(item.event!.payload_json)).toEqual(JSON.parse(picked[i]!.payload_json));
      expect(JSON.parse(item.event!.actor_json)).toMatchObject({ kind: "user", id: "operator" });
    }
    const again = await a!.call(a!.client.repost, {
      room_id: "sb",
      seqs: picked.map((e) => e.seq),
      divergence_id: record.divergence_id,
      messages: [],
    });
    expect(again.items.every((i) => i.idempotent)).toBe(true);
    expect((await fullLog(b!, "sb")).length).toBe(winning.length + 2);
    // Only messages are reposted: a's rename during the split stays in the branch.
    const renamed = preserved.find((e) => e.kind === "room.renamed");
    expect(renamed).toBeDefined();
    const notAMessage = await expectRefusal(a!.call(a!.client.repost, { room_id: "sb", seqs: [renamed!.seq], messages: [] }));
    expect(notAMessage.reason).toBe("invalid_params");
  }, 120_000);

  it("quarantines a replica whose source's history changed under it, until released", async () => {
    const [a, b] = await start("gw-a", "gw-b");
    await a!.call(a!.client.create, { room_id: "q", name: "Q", members: MEMBERS });
    await sendMany(a!, "q", 10, "m");
    await b!.replicate({ room_id: "q", from: from(a!) });
    // Tamper with the authority's copy of seq 11 (the event before b's next page).
    rewriteStoredEvent(a!.gw.gateway.db, "q", 11, (e) => ({ ...e, hash: "tampered" }));
    await sendMany(a!, "q", 5, "n");
    const err = await expectRefusal(b!.replicate({ room_id: "q", from: from(a!) }));
    expect(err.reason).toBe("hash_mismatch");
    const state = await b!.call(b!.client.replicaState, { room_id: "q" });
    expect(state).toMatchObject({ safety_status: "quarantined", last_seq: 11 });
    expect(state.safety_reason).toMatch(/^hash_mismatch/);
    const again = await expectRefusal(b!.replicate({ room_id: "q", from: from(a!) }));
    expect(again.reason).toBe("replica_quarantined");
    const released = await b!.call(b!.client.releaseSafety, { room_id: "q" });
    expect(released.safety_status).toBe("passive");
    // An old authority that pulls from the new one is refused and fenced (self-fencing on a page).
    const sub = a!.client.subscribe(
      { room_id: "q", since_seq: 0, packed: true, known_authority: { gateway_id: "gw-z", epoch: 7 } },
      authMetadata(TEST_KEY),
    );
    sub.on("error", () => undefined);
    sub.on("data", () => undefined);
    await eventually(() => a!.rooms.store.state("q")!.fenced_by?.epoch === 7, {
      timeoutMs: 5000,
      what: "a to fence on a subscribe handshake",
    });
    sub.cancel();
  }, 60_000);
});
