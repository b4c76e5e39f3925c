import type { ServiceError } from "@grpc/grpc-js";
import { authMetadata, type HermesError, isErrorReason, unaryCall } from "@hermes/common";
import type { RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { MAX_FRAME_BYTES } from "../../src/api/rpc/rpc-server.js";
import { roomMethodNames } from "../../src/rooms/api/methods.js";
import { roomInvariantViolations } from "../../src/rooms/core/index.js";
import { TEST_KEY } from "../support/gateway-harness.js";
import { MEMBERS, type RoomNode, startRoomNode, stopNodes } from "../support/rooms-fixtures.js";
import { RpcClient } from "../support/rpc-client.js";

/**
 * Bad input (issue 3): fuzz /rpc and RoomService with fast-check — malformed JSON, wrong types,
 * unknown methods, oversized payloads, out-of-range cursors. The gateway never crashes, every answer
 * is a typed error with a reason (or a real result), and every room still satisfies every invariant
 * between its state and its log afterwards (nothing half-written).
 */

const RUNS = Number(process.env.ROOMS_FUZZ_RUNS ?? 250);
let node: RoomNode;

beforeAll(async () => {
  node = await startRoomNode("gw-fuzz");
  await node.call(node.client.create, { room_id: "main", name: "Main", members: MEMBERS });
  for (let i = 0; i < 20; i++) await node.call(node.client.send, { room_id: "main", event_id: `seed${i}`, payload: { text: `seed ${i}` } });
});

afterAll(async () => {
  await stopNodes(node);
});

/** Every room on the gateway, checked against its whole stored log. */
function assertAllRoomsConsistent(): void {
  const { store } = node.rooms;
  store.dropCache();
  const ids = store.roomIds({ limit: 500, offset: 0, includeDisbanded: true });
  for (const id of ids) {
    const state = store.state(id)!;
    const events = store.events(id, 0, 10_000_000);
    expect(roomInvariantViolations(state, events)).toEqual([]);
  }
}

const roomIds = fc.oneof(fc.constant("main"), fc.constant("nope"), fc.string({ maxLength: 140 }), fc.constant(""));
const weirdNumber = fc.oneof(
  fc.integer({ min: -5, max: 50 }),
  fc.constant(Number.MAX_SAFE_INTEGER),
  fc.constant(2 ** 64),
  fc.constant(-1),
  fc.double({ noNaN: false }),
  fc.constant(1.5),
);
const weirdValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  weirdNumber,
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }),
);
const hugeText = fc.constantFrom("x".repeat(64 * 1024 + 1), "é".repeat(40_000), "y".repeat(300 * 1024));
const methods = roomMethodNames();

const params = fc.oneof(
  fc.record(
    {
      room_id: fc.oneof(roomIds, weirdValue),
      event_id: fc.oneof(fc.string({ maxLength: 140 }), weirdValue),
      payload: fc.oneof(
        fc.record({ text: fc.oneof(fc.string(), hugeText, weirdValue) }, { requiredKeys: [] }),
        fc.record({ text: fc.string(), thread_id: weirdValue, extra: weirdValue }, { requiredKeys: ["text"] }),
        weirdValue,
      ),
      since_seq: weirdNumber,
      limit: weirdNumber,
      max_bytes: weirdNumber,
      expected_latest_seq: weirdNumber,
      name: fc.oneof(fc.string({ maxLength: 300 }), weirdValue),
      members: fc.oneof(
        fc.constant(MEMBERS),
        fc.array(fc.record({ member_id: weirdValue, profile: weirdValue }), { maxLength: 8 }),
        weirdValue,
      ),
      confirm: fc.oneof(fc.boolean(), weirdValue),
      observed_gateway_id: weirdValue,
      observed_epoch: weirdNumber,
      seqs: fc.oneof(fc.array(weirdNumber, { maxLength: 4 }), weirdValue),
      from: fc.oneof(fc.string({ maxLength: 30 }), fc.record({ url: fc.string({ maxLength: 30 }), key: weirdValue })),
      subscription: weirdValue,
    },
    { requiredKeys: [] },
  ),
  weirdValue,
);

describe("fuzzing /rpc", () => {
  it("answers every frame with a result or a typed error, and never corrupts a room", async () => {
    const rpc = await RpcClient.connect(node.gw.gateway.httpAddress);
    let id = 0;
    const frames = fc.oneof(
      { weight: 6, arbitrary: fc.record({ method: fc.oneof(fc.constantFrom(...methods), fc.string({ maxLength: 30 })), params }) },
      { weight: 1, arbitrary: fc.string({ maxLength: 200 }).map((raw) => ({ raw })) },
      { weight: 1, arbitrary: fc.jsonValue().map((value) => ({ raw: JSON.stringify(value) })) },
    );
    await fc.assert(
      fc.asyncProperty(frames, async (frame) => {
        const requestId = ++id;
        const text =
          "raw" in frame ? frame.raw : JSON.stringify({ jsonrpc: "2.0", id: requestId, method: frame.method, params: frame.params });
        let answer: unknown;
        try {
          answer = await rpc.sendRaw(text);
        } catch {
          // A raw frame that is a notification-only batch, or a notification, has no answer (JSON-RPC 2.0).
          if ("raw" in frame) return;
          throw new Error(`no answer to ${text.slice(0, 200)}`);
        }
        for (const a of Array.isArray(answer) ? answer : [answer]) {
          const r = a as { jsonrpc: string; result?: unknown; error?: { code: number; data?: { reason?: unknown } } };
          expect(r.jsonrpc).toBe("2.0");
          if (r.error) {
            expect(typeof r.error.code).toBe("number");
            expect(isErrorReason(r.error.data?.reason), JSON.stringify(r.error)).toBe(true);
          } else expect("result" in r).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
    // Still alive and answering.
    expect(await rpc.call("groups.capabilities")).toMatchObject({ gateway_id: "gw-fuzz" });
    rpc.close();
    assertAllRoomsConsistent();
  }, 120_000);

  it("closes the connection on an oversized frame (1009) and keeps serving others", async () => {
    const ws = new WebSocket(`ws://${node.gw.gateway.httpAddress}/rpc`, { headers: { authorization: `Bearer ${TEST_KEY}` } });
    await new Promise((r) => ws.once("open", r));
    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    ws.send(Buffer.alloc(MAX_FRAME_BYTES + 10, 0x20));
    expect(await closed).toBe(1009);
    const rpc = await RpcClient.connect(node.gw.gateway.httpAddress);
    expect(await rpc.call("groups.capabilities")).toMatchObject({ gateway_id: "gw-fuzz" });
    rpc.close();
  });
});

type Unary = (req: never, md: ReturnType<typeof authMetadata>, cb: (err: ServiceError | null, res: unknown) => void) => unknown;

describe("fuzzing RoomService over gRPC", () => {
  it("answers every request with a result or an error carrying a Hermes reason", async () => {
    const c = node.client;
    const str = fc.oneof(fc.string({ maxLength: 140 }), fc.constantFrom("main", "nope", ""));
    const u64 = fc.oneof(fc.nat(100), fc.constant(Number.MAX_SAFE_INTEGER), fc.maxSafeNat());
    const member = fc.record({ member_id: str, profile: str, gateway_id: fc.option(str, { nil: undefined }) });
    const requests: fc.Arbitrary<[string, unknown]>[] = [
      fc
        .record({ room_id: fc.option(str, { nil: undefined }), name: str, members: fc.array(member, { maxLength: 8 }) })
        .map((r) => ["create", r]),
      fc
        .record({
          room_id: str,
          event_id: str,
          payload: fc.option(fc.record({ text: fc.oneof(fc.string(), hugeText), thread_id: fc.option(str, { nil: undefined }) }), {
            nil: undefined,
          }),
          expected_latest_seq: fc.option(u64, { nil: undefined }),
        })
        .map((r) => ["send", r]),
      fc
        .record({
          room_id: str,
          since_seq: u64,
          limit: fc.option(fc.nat(10_000), { nil: undefined }),
          max_bytes: fc.option(fc.nat(2 ** 32 - 1), { nil: undefined }),
          packed: fc.boolean(),
          known_authority: fc.option(fc.record({ gateway_id: str, epoch: fc.nat(3) }), { nil: undefined }),
        })
        .map((r) => ["log", r]),
      fc.record({ room_id: str }).map((r) => ["replicaState", r]),
      fc.record({ room_id: str, include_disbanded: fc.boolean() }).map((r) => ["state", r]),
      fc
        .record({ room_id: str, confirm: fc.boolean(), reason: fc.option(fc.string({ maxLength: 300 }), { nil: undefined }) })
        .map((r) => ["promote", r]),
      fc.record({ room_id: str, observed_gateway_id: str, observed_epoch: u64 }).map((r) => ["demote", r]),
      fc
        .record({ room_id: str, name: fc.string({ maxLength: 300 }), event_id: fc.option(str, { nil: undefined }) })
        .map((r) => ["rename", r]),
      fc
        .record({ limit: fc.option(fc.nat(1000), { nil: undefined }), offset: fc.nat(10), include_disbanded: fc.boolean() })
        .map((r) => ["list", r]),
      fc.record({ room_id: str }).map((r) => ["divergence", r]),
      fc
        .record({
          room_id: str,
          seqs: fc.array(u64, { maxLength: 3 }),
          divergence_id: fc.option(u64, { nil: undefined }),
          messages: fc.array(
            fc.record({
              event_id: str,
              text: fc.oneof(fc.string(), hugeText),
              thread_id: fc.option(str, { nil: undefined }),
              origin: fc.string({ maxLength: 300 }),
            }),
            { maxLength: 3 },
          ),
        })
        .map((r) => ["repost", r]),
      fc.record({ room_id: str }).map((r) => ["releaseSafety", r]),
    ];
    await fc.assert(
      fc.asyncProperty(fc.oneof(...requests), async ([method, request]) => {
        const fn = (c as unknown as Record<string, Unary>)[method]!;
        try {
          await unaryCall((cb) => fn.call(c as RoomServiceClient, request as never, authMetadata(TEST_KEY), (err, res) => cb(err, res)));
        } catch (err) {
          const e = err as HermesError;
          const cause = e.cause as ServiceError | undefined;
          expect(cause?.metadata?.get("hermes-reason")[0], `${method} ${e.message}`).toBe(e.reason);
        }
      }),
      { numRuns: RUNS },
    );
    expect(await node.call(node.client.capabilities, {})).toMatchObject({ gateway_id: "gw-fuzz" });
    assertAllRoomsConsistent();
  }, 120_000);
});
