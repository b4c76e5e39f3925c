import { mkdtempSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallOptions, Metadata, ServiceError } from "@grpc/grpc-js";
import { authMetadata, fromServiceError, type HermesError, unaryCall } from "@hermes/common";
import type { ReplicateProgress, ReplicateRequest, ReplicateResult, RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import { expect } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import type { TestRelay } from "../../../relay/test/support/relay-harness.js";
import { AppendStream, roomClient } from "../../src/rooms/api/room-client.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "./gateway-harness.js";

export const MEMBERS = [
  { member_id: "alice", profile: "alice" },
  { member_id: "bob", profile: "bob" },
];

export interface RoomNode {
  gw: TestGateway;
  id: string;
  url: string;
  client: RoomServiceClient;
  /** The rooms service itself (in-process). */
  rooms: TestGateway["gateway"]["rooms"];
  call<Req, Res>(
    method: (req: Req, md: Metadata, options: Partial<CallOptions>, cb: (err: ServiceError | null, res: Res) => void) => unknown,
    req: Req,
  ): Promise<Res>;
  appendStream(): AppendStream;
  /** Runs Replicate to the end; resolves with the result and every progress message. */
  replicate(req: Partial<ReplicateRequest> & { room_id: string }): Promise<{ result: ReplicateResult; progress: ReplicateProgress[] }>;
}

export async function startRoomNode(id: string, options: { home?: string } = {}): Promise<RoomNode> {
  const gw = await startTestGateway({ overrides: { id }, ...(options.home ? { home: options.home } : {}) });
  const url = `grpc://${gw.gateway.grpcAddress}`;
  const client = roomClient(url);
  const node: RoomNode = {
    gw,
    id: gw.gateway.id,
    url,
    client,
    rooms: gw.gateway.rooms,
    call(method, req) {
      return unaryCall((cb) => method.call(client, req, authMetadata(TEST_KEY), {}, (err, res) => cb(err, res)));
    },
    appendStream() {
      return new AppendStream(client, TEST_KEY);
    },
    replicate(req) {
      return new Promise((resolve, reject) => {
        const progress: ReplicateProgress[] = [];
        const stream = client.replicate({ room_id: req.room_id, from: req.from, follow: req.follow ?? false }, authMetadata(TEST_KEY));
        stream.on("data", (p: ReplicateProgress) => progress.push(p));
        stream.on("error", (err: ServiceError) => reject(fromServiceError(err)));
        stream.on("end", () => {
          const last = progress[progress.length - 1];
          if (last?.result) resolve({ result: last.result, progress });
          else reject(new Error("replicate ended without a result"));
        });
      });
    },
  };
  return node;
}

/**
 * Gateways "home" and "vps" (their ids and relay connections) on `relay`, once both are connected:
 * home plays a room authority nobody dials, vps the gateway that reaches it through the relay.
 */
export async function startRelayedPair(relay: TestRelay): Promise<{ home: TestGateway; vps: TestGateway }> {
  const start = (id: "home" | "vps") =>
    startTestGateway({
      home: mkdtempSync(join(tmpdir(), `hrp-${id}-`)),
      overrides: { id, relayUrl: relay.url, relayKey: relay.relay.keys.add(id).key },
    });
  const home = await start("home");
  const vps = await start("vps");
  await eventually(() => {
    expect(home.gateway.relay!.status().state).toBe("connected");
    expect(vps.gateway.relay!.status().state).toBe("connected");
  });
  return { home, vps };
}

export async function stopNodes(...nodes: (RoomNode | undefined)[]): Promise<void> {
  for (const n of nodes) {
    if (!n) continue;
    n.client.close();
    await n.gw.destroy();
  }
}

/** The source spec for pulling from `node` over gRPC with the test key. */
export function from(node: RoomNode) {
  return { url: node.url, key: TEST_KEY, peer: "" };
}

/** The reason a failed call carried (from the gRPC trailer), or undefined. */
export function reasonOf(err: unknown): string | undefined {
  return (err as HermesError | undefined)?.reason;
}

export async function expectRefusal(promise: Promise<unknown>): Promise<HermesError> {
  try {
    await promise;
  } catch (err) {
    return err as HermesError;
  }
  throw new Error("expected a refusal, the call succeeded");
}

/**
 * A TCP proxy in front of a gRPC port that a test can cut (every connection destroyed, new ones
 * refused) and heal: the in-process stand-in for a network partition. It can also stall what
 * clients send (their sockets are no longer read, so TCP and HTTP/2 flow control push back on
 * the sender) while the other direction keeps flowing.
 */
export class CuttableProxy {
  private server: Server | undefined;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private cut = false;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      if (this.cut) {
        client.destroy();
        return;
      }
      const upstream = connect(this.target.port, this.target.host);
      const pair = { client, upstream };
      this.pairs.add(pair);
      for (const s of [client, upstream]) {
        s.on("close", () => this.pairs.delete(pair));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    const addr = this.server.address();
    this.port = typeof addr === "object" && addr ? addr.port : 0;
  }

  get url(): string {
    return `grpc://127.0.0.1:${this.port}`;
  }

  partition(): void {
    this.cut = true;
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  /** Stops reading what the clients of the open connections send; `resumeClients` forwards it again. */
  stallClients(): void {
    for (const { client, upstream } of this.pairs) {
      client.unpipe(upstream);
      client.pause();
    }
  }

  resumeClients(): void {
    for (const { client, upstream } of this.pairs) client.pipe(upstream);
  }

  heal(): void {
    this.cut = false;
  }

  async close(): Promise<void> {
    this.partition();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
