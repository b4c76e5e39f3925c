// The RoomService of a gateway container, called from the test process through its mapped gRPC
// port (the same API the CLI uses). Scenarios use it for the many sends of a ledger and to read
// final logs; operator steps go through the real `hermes` CLI inside the containers instead.
import { type CallOptions, credentials, type Metadata, type ServiceError } from "@grpc/grpc-js";
import { authMetadata, deadlineIn, HermesError, unaryCall } from "@hermes/common";
import {
  type DivergenceRecord,
  type ReplicaStateReply,
  type Room,
  type RoomEvent,
  type RoomReplication,
  type RoomReply,
  RoomServiceClient,
  type SendReply,
} from "@hermes/proto/hermes/v1/rooms";
import type { Ledger, ObservedEvent, SendRecord } from "./ledger.js";
import type { GatewayNode } from "./node.js";

const CALL_TIMEOUT_MS = 10_000;

type Unary<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;
const PAGE = 500;

/** A call never made because the gateway's container was down: a definite non-send. */
export class NodeDownError extends Error {
  override readonly name = "NodeDownError";
}

export class RoomsClient {
  private client: RoomServiceClient | undefined;
  private clientAddress = "";

  /** `address` is asked before every call: a restarted container gets a new mapped port. */
  constructor(
    readonly gatewayName: string,
    private readonly address: () => string,
    private readonly key: string,
    private readonly callTimeoutMs = CALL_TIMEOUT_MS,
  ) {}

  /** A client for a gateway node (its mapped gRPC port, the mesh's API key), across restarts. */
  static of(gw: GatewayNode, options: { callTimeoutMs?: number } = {}): RoomsClient {
    return new RoomsClient(gw.name, () => gw.hostGrpc, gw.mesh.apiKey, options.callTimeoutMs);
  }

  private stub(): RoomServiceClient {
    const address = this.address();
    if (!this.client || address !== this.clientAddress) {
      this.client?.close();
      this.client = new RoomServiceClient(address, credentials.createInsecure());
      this.clientAddress = address;
    }
    return this.client;
  }

  private async call<Req, Res>(pick: (c: RoomServiceClient) => Unary<Req, Res>, request: Req): Promise<Res> {
    let client: RoomServiceClient;
    try {
      client = this.stub();
    } catch (err) {
      // The node is down (crashed or stopped, no container to call): nothing was sent.
      throw new NodeDownError(`${this.gatewayName} is down: ${(err as Error).message}`);
    }
    return unaryCall<Res>((cb) =>
      pick(client).call(client, request, authMetadata(this.key), deadlineIn(this.callTimeoutMs), (err, res) => cb(err, res)),
    );
  }

  /** `replication`: e.g. `{ mode: "quorum", replicas: ["gw-b", "gw-c"], min_insync: 2 }` (default: a local room). */
  create(roomId: string, name: string, members: string[], replication?: RoomReplication): Promise<RoomReply> {
    return this.call((c) => c.create, {
      room_id: roomId,
      name,
      replication,
      members: members.map((m) => {
        const at = m.indexOf("@");
        return at < 0 ? { member_id: m, profile: m } : { member_id: m, profile: m.slice(0, at), gateway_id: m.slice(at + 1) };
      }),
    });
  }

  send(roomId: string, eventId: string, text: string): Promise<SendReply> {
    return this.call((c) => c.send, { room_id: roomId, event_id: eventId, payload: { text } });
  }

  async state(roomId: string): Promise<Room> {
    const r = await this.call((c) => c.state, { room_id: roomId, include_disbanded: true });
    if (!r.room) throw new Error(`${this.gatewayName}: no state for ${roomId}`);
    return r.room;
  }

  replicaState(roomId: string): Promise<ReplicaStateReply> {
    return this.call((c) => c.replicaState, { room_id: roomId });
  }

  async divergence(roomId: string): Promise<DivergenceRecord[]> {
    return (await this.call((c) => c.divergence, { room_id: roomId })).branches;
  }

  /** Every event of the room's main log on this gateway, page by page. */
  async fullLog(roomId: string): Promise<RoomEvent[]> {
    const events: RoomEvent[] = [];
    let since = 0;
    for (;;) {
      const page = await this.call((c) => c.log, {
        room_id: roomId,
        since_seq: since,
        limit: PAGE,
        packed: false,
        known_authority: undefined,
      });
      events.push(...page.events);
      if (!page.has_more || page.events.length === 0) return events;
      since = page.cursor;
    }
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}

/** Room refusals that are definite (never acknowledged, must never appear); anything else is indeterminate. */
const DEFINITE_REFUSALS = new Set(["authority_conflict", "not_authority", "room_retired", "room_disbanded", "idempotency_conflict"]);

export function roomRefusal(err: unknown): string | undefined {
  if (err instanceof NodeDownError) return "not_sent_gateway_down";
  return err instanceof HermesError && DEFINITE_REFUSALS.has(err.reason) ? err.reason : undefined;
}

/** Records one send in the ledger: acked with (seq, epoch), refused, or indeterminate. */
export function ledgerSend(ledger: Ledger, rooms: RoomsClient, roomId: string, eventId: string): Promise<SendRecord> {
  return ledger.record({ eventId, room: roomId, via: rooms.gatewayName }, () => rooms.send(roomId, eventId, `message ${eventId}`), {
    ack: (r) => ({ seq: r.event!.seq, epoch: r.event!.epoch }),
    refusal: roomRefusal,
  });
}

/** `count` sends `prefix-0..count-1`, `concurrency` at a time, every one in the ledger. */
export async function sendMany(
  ledger: Ledger,
  rooms: RoomsClient,
  roomId: string,
  prefix: string,
  count: number,
  concurrency = 8,
): Promise<SendRecord[]> {
  const records: SendRecord[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        records[i] = await ledgerSend(ledger, rooms, roomId, `${prefix}-${i}`);
      }
    }),
  );
  return records;
}

export interface Writer {
  /** Sends so far (all outcomes). */
  readonly count: () => number;
  stop(): Promise<void>;
}

/**
 * `concurrency` loops sending `prefix-<n>` to a room until stopped, every send in the ledger. A
 * refused or failed send does not stop the loop (a writer keeps trying, as clients do).
 */
export function startWriter(
  ledger: Ledger,
  rooms: RoomsClient,
  roomId: string,
  prefix: string,
  options: { concurrency?: number; pauseMs?: number } = {},
): Writer {
  let stopped = false;
  let n = 0;
  const loops = Array.from({ length: options.concurrency ?? 1 }, async () => {
    while (!stopped) {
      const rec = await ledgerSend(ledger, rooms, roomId, `${prefix}-${n++}`);
      // Back off a little after a failure so a dead gateway is not hammered.
      const pause = rec.outcome === "acked" ? (options.pauseMs ?? 0) : 100;
      if (pause > 0) await new Promise((r) => setTimeout(r, pause));
    }
  });
  return {
    count: () => n,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Events as the ledger compares them. */
export function observed(events: RoomEvent[], gateway: string): ObservedEvent[] {
  return events.map((e) => ({ eventId: e.event_id, room: e.room_id, seq: e.seq, epoch: e.epoch, gateway }));
}

/** Throws unless seqs run 1..n with no gap (the log of a room is dense). */
export function assertDense(events: RoomEvent[], where: string): void {
  events.forEach((e, i) => {
    if (e.seq !== i + 1) throw new Error(`${where}: seq ${e.seq} at position ${i + 1} (gap or reorder)`);
  });
}
