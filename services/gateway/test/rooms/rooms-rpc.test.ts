import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { TEST_KEY } from "../support/gateway-harness.js";
import { MEMBERS, type RoomNode, startRoomNode, stopNodes } from "../support/rooms-fixtures.js";
import { RpcClient } from "../support/rpc-client.js";

/**
 * JSON-RPC 2.0 over WebSocket at /rpc: the upstream method names, error codes 4110–4119
 * with data.reason (and data.authority where a client should redirect), the same flows as gRPC.
 */

let a: RoomNode;
let b: RoomNode;
let rpcA: RpcClient;
let rpcB: RpcClient;

beforeAll(async () => {
  a = await startRoomNode("gw-a");
  b = await startRoomNode("gw-b");
  rpcA = await RpcClient.connect(a.gw.gateway.httpAddress);
  rpcB = await RpcClient.connect(b.gw.gateway.httpAddress);
});

afterAll(async () => {
  rpcA?.close();
  rpcB?.close();
  await stopNodes(a, b);
});

describe("JSON-RPC over /rpc", () => {
  it("refuses the upgrade without the key (401), with a wrong key, and on another path", async () => {
    await expect(RpcClient.connect(a.gw.gateway.httpAddress, null)).rejects.toMatchObject({ status: 401 });
    await expect(RpcClient.connect(a.gw.gateway.httpAddress, "wrong-key-0123456789")).rejects.toMatchObject({ status: 401 });
  });

  it("creates, sends and reads with the upstream shapes and codes", async () => {
    const caps = await rpcA.call<{ methods: string[]; gateway_id: string }>("groups.capabilities");
    expect(caps.gateway_id).toBe("gw-a");
    expect(caps.methods).toEqual(expect.arrayContaining(["groups.send", "groups.replicate", "groups.promote", "groups.demote"]));

    const created = await rpcA.call<{ room: { room_id: string; authority_epoch: number } }>("groups.create", {
      room_id: "j1",
      name: "Json",
      members: MEMBERS,
    });
    expect(created.room).toMatchObject({ room_id: "j1", authority_epoch: 1 });
    const dup = await rpcA.error("groups.create", { room_id: "j1", name: "Json", members: MEMBERS });
    expect(dup).toMatchObject({ code: 4110, data: { reason: "already_exists" } });

    const sent = await rpcA.call<{ event: { seq: number; payload: { text: string }; actor: { kind: string } }; idempotent: boolean }>(
      "groups.send",
      { room_id: "j1", event_id: "k1", payload: { text: "hi" } },
    );
    expect(sent).toMatchObject({ accepted: true, idempotent: false, event: { seq: 2, payload: { text: "hi" }, actor: { kind: "user" } } });
    expect(
      (await rpcA.call<{ idempotent: boolean }>("groups.send", { room_id: "j1", event_id: "k1", payload: { text: "hi" } })).idempotent,
    ).toBe(true);
    expect(await rpcA.error("groups.send", { room_id: "j1", event_id: "k1", payload: { text: "changed" } })).toMatchObject({
      code: 4111,
      data: { reason: "idempotency_conflict" },
    });
    expect(await rpcA.error("groups.send", { room_id: "j1", event_id: "k2", payload: { text: "x", extra: 1 } })).toMatchObject({
      code: 4111,
      data: { reason: "invalid_params" },
    });
    expect(
      await rpcA.error("groups.send", { room_id: "j1", event_id: "k2", payload: { text: "x" }, expected_latest_seq: 0 }),
    ).toMatchObject({
      code: 4111,
      data: { reason: "cursor_conflict", latest_seq: 2 },
    });

    const page = await rpcA.call<{ events: { seq: number }[]; latest_seq: number; authority: unknown; lineage: unknown[] }>("groups.log", {
      room_id: "j1",
      since_seq: 0,
      limit: 10,
    });
    expect(page.events.map((e) => e.seq)).toEqual([1, 2]);
    expect(page).toMatchObject({ latest_seq: 2, has_more: false, authority: { gateway_id: "gw-a", epoch: 1 } });
    expect(await rpcA.error("groups.log", { room_id: "j1", since_seq: 5 })).toMatchObject({
      code: 4112,
      data: { reason: "cursor_conflict", latest_seq: 2, authority: { gateway_id: "gw-a", epoch: 1 } },
    });
    expect(await rpcA.error("groups.log", { room_id: "j1", limit: 0 })).toMatchObject({ code: 4112, data: { reason: "invalid_params" } });
    expect(await rpcA.error("groups.state", { room_id: "nope" })).toMatchObject({ code: 4114, data: { reason: "not_found" } });
  });

  it("streams the live tail as groups.events notifications", async () => {
    const sub = await rpcA.call<{ subscription: string }>("groups.subscribe", { room_id: "j1", since_seq: 0 });
    await rpcA.call("groups.send", { room_id: "j1", event_id: "live-1", payload: { text: "live" } });
    await eventually(() => rpcA.notifications.some((n) => n.method === "groups.events" && JSON.stringify(n.params).includes("live-1")), {
      timeoutMs: 5000,
      what: "the live event",
    });
    const seqs = rpcA.notifications
      .filter((n) => n.method === "groups.events" && n.params.subscription === sub.subscription)
      .flatMap((n) => (n.params.page as { events: { seq: number }[] }).events.map((e) => e.seq));
    expect(seqs).toEqual([1, 2, 3]);
    expect(await rpcA.call("groups.unsubscribe", { subscription: sub.subscription })).toEqual({ unsubscribed: true });
  });

  it("replicates, promotes, demotes and reports refusals with data.authority", async () => {
    const result = await rpcB.call<{ caught_up: boolean; stored_seq: number }>("groups.replicate", {
      room_id: "j1",
      from: { url: a.url, key: TEST_KEY },
    });
    expect(result).toMatchObject({ caught_up: true, stored_seq: 3 });
    expect(rpcB.notifications.some((n) => n.method === "groups.replicate.progress")).toBe(true);
    expect(await rpcB.call("groups.replica_state", { room_id: "j1" })).toMatchObject({ last_seq: 3, latest_seq: 3, caught_up: true });
    const notAuthority = await rpcB.error("groups.send", { room_id: "j1", event_id: "x", payload: { text: "x" } });
    expect(notAuthority).toMatchObject({ code: 4111, data: { reason: "not_authority", authority: { gateway_id: "gw-a", epoch: 1 } } });

    expect(await rpcB.error("groups.promote", { room_id: "j1" })).toMatchObject({ code: 4118, data: { reason: "confirm_required" } });
    expect(await rpcB.error("groups.promote", { room_id: "j1", confirm: "true" })).toMatchObject({ code: 4118 });
    const promoted = await rpcB.call("groups.promote", { room_id: "j1", confirm: true });
    expect(promoted).toMatchObject({ authority_gateway_id: "gw-b", authority_epoch: 2, previous_gateway_id: "gw-a", claim_seq: 4 });

    expect(await rpcA.error("groups.demote", { room_id: "j1", observed_gateway_id: "gw-b" })).toMatchObject({
      code: 4119,
      data: { reason: "invalid_params" },
    });
    expect(await rpcA.error("groups.demote", { room_id: "j1", observed_gateway_id: "gw-b", observed_epoch: 1 })).toMatchObject({
      code: 4119,
      data: { reason: "epoch_regression" },
    });
    expect(await rpcA.call("groups.demote", { room_id: "j1", observed_gateway_id: "gw-b", observed_epoch: 2 })).toMatchObject({
      authority_gateway_id: "gw-b",
      authority_epoch: 2,
      idempotent: false,
    });
    const conflict = await rpcA.error("groups.send", { room_id: "j1", event_id: "y", payload: { text: "y" } });
    expect(conflict).toMatchObject({ code: 4111, data: { reason: "not_authority", authority: { gateway_id: "gw-b", epoch: 2 } } });
    const back = await rpcA.call<{ divergences: { markers_only: boolean }[] }>("groups.replicate", {
      room_id: "j1",
      from: { url: b.url, key: TEST_KEY },
    });
    // A clean move: nothing off the winning lineage; the demotion is the replica state's audit record.
    expect(back.divergences).toEqual([]);
    expect(await rpcA.call<{ branches: unknown[] }>("groups.divergence", { room_id: "j1" })).toMatchObject({ branches: [] });
    expect(await rpcA.call("groups.replica_state", { room_id: "j1" })).toMatchObject({
      safety_status: "passive",
      demoted: { previous_gateway_id: "gw-a", previous_epoch: 1, authority_gateway_id: "gw-b", authority_epoch: 2, last_seq: 3 },
    });
    expect(await rpcB.error("groups.replicate", { room_id: "j1", from: { url: a.url, key: TEST_KEY } })).toMatchObject({
      code: 4116,
      data: { reason: "authority_conflict" },
    });
    expect(await rpcB.error("groups.replicate", { room_id: "j2", from: "no-such-peer" })).toMatchObject({
      code: 4116,
      data: { reason: "missing_config" },
    });
  });

  it("renames, stops, disbands (4113 on a replica) and lists", async () => {
    expect(await rpcA.error("groups.disband", { room_id: "j1" })).toMatchObject({ code: 4113, data: { reason: "not_authority" } });
    expect((await rpcB.call<{ room: { name: string } }>("groups.rename", { room_id: "j1", name: "Renamed" })).room.name).toBe("Renamed");
    expect(await rpcB.call("groups.stop", { room_id: "j1" })).toMatchObject({ room_id: "j1", cancelled: 0 });
    expect(await rpcB.call("groups.disband", { room_id: "j1" })).toMatchObject({ idempotent: false, event: { kind: "room.disbanded" } });
    expect(await rpcB.error("groups.create", { room_id: "j1", name: "x", members: MEMBERS })).toMatchObject({
      code: 4110,
      data: { reason: "room_retired" },
    });
    const list = await rpcB.call<{ rooms: unknown[]; next_offset: number | null }>("groups.list", { include_disbanded: true });
    expect(list.rooms).toHaveLength(1);
    expect(list.next_offset).toBeNull();
  });

  it("answers protocol errors with typed errors and keeps the connection", async () => {
    expect(await rpcA.sendRaw("{not json")).toMatchObject({ id: null, error: { code: -32700, data: { reason: "invalid_params" } } });
    expect(await rpcA.sendRaw(JSON.stringify({ id: 7, method: "groups.list" }))).toMatchObject({ id: 7, error: { code: -32600 } });
    expect(await rpcA.sendRaw(JSON.stringify({ jsonrpc: "2.0", id: 8, method: "groups.nope" }))).toMatchObject({
      id: 8,
      error: { code: -32601, data: { reason: "method_not_found" } },
    });
    expect(await rpcA.sendRaw(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "groups.list", params: { limit: "ten" } }))).toMatchObject({
      id: 9,
      error: { code: -32602, data: { reason: "invalid_params", field: "limit" } },
    });
    const batch = (await rpcA.sendRaw(
      JSON.stringify([
        { jsonrpc: "2.0", id: 10, method: "groups.capabilities" },
        { jsonrpc: "2.0", method: "groups.capabilities" },
        { jsonrpc: "2.0", id: 11, method: "groups.state", params: { room_id: "nope" } },
      ]),
    )) as { id: number }[];
    expect(batch.map((r) => r.id)).toEqual([10, 11]);
    // A read in a batch is asked for no more than the batch has room for, but a bad max_bytes is refused as it is alone.
    for (const max_bytes of [0, 7 * 1024 * 1024]) {
      const params = { room_id: "j1", max_bytes };
      const alone = (await rpcA.sendRaw(JSON.stringify({ jsonrpc: "2.0", id: 12, method: "groups.log", params }))) as { error: unknown };
      const [inBatch] = (await rpcA.sendRaw(JSON.stringify([{ jsonrpc: "2.0", id: 12, method: "groups.log", params }]))) as {
        error: unknown;
      }[];
      expect(alone.error).toMatchObject({ data: { reason: "invalid_params", field: "max_bytes" } });
      expect(inBatch!.error).toEqual(alone.error);
    }
    expect(await rpcA.call("groups.capabilities")).toMatchObject({ gateway_id: "gw-a" });
  });
});
