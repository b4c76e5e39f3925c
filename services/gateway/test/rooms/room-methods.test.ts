import { Client, credentials, type ServiceError } from "@grpc/grpc-js";
import { authMetadata, fromServiceError, type HermesError, unaryCall } from "@hermes/common";
import {
  CapabilitiesRequest,
  CreateRoomRequest,
  DemoteRequest,
  ListRoomsRequest,
  LogRequest,
  type MemberTurnRequest,
  PromoteRequest,
  RenameRequest,
  ReplicateRequest,
  RepostRequest,
  RoomMemberServiceClient,
  RoomRequest,
  RoomServiceService,
  SendRequest,
  StateRequest,
  SubscribeRequest,
} from "@hermes/proto/hermes/v1/rooms";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import { ROOM_METHODS, type RoomMethod, roomMethodNames } from "../../src/rooms/api/methods.js";
import { MAX_EPOCH } from "../../src/rooms/core/index.js";
import { memberTurnRequest } from "../support/discussion-fixtures.js";
import { TEST_KEY, type TestGateway } from "../support/gateway-harness.js";
import { MEMBERS, startRelayedPair } from "../support/rooms-fixtures.js";
import { RpcClient, type RpcError } from "../support/rpc-client.js";

/**
 * The room method table drives every transport: each method of it is reachable over gRPC,
 * JSON-RPC and (when the table marks it tunnelled) the relay tunnel, gives the same outcome over
 * each, and the same invalid params are refused with the same typed reason and field over each.
 * The tunnel used to parse with its own looser schemas (an epoch above MAX_EPOCH fenced the room).
 */

type Transport = "rpc" | "grpc" | "tunnel";
type Outcome = { ok: true } | { reason: string; field: unknown };

interface MessageFns {
  fromPartial(object: never): unknown;
}

interface Case {
  /** The gRPC request message of the method (its JSON params are turned into one with fromPartial). */
  grpcRequest?: MessageFns;
  /** Params of a call that reaches the rooms service, per transport (ids differ where a call writes). */
  valid(transport: Transport): Record<string, unknown> | Promise<Record<string, unknown>>;
  /** What that call answers: ok, or the reason of its refusal (the same over every transport). */
  expect: "ok" | string;
  invalid: { params: Record<string, unknown>; reason: string; field: string }[];
}

const ROOM = "tbl";
const BAD_ROOM = { room_id: "bad id!" };
const badRoom = { params: BAD_ROOM, reason: "invalid_params", field: "room_id" };
const tooHighEpoch = { gateway_id: "intruder", epoch: MAX_EPOCH + 1 };
const REPOST_DIGITS: Record<Transport, string> = { rpc: "1", grpc: "2", tunnel: "3" };
const repostId = (t: Transport) => `repost:${REPOST_DIGITS[t].repeat(40)}`;

let relay: TestRelay;
let home: TestGateway;
let vps: TestGateway;
let rpc: RpcClient;
let grpc: Client;

const CASES: Record<string, Case> = {
  "groups.capabilities": { grpcRequest: CapabilitiesRequest, valid: () => ({}), expect: "ok", invalid: [] },
  "groups.create": {
    grpcRequest: CreateRoomRequest,
    valid: () => ({ name: "Created", members: MEMBERS }),
    expect: "ok",
    invalid: [{ params: { name: "", members: MEMBERS }, reason: "invalid_params", field: "name" }],
  },
  "groups.send": {
    grpcRequest: SendRequest,
    valid: (t) => ({ room_id: ROOM, event_id: `send-${t}`, payload: { text: `via ${t}` } }),
    expect: "ok",
    invalid: [
      {
        params: { room_id: ROOM, event_id: "system:room-disbanded", payload: { text: "mine" } },
        reason: "invalid_params",
        field: "event_id",
      },
      { params: { room_id: "bad id!", event_id: "x", payload: { text: "x" } }, reason: "invalid_params", field: "room_id" },
    ],
  },
  "groups.log": {
    grpcRequest: LogRequest,
    valid: () => ({ room_id: ROOM, since_seq: 0, limit: 5 }),
    expect: "ok",
    invalid: [
      { params: { room_id: ROOM, known_authority: tooHighEpoch }, reason: "invalid_params", field: "known_authority.epoch" },
      { params: { room_id: ROOM, limit: 0 }, reason: "invalid_params", field: "limit" },
      { params: BAD_ROOM, reason: "invalid_params", field: "room_id" },
    ],
  },
  "groups.subscribe": {
    grpcRequest: SubscribeRequest,
    valid: () => ({ room_id: ROOM, since_seq: 0 }),
    expect: "ok",
    invalid: [
      { params: { room_id: ROOM, known_authority: tooHighEpoch }, reason: "invalid_params", field: "known_authority.epoch" },
      { params: BAD_ROOM, reason: "invalid_params", field: "room_id" },
    ],
  },
  "groups.unsubscribe": {
    valid: async () => ({ subscription: (await rpc.call<{ subscription: string }>("groups.subscribe", { room_id: ROOM })).subscription }),
    expect: "ok",
    invalid: [{ params: { subscription: 5 }, reason: "invalid_params", field: "subscription" }],
  },
  "groups.replicate": {
    grpcRequest: ReplicateRequest,
    valid: () => ({ room_id: "from-vps", from: { url: `grpc://${vps.gateway.grpcAddress}`, key: TEST_KEY } }),
    expect: "ok",
    invalid: [{ params: { room_id: "from-vps" }, reason: "invalid_params", field: "from" }],
  },
  "groups.replica_state": { grpcRequest: RoomRequest, valid: () => ({ room_id: ROOM }), expect: "ok", invalid: [badRoom] },
  "groups.promote": {
    grpcRequest: PromoteRequest,
    valid: () => ({ room_id: ROOM, confirm: false }),
    expect: "confirm_required",
    invalid: [badRoom],
  },
  "groups.demote": {
    grpcRequest: DemoteRequest,
    valid: () => ({ room_id: ROOM, observed_gateway_id: "gw-x", observed_epoch: 1 }),
    expect: "epoch_regression",
    invalid: [
      { params: { room_id: ROOM, observed_gateway_id: "gw-x", observed_epoch: 0 }, reason: "invalid_params", field: "observed_epoch" },
    ],
  },
  "groups.state": { grpcRequest: StateRequest, valid: () => ({ room_id: ROOM }), expect: "ok", invalid: [badRoom] },
  "groups.stop": { grpcRequest: RoomRequest, valid: () => ({ room_id: ROOM }), expect: "ok", invalid: [badRoom] },
  "groups.rename": {
    grpcRequest: RenameRequest,
    valid: (t) => ({ room_id: ROOM, name: `Renamed over ${t}` }),
    expect: "ok",
    invalid: [{ params: { room_id: ROOM, name: "" }, reason: "invalid_params", field: "name" }],
  },
  "groups.disband": { grpcRequest: RoomRequest, valid: (t) => ({ room_id: `gone-${t}` }), expect: "ok", invalid: [badRoom] },
  "groups.list": {
    grpcRequest: ListRoomsRequest,
    valid: () => ({}),
    expect: "ok",
    invalid: [{ params: { limit: 0 }, reason: "invalid_params", field: "limit" }],
  },
  "groups.divergence": { grpcRequest: RoomRequest, valid: () => ({ room_id: ROOM }), expect: "ok", invalid: [badRoom] },
  "groups.repost": {
    grpcRequest: RepostRequest,
    valid: (t) => ({ room_id: ROOM, messages: [{ event_id: repostId(t), text: "again", origin: "gw-z@1 seq 2" }] }),
    expect: "ok",
    invalid: [
      {
        params: { room_id: ROOM, seqs: [2], messages: [{ event_id: repostId("rpc"), text: "x", origin: "o" }] },
        reason: "invalid_params",
        field: "seqs",
      },
    ],
  },
  "groups.release": { grpcRequest: RoomRequest, valid: () => ({ room_id: ROOM }), expect: "ok", invalid: [badRoom] },
};

function outcomeOf(err: unknown): Outcome {
  const e = err as HermesError;
  return { reason: e.reason, field: e.data?.field };
}

function grpcMethodOf(method: RoomMethod): keyof typeof RoomServiceService | undefined {
  return method.kind === "unsubscribe" ? undefined : method.grpc?.method;
}

function tunnelled(method: RoomMethod): boolean {
  return (method.kind === "unary" || method.kind === "subscription") && method.tunnel !== undefined;
}

async function viaRpc(method: RoomMethod, params: Record<string, unknown>): Promise<Outcome> {
  try {
    await rpc.call(method.name, params);
    return { ok: true };
  } catch (err) {
    const e = err as RpcError;
    if (e.data.reason === "invalid_params") expect(e.code, method.name).toBe(method.code ?? -32602);
    return { reason: e.data.reason, field: e.data.field };
  }
}

async function viaGrpc(method: RoomMethod, params: Record<string, unknown>): Promise<Outcome> {
  const name = grpcMethodOf(method)!;
  const def = RoomServiceService[name];
  const request = CASES[method.name]!.grpcRequest!.fromPartial(params as never);
  const serialize = def.requestSerialize as (value: unknown) => Buffer;
  const deserialize = def.responseDeserialize as (value: Buffer) => unknown;
  try {
    if (!def.responseStream) {
      await unaryCall((cb) => grpc.makeUnaryRequest(def.path, serialize, deserialize, request, authMetadata(TEST_KEY), {}, cb));
    } else {
      // Server streams: a subscription answers with its handshake page, a replicate with its last message.
      await new Promise<void>((resolve, reject) => {
        const call = grpc.makeServerStreamRequest(def.path, serialize, deserialize, request, authMetadata(TEST_KEY));
        call.on("data", () => {
          if (name !== "subscribe") return;
          call.cancel();
          resolve();
        });
        call.on("error", (err: ServiceError) => (err.code === 1 ? resolve() : reject(fromServiceError(err))));
        call.on("end", resolve);
      });
    }
    return { ok: true };
  } catch (err) {
    return outcomeOf(err);
  }
}

async function viaTunnel(method: RoomMethod, params: Record<string, unknown>): Promise<Outcome> {
  const tunnel = vps.gateway.relay!.tunnel;
  try {
    if (method.kind === "subscription") {
      const controller = new AbortController();
      for await (const item of tunnel.stream("home", method.name, params, controller.signal)) {
        expect(item).toHaveProperty("page_b64");
        controller.abort();
      }
    } else {
      await tunnel.call("home", method.name, params);
    }
    return { ok: true };
  } catch (err) {
    return outcomeOf(err);
  }
}

function transportsOf(method: RoomMethod): [Transport, (params: Record<string, unknown>) => Promise<Outcome>][] {
  const all: [Transport, (params: Record<string, unknown>) => Promise<Outcome>][] = [["rpc", (p) => viaRpc(method, p)]];
  if (grpcMethodOf(method)) all.push(["grpc", (p) => viaGrpc(method, p)]);
  if (tunnelled(method)) all.push(["tunnel", (p) => viaTunnel(method, p)]);
  return all;
}

beforeAll(async () => {
  relay = await startTestRelay();
  ({ home, vps } = await startRelayedPair(relay));
  home.gateway.rooms.create({ room_id: ROOM, name: "Table", members: MEMBERS });
  for (const t of ["rpc", "grpc"]) home.gateway.rooms.create({ room_id: `gone-${t}`, name: "Gone", members: MEMBERS });
  vps.gateway.rooms.create({ room_id: "from-vps", name: "Source", members: MEMBERS });
  await home.gateway.rooms.send({ room_id: ROOM, event_id: "first", payload: { text: "first" } });
  rpc = await RpcClient.connect(home.gateway.httpAddress);
  grpc = new Client(home.gateway.grpcAddress, credentials.createInsecure());
}, 60_000);

afterAll(async () => {
  rpc?.close();
  grpc?.close();
  await vps?.destroy();
  await home?.destroy();
  await relay?.destroy();
});

describe("the room method table", () => {
  it("has a test case for every method, and covers every RoomService method (Append is the stream form of groups.send)", () => {
    expect(Object.keys(CASES).sort()).toEqual(roomMethodNames().sort());
    const fromTable = ROOM_METHODS.flatMap((m) => grpcMethodOf(m) ?? []);
    expect([...fromTable, "append"].sort()).toEqual(Object.keys(RoomServiceService).sort());
  });

  it("is what capabilities lists, over JSON-RPC and gRPC", async () => {
    expect((await rpc.call<{ methods: string[] }>("groups.capabilities")).methods).toEqual(roomMethodNames());
    const caps = await unaryCall<{ methods: string[] }>((cb) =>
      grpc.makeUnaryRequest(
        RoomServiceService.capabilities.path,
        RoomServiceService.capabilities.requestSerialize,
        RoomServiceService.capabilities.responseDeserialize,
        {},
        authMetadata(TEST_KEY),
        {},
        cb,
      ),
    );
    expect(caps.methods).toEqual(roomMethodNames());
  });

  it("is what the relay tunnel serves: the tunnelled methods (and member turns); the others are method_not_found", async () => {
    const names = ROOM_METHODS.filter(tunnelled).map((m) => m.name);
    expect(home.gateway.relay!.tunnelHandlers.methods()).toEqual([...names, "groups.member_turn"].sort());
    for (const method of ROOM_METHODS.filter((m) => !tunnelled(m))) {
      const refused = await vps.gateway.relay!.tunnel.call("home", method.name, {}).catch((e: HermesError) => e);
      expect((refused as HermesError).reason, method.name).toBe("method_not_found");
    }
  });

  describe.each(ROOM_METHODS.map((m) => [m.name, m] as const))("%s", (name, method) => {
    const kase = CASES[name]!;

    it("reaches the rooms service over each of its transports, with the same outcome", async () => {
      for (const [transport, call] of transportsOf(method)) {
        const outcome = await call(await kase.valid(transport));
        expect("ok" in outcome ? "ok" : outcome.reason, `${name} over ${transport}`).toBe(kase.expect);
      }
    });

    if (kase.invalid.length === 0) return;
    it("refuses the same invalid params with the same reason and field over each transport", async () => {
      for (const bad of kase.invalid) {
        for (const [transport, call] of transportsOf(method)) {
          expect(await call(bad.params), `${name} ${JSON.stringify(bad.params)} over ${transport}`).toEqual({
            reason: bad.reason,
            field: bad.field,
          });
        }
      }
    });
  });

  it("lost nothing to the invalid calls: no epoch above MAX_EPOCH fenced the room", () => {
    const state = home.gateway.rooms.state(ROOM).room;
    expect(state).toMatchObject({ safety_status: "passive", fenced_by: null, authority_epoch: 1 });
  });
});

describe("the member turn definition", () => {
  async function overBoth(req: MemberTurnRequest): Promise<{ grpc: unknown; tunnel: unknown }> {
    const client = new RoomMemberServiceClient(home.gateway.grpcAddress, credentials.createInsecure());
    const refusal = (e: HermesError) => ({ reason: e.reason, field: e.data?.field, message: e.message });
    try {
      const grpcOutcome = await unaryCall((cb) => client.runMemberTurn(req, authMetadata(TEST_KEY), cb)).catch(refusal);
      const tunnelOutcome = await (async () => {
        for await (const item of vps.gateway.relay!.tunnel.stream("home", "groups.member_turn", { ...req })) return item;
      })().catch(refusal);
      return { grpc: grpcOutcome, tunnel: tunnelOutcome };
    } finally {
      client.close();
    }
  }

  it("refuses the same request the same way over gRPC RunMemberTurn and the tunnel's groups.member_turn", async () => {
    for (const [req, field] of [
      [memberTurnRequest({ authority: undefined }), "authority"],
      [memberTurnRequest({ authority: { gateway_id: "gw-a", epoch: 0 } }), "authority.epoch"],
      [memberTurnRequest({ turn_id: "bad id!" }), "turn_id"],
    ] as const) {
      const { grpc: viaGrpc, tunnel: viaTunnel } = await overBoth(req);
      expect(viaGrpc, field).toMatchObject({ reason: "invalid_params", field });
      expect(viaTunnel, field).toEqual(viaGrpc);
    }
    // A well-formed turn for a member that lives on another gateway reaches the member-turn server on both.
    const { grpc: viaGrpc, tunnel: viaTunnel } = await overBoth(memberTurnRequest());
    expect(viaGrpc).toMatchObject({ reason: "unknown_target" });
    expect(viaTunnel).toEqual(viaGrpc);
  });
});
