import type { HermesError } from "@hermes/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_ACTOR } from "../../src/rooms/app/rooms-service.js";
import { expectRefusal, from, MEMBERS, type RoomNode, startRoomNode, stopNodes } from "../support/rooms-fixtures.js";
import { RpcClient } from "../support/rpc-client.js";

/**
 * Event ids the server writes itself (`system:…`, `turn:…`, `repost:…`) are refused in client
 * sends on every transport, so no client can squat the id of a future disband, claim or turn; and
 * a log that already holds such ids (an older gateway accepted them, or a page of an older
 * authority brought them) does not block promote, demote or disband.
 */

const RESERVED = [
  ["system:room-disbanded", "system:"],
  ["system:authority-claimed:2", "system:"],
  ["system:authority-lost:2", "system:"],
  ["turn:d2.r0.p0.s2.m0123456789abcdef01234567:started", "turn:"],
  [`repost:${"a".repeat(40)}`, "repost:"],
] as const;

let a: RoomNode;
let b: RoomNode;
let rpc: RpcClient;

beforeAll(async () => {
  [a, b] = await Promise.all([startRoomNode("gw-a"), startRoomNode("gw-b")]);
  rpc = await RpcClient.connect(a.gw.gateway.httpAddress);
});

afterAll(async () => {
  rpc?.close();
  await stopNodes(a, b);
});

describe("reserved event ids", () => {
  it("are refused with invalid_params naming the prefix: gRPC Send, the Append stream, JSON-RPC, rename", async () => {
    await a.call(a.client.create, { room_id: "squat", name: "Squat", members: MEMBERS });
    const stream = a.appendStream();
    for (const [eventId, prefix] of RESERVED) {
      const send = { room_id: "squat", event_id: eventId, payload: { text: "mine now" } };
      const viaSend = await expectRefusal(a.call(a.client.send, send));
      expect(viaSend.reason, eventId).toBe("invalid_params");
      expect(viaSend.message).toContain(`reserved prefix ${prefix}`);
      const viaStream = await expectRefusal(stream.send(send));
      expect([viaStream.reason, viaStream.message]).toEqual([viaSend.reason, viaSend.message]);
      const viaRpc = await rpc.error("groups.send", send);
      expect(viaRpc).toMatchObject({ code: 4111, data: { reason: "invalid_params", reserved_prefix: prefix } });
      const viaRename = await expectRefusal(a.call(a.client.rename, { room_id: "squat", name: "Mine", event_id: eventId }));
      expect(viaRename.reason).toBe("invalid_params");
    }
    await stream.close();
    // A repost message must carry a repost id (derived from the preserved event), never another reserved one.
    const repost = await expectRefusal(
      a.call(a.client.repost, {
        room_id: "squat",
        seqs: [],
        messages: [{ event_id: "system:room-disbanded", text: "x", origin: "gw-z@1 seq 3" }],
      }),
    );
    expect(repost.reason).toBe("invalid_params");
    // Nothing landed, and disband still works (and is idempotent).
    expect(a.rooms.replicaState("squat").last_seq).toBe(1);
    const disbanded = await a.call(a.client.disband, { room_id: "squat" });
    expect(disbanded).toMatchObject({ idempotent: false, event: { kind: "room.disbanded", event_id: "system:room-disbanded" } });
    expect((await a.call(a.client.disband, { room_id: "squat" })).idempotent).toBe(true);
  });

  it("already in a log (written by an older gateway, replicated from it) do not block promote, demote or disband", async () => {
    await a.call(a.client.create, { room_id: "old", name: "Old", members: MEMBERS });
    // What an older gateway accepted from a client: message.user events under the server's ids.
    for (const eventId of ["system:authority-claimed:2", "system:authority-lost:2", "system:room-disbanded", "system:room-disbanded.2"]) {
      await a.rooms.appendServer("old", {
        origin: "server",
        event_id: eventId,
        kind: "message.user",
        actor: CLIENT_ACTOR,
        payload: { text: `squatting ${eventId}` },
      });
    }
    const squatted = (await b.replicate({ room_id: "old", from: from(a), follow: true })).result.stored_seq;
    expect(squatted).toBe(5);

    const promoted = await b.call(b.client.promote, { room_id: "old", confirm: true, reason: "planned-handover" });
    expect(promoted).toMatchObject({ authority_gateway_id: "gw-b", authority_epoch: 2, claim_seq: 6 });
    const claim = b.rooms.log({ room_id: "old", since_seq: 5, limit: 1 }).events[0]!;
    expect(claim).toMatchObject({ kind: "authority.claimed", event_id: "system:authority-claimed:2.2", epoch: 2 });

    expect(await a.call(a.client.demote, { room_id: "old", observed_gateway_id: "gw-b", observed_epoch: 2 })).toMatchObject({
      idempotent: false,
    });
    const back = await a.replicate({ room_id: "old", from: from(b) });
    expect(back.result).toMatchObject({ stored_seq: 6, caught_up: true, divergences: [] });

    const disbanded = await b.call(b.client.disband, { room_id: "old" });
    expect(disbanded).toMatchObject({ idempotent: false, event: { kind: "room.disbanded", event_id: "system:room-disbanded.3", seq: 7 } });
    const again = await b.call(b.client.disband, { room_id: "old" });
    expect(again).toMatchObject({ idempotent: true, event: { seq: 7 } });
    const send = await expectRefusal(b.call(b.client.send, { room_id: "old", event_id: "late", payload: { text: "x" } }));
    expect((send as HermesError).reason).toBe("room_disbanded");
  });
});
