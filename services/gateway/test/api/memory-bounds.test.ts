import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { type ClientHttp2Session, connect as connectHttp2 } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { authMetadata, GRPC_SERVER_LIMITS, unaryCall } from "@hermes/common";
import { type LogPage, LogRequest, RoomServiceService } from "@hermes/proto/hermes/v1/rooms";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { roomClient } from "../../src/rooms/api/room-client.js";
import { TEST_KEY } from "../support/gateway-harness.js";
import { MEMBERS } from "../support/rooms-fixtures.js";
import { RpcClient } from "../support/rpc-client.js";

/**
 * Memory per connection is bounded, measured on a real gateway process (VmRSS): a WebSocket
 * client that pipelines log reads of large pages and never reads its answers, one frame with a
 * batch of 100 log reads, and 100 gRPC `Log` calls whose answers are never read. Before the
 * bounds these grew the gateway by 2.5 GB, 1.9 GB (then `RangeError: Invalid string length`) and
 * 677 MB.
 *
 * What such a connection may pin is about 1 MiB of unsent answers plus one answer (a 6 MiB page is
 * ~7 MB in memory) over WebSocket, or 8 answers over gRPC (~56 MB); the rest is garbage of pages
 * built and dropped, which V8 collects lazily. A page reads only the segments its byte budget can
 * use, and a read in a batch asks for no more than the room the batch has left, so that garbage is
 * about the pages' own size: 30–55 MiB of growth over WebSocket and ~110 MiB over gRPC here (when a
 * page read every event up to its count limit, the batch alone grew the gateway by ~200 MiB).
 */

const MAX_WS_GROWTH_MIB = 100;
const MAX_GRPC_GROWTH_MIB = 200;
const BIG_PAGE = { limit: 500, max_bytes: 6 * 1024 * 1024 };
const ROOM = "big";

let gw: DaemonProcess | undefined;
let home: string | undefined;

afterEach(async () => {
  await gw?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
  gw = undefined;
  home = undefined;
});

function rssMiB(): number {
  const status = readFileSync(`/proc/${gw!.child.pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) / 1024;
}

/** The largest RSS seen while `work` runs, sampled every 50 ms. */
async function peakWhile<T>(work: Promise<T>): Promise<{ peak: number; value: T }> {
  let peak = rssMiB();
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMiB());
  }, 50);
  try {
    const value = await work;
    return { peak: Math.max(peak, rssMiB()), value };
  } finally {
    clearInterval(sampler);
  }
}

/** RSS over a second once the gateway has settled: what a connection keeps, not a passing peak. */
async function heldFor(): Promise<number> {
  const samples: number[] = [];
  await new Promise<void>((resolve) => {
    const sampler = setInterval(() => {
      samples.push(rssMiB());
      if (samples.length === 20) {
        clearInterval(sampler);
        resolve();
      }
    }, 50);
  });
  return Math.max(...samples);
}

/** A gateway process with room `big`: 200 messages of 63 KiB (a 6 MiB log page holds ~95 of them). */
async function gatewayWithLargeRoom(): Promise<RpcClient> {
  home = mkdtempSync(join(tmpdir(), "hermes-mem-"));
  gw = await startGatewayProcess(home, { env: { API_SERVER_KEY: TEST_KEY } });
  const rpc = await RpcClient.connect(gw.http);
  await rpc.call("groups.create", { room_id: ROOM, name: "Big", members: MEMBERS });
  const text = "x".repeat(63 * 1024);
  await Promise.all(
    Array.from({ length: 200 }, (_, i) => rpc.call("groups.send", { room_id: ROOM, event_id: `m${i}`, payload: { text } })),
  );
  return rpc;
}

function openWs(address: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${address}/rpc`, { headers: { authorization: `Bearer ${TEST_KEY}` } });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

describe("WebSocket /rpc memory per connection", () => {
  it("a client pipelining 150 large log reads that never reads its answers pins a bounded amount", async () => {
    const probe = await gatewayWithLargeRoom();
    const before = rssMiB();
    const attacker = await openWs(gw!.http);
    attacker.on("error", () => {});
    attacker.pause(); // never reads: its socket fills and the gateway's writes stop
    for (let id = 1; id <= 150; id++) {
      attacker.send(JSON.stringify({ jsonrpc: "2.0", id, method: "groups.log", params: { room_id: ROOM, ...BIG_PAGE } }));
    }
    // Answered after the gateway handled every frame it read from the attacker.
    const { peak } = await peakWhile(probe.call("groups.capabilities"));
    const held = await heldFor();
    expect(Math.max(peak, held) - before).toBeLessThan(MAX_WS_GROWTH_MIB);

    attacker.terminate(); // as a process that exits with unread data: a reset
    expect(await probe.call("groups.log", { room_id: ROOM, limit: 1 })).toMatchObject({ latest_seq: 201 });
    expect((await heldFor()) - before).toBeLessThan(MAX_WS_GROWTH_MIB);
    probe.close();
  });

  it("answers one frame with a batch of 100 log reads within the frame limit, the rest payload_too_large", async () => {
    const probe = await gatewayWithLargeRoom();
    const before = rssMiB();
    const client = await openWs(gw!.http);
    const batch = Array.from({ length: 100 }, (_, i) => ({ jsonrpc: "2.0", id: i + 1, method: "groups.log", params: { room_id: ROOM } }));
    const answered = new Promise<Buffer>((resolve, reject) => {
      client.once("message", (data) => resolve(data as Buffer));
      client.once("close", (code) => reject(new Error(`closed ${code} before the batch was answered`)));
    });
    client.send(JSON.stringify(batch));
    const { peak, value: frame } = await peakWhile(answered);
    expect(frame.length).toBeLessThanOrEqual(4 * 1024 * 1024);
    const answers = JSON.parse(frame.toString()) as {
      id: number;
      result?: { events: unknown[] };
      error?: { code: number; data: { reason: string } };
    }[];
    expect(answers.map((a) => a.id).sort((x, y) => x - y)).toEqual(batch.map((r) => r.id));
    const refused = answers.filter((a) => a.error);
    expect(refused.length).toBeGreaterThan(0);
    for (const a of refused) expect(a.error).toMatchObject({ code: 4112, data: { reason: "payload_too_large", limit: 4 * 1024 * 1024 } });
    // Reads after the first two full pages are asked for what room is left, so more than two are answered.
    expect(answers.filter((a) => a.result).length).toBeGreaterThan(2);
    expect(peak - before).toBeLessThan(MAX_WS_GROWTH_MIB);
    client.close();
    expect(await probe.call("groups.capabilities")).toMatchObject({ gateway_id: gw!.ready.id });
    probe.close();
  });
});

/** Unary gRPC calls on a raw HTTP/2 connection whose answers are never read (the streams stay paused). */
function unreadLogCalls(session: ClientHttp2Session, count: number): { started: () => number } {
  const body = Buffer.from(LogRequest.encode(LogRequest.fromPartial({ room_id: ROOM, since_seq: 0, ...BIG_PAGE })).finish());
  const message = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), body]);
  message.writeUInt32BE(body.length, 1);
  let started = 0;
  for (let i = 0; i < count; i++) {
    const stream = session.request({
      ":method": "POST",
      ":path": RoomServiceService.log.path,
      "content-type": "application/grpc",
      te: "trailers",
      authorization: `Bearer ${TEST_KEY}`,
    });
    stream.on("response", () => started++);
    stream.on("error", () => {});
    stream.pause();
    stream.end(message);
  }
  return { started: () => started };
}

describe("gRPC memory per connection", () => {
  it("100 unary Log calls whose answers are never read pin at most 8 answers", async () => {
    const rpc = await gatewayWithLargeRoom();
    rpc.close();
    const client = roomClient(`grpc://${gw!.grpc}`);
    const probe = () =>
      unaryCall<LogPage>((cb) => client.log(LogRequest.fromPartial({ room_id: ROOM, since_seq: 200 }), authMetadata(TEST_KEY), cb));
    const before = rssMiB();
    const session = connectHttp2(`http://${gw!.grpc}`);
    session.on("error", () => {});
    const calls = unreadLogCalls(session, 100);
    const { peak } = await peakWhile(probe());
    const held = await heldFor();
    expect(calls.started()).toBeLessThanOrEqual(GRPC_SERVER_LIMITS.maxHeldCallsPerConnection);
    expect(Math.max(peak, held) - before).toBeLessThan(MAX_GRPC_GROWTH_MIB);

    session.socket.resetAndDestroy(); // as a process that exits with unread data
    expect((await probe()).latest_seq).toBe(201);
    expect((await heldFor()) - before).toBeLessThan(MAX_GRPC_GROWTH_MIB);
    client.close();
  });
});
