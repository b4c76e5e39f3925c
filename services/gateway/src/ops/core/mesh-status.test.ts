import { describe, expect, it } from "vitest";
import { assembleMeshStatus, assembleRoom, consoleUrl, type GatewayObservation, meshBots, type RoomCopy } from "./mesh-status.js";

const copy = (gateway_id: string, over: Partial<RoomCopy> = {}): RoomCopy & { gateway_id: string } => ({
  gateway_id,
  room_id: "lobby",
  name: "Lobby",
  role: "replica",
  authority: { gateway_id: "gw-1", epoch: 1 },
  stored_seq: 10,
  safety_status: "passive",
  safety_reason: null,
  fenced_by: null,
  demoted: false,
  members: [],
  ...over,
});

const gateway = (gateway_id: string, over: Partial<GatewayObservation> = {}): GatewayObservation => ({
  gateway_id,
  via: "peer",
  peer: gateway_id,
  url: `grpc://127.0.0.1:1${gateway_id.length}`,
  http_address: "127.0.0.1:7441",
  reachable: true,
  error: null,
  version: "0.1.0",
  uptime_seconds: 5,
  relay_state: "connected",
  rooms: [],
  bots: [],
  ...over,
});

describe("assembleRoom", () => {
  it("leads with the unfenced authority and measures each replica against its stored seq", () => {
    const room = assembleRoom([
      copy("gw-2", { stored_seq: 7 }),
      copy("gw-1", { role: "authority", stored_seq: 12 }),
      copy("gw-3", { stored_seq: 12 }),
    ]);
    expect(room.authority).toEqual({ gateway_id: "gw-1", epoch: 1 });
    expect(room.latest_seq).toBe(12);
    expect(room.copies.map((c) => [c.gateway_id, c.lag])).toEqual([
      ["gw-1", 0],
      ["gw-2", 5],
      ["gw-3", 0],
    ]);
    expect(room.safety).toBe("lagging");
    expect(room.safety_detail).toBe("gw-2 is 5 behind");
  });

  it("after a promote the new authority leads and the old one, fenced, is the alarm", () => {
    const fence = { gateway_id: "gw-2", epoch: 2 };
    const room = assembleRoom([
      copy("gw-1", { role: "authority", stored_seq: 12, safety_status: "fenced", fenced_by: fence }),
      copy("gw-2", { role: "authority", authority: fence, stored_seq: 13 }),
    ]);
    expect(room.authority).toEqual(fence);
    expect(room.copies[0]!.gateway_id).toBe("gw-2");
    expect(room.safety).toBe("fenced");
  });

  it("two unfenced authorities are a split brain", () => {
    const room = assembleRoom([
      copy("gw-1", { role: "authority" }),
      copy("gw-2", { role: "authority", authority: { gateway_id: "gw-2", epoch: 2 } }),
    ]);
    expect(room.safety).toBe("split_brain");
    expect(room.authority.gateway_id).toBe("gw-2");
  });

  it("without the authority's copy the newest seq a replica heard of is the latest; with none it is unknown", () => {
    expect(assembleRoom([copy("gw-2", { stored_seq: 3, known_latest_seq: 9 })])).toMatchObject({
      latest_seq: 9,
      authority_observed: false,
    });
    const blind = assembleRoom([copy("gw-2", { stored_seq: 3 })]);
    expect(blind.latest_seq).toBeNull();
    expect(blind.copies[0]!.lag).toBeNull();
    expect(blind.safety).toBe("unknown");
  });
});

describe("assembleMeshStatus", () => {
  it("merges a peer that is also on the relay, keeps this gateway first and says who leads what", () => {
    const self = gateway("gw-1", { via: "self", peer: null, rooms: [copy("gw-1", { role: "authority", stored_seq: 4 })] });
    const status = assembleMeshStatus({
      observed_at: "2026-01-01T00:00:00.000Z",
      self,
      others: [
        gateway("gw-3", { via: "relay", peer: null, url: null, http_address: null, rooms: null, reachable: true }),
        gateway("gw-2", { rooms: [copy("gw-2", { stored_seq: 4 })] }),
        gateway("gw-3", { reachable: false, error: "connection refused", rooms: null }),
      ],
      relay: { url: "grpc://127.0.0.1:7450", connection: "gw-1", state: "connected", roster_epoch: 3 },
      coordinator: null,
    });
    expect(status.gateways.map((g) => [g.gateway_id, g.via, g.reachable])).toEqual([
      ["gw-1", "self", true],
      ["gw-2", "peer", true],
      ["gw-3", "peer", true],
    ]);
    expect(status.gateways[2]).toMatchObject({ error: null, peer: "gw-3" });
    expect(status.gateways[0]!.leads).toEqual(["lobby@1"]);
    expect(status.rooms[0]!.safety).toBe("ok");
  });
});

describe("meshBots and consoleUrl", () => {
  it("lists each bot once per gateway, this gateway's first", () => {
    const bot = (handle: string) => ({ handle, display_name: handle, title: "", description: "", active: null });
    const bots = meshBots({
      observed_at: "",
      self: gateway("gw-1", { via: "self", bots: [{ ...bot("alice"), active: true }] }),
      others: [gateway("gw-2", { via: "relay", bots: [bot("carol")] }), gateway("gw-2", { bots: [bot("carol")] })],
      relay: null,
      coordinator: null,
    });
    expect(bots.map((b) => `${b.handle}@${b.gateway_id}:${b.local}`)).toEqual(["alice@gw-1:true", "carol@gw-2:false"]);
  });

  it("reaches a wildcard bind on the gRPC URL's host", () => {
    expect(consoleUrl("127.0.0.1:7441", null)).toBe("http://127.0.0.1:7441/");
    expect(consoleUrl("0.0.0.0:7441", "grpc://10.0.0.5:7440")).toBe("http://10.0.0.5:7441/");
    expect(consoleUrl("::1:7441", null)).toBe("http://[::1]:7441/");
    expect(consoleUrl(null, null)).toBeNull();
  });
});
