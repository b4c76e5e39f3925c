import { credentials } from "@grpc/grpc-js";
import { authMetadata, type HermesError } from "@hermes/common";
import { type ReplicateProgress, RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import { TEST_KEY, type TestGateway } from "../support/gateway-harness.js";
import { MEMBERS, startRelayedPair } from "../support/rooms-fixtures.js";

/**
 * A room whose authority sits on a gateway nobody dials ("home", behind NAT: the replica is never
 * given its address, only its relay connection) is replicated onto "vps" through the relay
 * tunnel: catch-up, then the live tail, and a member's send through the tunnel to the authority.
 */

let relay: TestRelay;
let home: TestGateway;
let vps: TestGateway;

beforeAll(async () => {
  relay = await startTestRelay();
  ({ home, vps } = await startRelayedPair(relay));
});

afterAll(async () => {
  await vps?.destroy();
  await home?.destroy();
  await relay?.destroy();
});

function seqs(t: TestGateway, roomId: string): number {
  return t.gateway.rooms.replicaState(roomId).last_seq;
}

describe("rooms through the relay tunnel", () => {
  it("replicates a room from a NAT'd authority (relay://home), then follows its live tail", async () => {
    home.gateway.rooms.create({ room_id: "nat-room", name: "Behind NAT", members: MEMBERS });
    for (let i = 0; i < 25; i++)
      await home.gateway.rooms.send({ room_id: "nat-room", event_id: `e${i}`, payload: { text: `message ${i}` } });
    const headAtHome = seqs(home, "nat-room");

    const result = await vps.gateway.rooms.replicate({ room_id: "nat-room", from: { url: "relay://home" }, follow: true });
    expect(result).toMatchObject({ room_id: "nat-room", stored_seq: headAtHome, caught_up: true, following: true });
    expect(result.authority).toEqual({ gateway_id: "home", epoch: 1 });

    // The live tail arrives through the tunnel's stream.
    for (let i = 25; i < 30; i++)
      await home.gateway.rooms.send({ room_id: "nat-room", event_id: `e${i}`, payload: { text: `message ${i}` } });
    await eventually(() => expect(seqs(vps, "nat-room")).toBe(seqs(home, "nat-room")), { timeoutMs: 15_000 });
    const state = vps.gateway.rooms.replicaState("nat-room");
    expect(state).toMatchObject({ role: "replica", caught_up: true });
    expect(state.following?.source).toContain("relay://home");
    // Byte-for-byte the same log (the hash chain is checked on apply; compare the heads too).
    const a = home.gateway.rooms.log({ room_id: "nat-room", since_seq: seqs(home, "nat-room") - 1, limit: 1 });
    const b = vps.gateway.rooms.log({ room_id: "nat-room", since_seq: seqs(vps, "nat-room") - 1, limit: 1 });
    expect(b.events[0]?.hash).toBe(a.events[0]?.hash);
  });

  it("works through the gRPC API the CLI uses (groups replicate ROOM --from relay://home)", async () => {
    home.gateway.rooms.create({ room_id: "nat-room-2", name: "Second", members: MEMBERS });
    await home.gateway.rooms.send({ room_id: "nat-room-2", event_id: "x1", payload: { text: "one" } });
    const client = new RoomServiceClient(vps.gateway.grpcAddress, credentials.createInsecure());
    try {
      const last = await new Promise<ReplicateProgress>((resolve, reject) => {
        const progress: ReplicateProgress[] = [];
        const stream = client.replicate(
          { room_id: "nat-room-2", from: { url: "", key: "", peer: "relay://home" }, follow: false },
          authMetadata(TEST_KEY),
        );
        stream.on("data", (p: ReplicateProgress) => progress.push(p));
        stream.on("error", reject);
        stream.on("end", () => resolve(progress.at(-1)!));
      });
      expect(last.result).toMatchObject({ stored_seq: seqs(home, "nat-room-2"), caught_up: true });
    } finally {
      client.close();
    }
  });

  it("carries a member's send to the authority, and refuses what the authority refuses", async () => {
    const tunnel = vps.gateway.relay!.tunnel;
    const sent = (await tunnel.call("home", "groups.send", {
      room_id: "nat-room",
      event_id: "from-vps",
      payload: { text: "hello from the vps" },
    })) as {
      event: { seq: number };
    };
    expect(sent.event.seq).toBe(seqs(home, "nat-room"));
    await eventually(() => expect(seqs(vps, "nat-room")).toBe(seqs(home, "nat-room")), { timeoutMs: 15_000 });
    // The server's own event ids are refused through the tunnel as over every other transport.
    const squat = await tunnel
      .call("home", "groups.send", { room_id: "nat-room", event_id: "system:room-disbanded", payload: { text: "mine" } })
      .catch((e: HermesError) => e);
    expect(squat).toMatchObject({ reason: "invalid_params", data: { reserved_prefix: "system:" } });
    const unknown = await tunnel.call("home", "groups.log", { room_id: "no-such-room" }).catch((e: HermesError) => e);
    expect((unknown as HermesError).reason).toBe("not_found");
    const offline = await vps.gateway.rooms.replicate({ room_id: "other", from: { url: "relay://nobody" } }).catch((e: HermesError) => e);
    expect((offline as HermesError).reason).toBe("unavailable");
  });
});
