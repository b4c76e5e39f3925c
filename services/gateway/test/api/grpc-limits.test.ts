import { type ClientHttp2Session, type ClientHttp2Stream, connect as connectHttp2 } from "node:http2";
import { connect as connectTcp, type Socket } from "node:net";
import { GRPC_SERVER_LIMITS } from "@hermes/common";
import { HealthCheckResponse_ServingStatus, HealthClient } from "@hermes/proto/grpc/health/v1/health";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { MEMBERS, type RoomNode, startRoomNode, stopNodes } from "../support/rooms-fixtures.js";

/**
 * The gateway's gRPC port bounds what a client can hold: a TCP connection that never speaks
 * HTTP/2 is closed, keyless health Watch streams are capped per server, and the per-connection
 * gate on unary calls neither loses nor stalls a burst of calls on one connection.
 */

let node: RoomNode;

beforeAll(async () => {
  node = await startRoomNode("gw-limits");
});
afterAll(async () => {
  await stopNodes(node);
});

function grpcHostPort(): { host: string; port: number } {
  const [host, port] = node.gw.gateway.grpcAddress.split(":");
  return { host: host!, port: Number(port) };
}

/** Resolves when the gateway closes `socket` (read, so the close is seen), rejects after `ms`. */
function closedByServer(socket: Socket, ms: number): Promise<void> {
  socket.resume();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway kept the connection open for ${ms} ms`)), ms);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe("HTTP/2 preface deadline", () => {
  it("closes connections that send no preface or only part of it, and keeps serving", async () => {
    const { host, port } = grpcHostPort();
    const silent = connectTcp(port, host);
    const partial = connectTcp(port, host, () => partial.write("PRI * HTTP/2.0\r\n"));
    for (const s of [silent, partial]) s.on("error", () => {});
    const limit = GRPC_SERVER_LIMITS.prefaceTimeoutMs + 3000;
    await Promise.all([closedByServer(silent, limit), closedByServer(partial, limit)]);

    const health = node.gw.client(HealthClient);
    const answer = await new Promise((resolve, reject) => health.check({ service: "" }, (err, res) => (err ? reject(err) : resolve(res))));
    expect(answer).toMatchObject({ status: HealthCheckResponse_ServingStatus.SERVING });
  }, 20_000);
});

function watch(session: ClientHttp2Session): { stream: ClientHttp2Stream; headers: Promise<Record<string, unknown>> } {
  const stream = session.request({
    ":method": "POST",
    ":path": "/grpc.health.v1.Health/Watch",
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.on("error", () => {});
  stream.resume();
  stream.end(Buffer.from([0, 0, 0, 0, 0])); // an empty HealthCheckRequest: the whole server
  return { stream, headers: new Promise((resolve) => stream.once("response", (h) => resolve(h))) };
}

describe("keyless streams", () => {
  it(`serves ${GRPC_SERVER_LIMITS.maxKeylessStreams} health Watch streams and refuses more with limit_exceeded`, async () => {
    const sessions = [0, 1].map(() => connectHttp2(`http://${node.gw.gateway.grpcAddress}`));
    for (const s of sessions) s.on("error", () => {});
    try {
      const open = Array.from({ length: GRPC_SERVER_LIMITS.maxKeylessStreams }, (_, i) => watch(sessions[i % 2]!));
      for (const h of await Promise.all(open.map((w) => w.headers))) expect(h["grpc-status"]).toBeUndefined();

      const refused = await watch(sessions[0]!).headers;
      expect(refused).toMatchObject({ "grpc-status": "8", "hermes-reason": "limit_exceeded" });

      open[0]!.stream.close();
      await new Promise((resolve) => open[0]!.stream.once("close", resolve));
      // The gateway sees the cancel a moment later; until then the slot is still taken.
      await eventually(async () => (await watch(sessions[1]!).headers)["grpc-status"] === undefined, {
        timeoutMs: 5000,
        what: "the freed Watch slot",
      });
    } finally {
      for (const s of sessions) s.destroy();
    }
  });
});

describe("unary calls per connection", () => {
  it("answers a burst of 300 unary sends on one connection, in full", async () => {
    await node.call(node.client.create, { room_id: "burst", name: "Burst", members: MEMBERS });
    const sends = Array.from({ length: 300 }, (_, i) =>
      node.call(node.client.send, { room_id: "burst", event_id: `b${i}`, payload: { text: `hello ${i}` } }),
    );
    const replies = (await Promise.all(sends)) as { event?: { seq: number } }[];
    expect(new Set(replies.map((r) => r.event?.seq)).size).toBe(300);
  });
});
