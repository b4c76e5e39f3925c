import { authMetadata } from "@hermes/common";
import type { LogPage } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { unpackEvents } from "../../src/rooms/app/wire.js";
import { verifyChain } from "../../src/rooms/core/index.js";
import { call, TEST_KEY } from "../support/gateway-harness.js";
import { deleteStoredLog } from "../support/room-log-edits.js";
import { expectRefusal, MEMBERS, type RoomNode, startRoomNode, stopNodes } from "../support/rooms-fixtures.js";

/**
 * RoomService over real gRPC on one gateway: create, sends (unary and the Append stream, with group
 * commit, idempotency, expected_latest_seq), log pages, the live tail, disband/rename/list/state,
 * and typed refusals with their reason in the trailer.
 */

let a: RoomNode;

beforeAll(async () => {
  a = await startRoomNode("gw-a");
});

afterAll(async () => {
  await stopNodes(a);
});

const text = (t: string) => ({ text: t });

describe("RoomService on one gateway", () => {
  it("creates a room led by this gateway at epoch 1 and refuses duplicates and bad input", async () => {
    const { room } = await a.call(a.client.create, { room_id: "r1", name: "Research", members: MEMBERS });
    expect(room).toMatchObject({
      room_id: "r1",
      name: "Research",
      authority_gateway_id: "gw-a",
      authority_epoch: 1,
      latest_seq: 1,
      role: "authority",
    });
    expect((await expectRefusal(a.call(a.client.create, { room_id: "r1", name: "x", members: MEMBERS }))).reason).toBe("already_exists");
    expect((await expectRefusal(a.call(a.client.create, { room_id: "r2", name: "x", members: [MEMBERS[0]!] }))).reason).toBe(
      "invalid_params",
    );
    const generated = await a.call(a.client.create, { name: "no id given", members: MEMBERS });
    expect(generated.room?.room_id).toMatch(/^room_[0-9a-f]{16}$/);
  });

  it("refuses a call without the key", async () => {
    const err = await expectRefusal(call(a.client, a.client.state, { room_id: "r1", include_disbanded: false }, null));
    expect(err.reason).toBe("unauthenticated");
  });

  it("acknowledges sends with dense seqs, idempotent retries and expected_latest_seq", async () => {
    const first = await a.call(a.client.send, { room_id: "r1", event_id: "m1", payload: text("hello") });
    expect(first).toMatchObject({ accepted: true, idempotent: false, event: { seq: 2, kind: "message.user", epoch: 1 } });
    const again = await a.call(a.client.send, { room_id: "r1", event_id: "m1", payload: text("hello") });
    expect(again).toMatchObject({ idempotent: true, event: { seq: 2, hash: first.event!.hash } });
    const conflict = await expectRefusal(a.call(a.client.send, { room_id: "r1", event_id: "m1", payload: text("other") }));
    expect(conflict.reason).toBe("idempotency_conflict");
    const stale = await expectRefusal(a.call(a.client.send, { room_id: "r1", event_id: "m2", payload: text("x"), expected_latest_seq: 1 }));
    expect(stale.reason).toBe("cursor_conflict");
    expect(stale.data.latest_seq).toBe(2);
    const ok = await a.call(a.client.send, { room_id: "r1", event_id: "m2", payload: text("x"), expected_latest_seq: 2 });
    expect(ok.event?.seq).toBe(3);
    const big = await expectRefusal(a.call(a.client.send, { room_id: "r1", event_id: "m3", payload: text("x".repeat(64 * 1024 + 1)) }));
    expect(big.reason).toBe("payload_too_large");
    const missing = await expectRefusal(a.call(a.client.send, { room_id: "nope", event_id: "m1", payload: text("x") }));
    expect(missing.reason).toBe("not_found");
  });

  it("group-commits concurrent unary sends: every one acknowledged, once each, in one chain", async () => {
    await a.call(a.client.create, { room_id: "busy", name: "Busy", members: MEMBERS });
    const sends = Array.from({ length: 200 }, (_, i) =>
      a.call(a.client.send, { room_id: "busy", event_id: `e${i}`, payload: text(`m${i}`) }),
    );
    const acks = await Promise.all(sends);
    const seqs = acks.map((r) => r.event!.seq).sort((x, y) => x - y);
    expect(seqs).toEqual(Array.from({ length: 200 }, (_, i) => i + 2));
    const batches = await a.gw.gateway.metrics.registry.getSingleMetric("hermes_room_append_batch_size")!.get();
    const count = batches.values.find((v) => (v as { metricName?: string }).metricName === "hermes_room_append_batch_size_count")!.value;
    const sum = batches.values.find((v) => (v as { metricName?: string }).metricName === "hermes_room_append_batch_size_sum")!.value;
    expect(sum / count).toBeGreaterThan(1); // some commits answered several sends
  });

  it("pipelines sends over the Append stream and answers refusals in-stream", async () => {
    await a.call(a.client.create, { room_id: "stream", name: "Stream", members: MEMBERS });
    const stream = a.appendStream();
    const acks = await Promise.all(
      Array.from({ length: 3000 }, (_, i) => stream.send({ room_id: "stream", event_id: `s${i}`, payload: text(`m${i}`) })),
    );
    expect(new Set(acks.map((r) => r.seq)).size).toBe(3000);
    const refused = await expectRefusal(stream.send({ room_id: "stream", event_id: "s0", payload: text("changed") }));
    expect(refused.reason).toBe("idempotency_conflict");
    await stream.close();
    const page = await a.call(a.client.log, { room_id: "stream", since_seq: 0, limit: 5000, packed: true, known_authority: undefined });
    const events = unpackEvents("stream", page.packed_events);
    expect(events).toHaveLength(3001);
    expect(verifyChain(events, 0, "").ok).toBe(true);
  });

  it("serves log pages bounded by count and bytes, with prev and lineage", async () => {
    const page = await a.call(a.client.log, { room_id: "r1", since_seq: 1, limit: 1, packed: false, known_authority: undefined });
    expect(page.events).toHaveLength(1);
    expect(page).toMatchObject({ cursor: 2, latest_seq: 3, has_more: true, authority: { gateway_id: "gw-a", epoch: 1 } });
    expect(page.prev?.seq).toBe(1);
    expect(page.lineage).toEqual([{ epoch: 1, gateway_id: "gw-a", start_seq: 1 }]);
    expect(
      (await expectRefusal(a.call(a.client.log, { room_id: "r1", since_seq: 99, packed: false, known_authority: undefined }))).reason,
    ).toBe("cursor_conflict");
    expect(
      (await expectRefusal(a.call(a.client.log, { room_id: "r1", since_seq: 0, limit: 501, packed: false, known_authority: undefined })))
        .reason,
    ).toBe("invalid_params");
    const packed = await a.call(a.client.log, {
      room_id: "stream",
      since_seq: 0,
      limit: 5000,
      max_bytes: 4096,
      packed: true,
      known_authority: undefined,
    });
    const events = unpackEvents("stream", packed.packed_events);
    expect(events.length).toBeGreaterThan(0);
    expect(events.length).toBeLessThan(100);
  });

  it("streams the live tail: the handshake, then each commit", async () => {
    await a.call(a.client.create, { room_id: "tail", name: "Tail", members: MEMBERS });
    const pages: LogPage[] = [];
    const stream = a.client.subscribe({ room_id: "tail", since_seq: 0, packed: false, known_authority: undefined }, authMetadata(TEST_KEY));
    stream.on("data", (p: LogPage) => pages.push(p));
    stream.on("error", () => undefined);
    await eventually(() => expect(pages[0]).toMatchObject({ latest_seq: 1, authority: { gateway_id: "gw-a", epoch: 1 } }));
    for (let i = 0; i < 5; i++) await a.call(a.client.send, { room_id: "tail", event_id: `t${i}`, payload: text(`live ${i}`) });
    await eventually(() => expect(pages.flatMap((p) => p.events.map((e) => e.seq))).toEqual([1, 2, 3, 4, 5, 6]));
    stream.cancel();
    const bad = a.client.subscribe({ room_id: "tail", since_seq: 50, packed: false, known_authority: undefined }, authMetadata(TEST_KEY));
    const err = await new Promise<{ code: number; metadata: { get(k: string): unknown[] } }>((resolve) => bad.on("error", resolve));
    expect(err.metadata.get("hermes-reason")[0]).toBe("cursor_conflict");
  });

  it("renames, lists, disbands (idempotent) and refuses to re-create a retired id", async () => {
    const renamed = await a.call(a.client.rename, { room_id: "r1", name: "Research v2", event_id: "rename-1" });
    expect(renamed.room).toMatchObject({ name: "Research v2", revision: 2 });
    const list = await a.call(a.client.list, { offset: 0, include_disbanded: false });
    expect(list.rooms.map((r) => r.room_id)).toContain("r1");
    const d1 = await a.call(a.client.disband, { room_id: "r1" });
    expect(d1).toMatchObject({ idempotent: false, event: { kind: "room.disbanded" } });
    const d2 = await a.call(a.client.disband, { room_id: "r1" });
    expect(d2.idempotent).toBe(true);
    expect((await expectRefusal(a.call(a.client.send, { room_id: "r1", event_id: "late", payload: text("x") }))).reason).toBe(
      "room_disbanded",
    );
    const state = await a.call(a.client.state, { room_id: "r1", include_disbanded: true });
    expect(state.room?.disbanded_at).toBeTruthy();
    const hidden = await a.call(a.client.list, { offset: 0, include_disbanded: false });
    expect(hidden.rooms.map((r) => r.room_id)).not.toContain("r1");
    // The id stays retired even after the row is gone (e.g. a restored backup without the room).
    deleteStoredLog(a.gw.gateway.db, "r1");
    a.gw.gateway.db.prepare("DELETE FROM rooms WHERE room_id = 'r1'").run();
    a.rooms.store.dropCache();
    expect((await expectRefusal(a.call(a.client.create, { room_id: "r1", name: "again", members: MEMBERS }))).reason).toBe("room_retired");
  });

  it("reports capabilities and the room count in gateway status", async () => {
    const caps = await a.call(a.client.capabilities, {});
    expect(caps).toMatchObject({ gateway_id: "gw-a", max_log_limit: 500, max_replication_log_limit: 5000, driver: true });
    expect(caps.methods).toContain("groups.promote");
    expect(a.gw.gateway.status().rooms).toBeGreaterThan(0);
  });
});
