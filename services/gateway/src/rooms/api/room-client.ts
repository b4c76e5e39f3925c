import type { ClientDuplexStream } from "@grpc/grpc-js";
import { authMetadata, fromServiceError, HermesError, isErrorReason, PeerChannel } from "@hermes/common";
import {
  type AppendAck,
  type AppendReply,
  type AppendRequest,
  type AppendResult,
  RoomServiceClient,
  type SendRequest,
  type TaggedSend,
} from "@hermes/proto/hermes/v1/rooms";

/** Sends per Append message: big enough to amortise a write, small enough to stay far below 8 MiB. */
const MAX_SENDS_PER_MESSAGE = 2000;

/**
 * Pipelined durable sends over one `RoomService.Append` stream: `send` resolves with the
 * acknowledgement (after the gateway's group commit) or rejects with the typed refusal. Sends made
 * while a write is in flight go out together in the next message (grpc-js completes one stream
 * write per event-loop turn, so one send per message would cap the stream there). Use it from
 * scripts and benchmarks:
 *
 *   const client = roomClient("grpc://127.0.0.1:7440");
 *   const stream = new AppendStream(client, key);
 *   await Promise.all(ids.map((id) => stream.send({ room_id, event_id: id, payload: { text: "hi" } })));
 *   await stream.close();
 */
export class AppendStream {
  private readonly call: ClientDuplexStream<AppendRequest, AppendReply>;
  private readonly waiting = new Map<number, { resolve(r: AppendAck): void; reject(e: unknown): void }>();
  private nextTag = 1;
  private failure: HermesError | undefined;
  private readonly finished: Promise<void>;
  private buffer: TaggedSend[] = [];
  private writing = false;
  private flushQueued = false;
  private closing = false;
  private idleWaiters: (() => void)[] = [];

  constructor(client: RoomServiceClient, key?: string) {
    this.call = client.append(authMetadata(key));
    this.call.on("data", (reply: AppendReply) => {
      for (const result of reply.results) this.settle(result);
    });
    this.finished = new Promise<void>((resolve) => {
      const fail = (err: HermesError) => {
        this.failure ??= err;
        for (const w of this.waiting.values()) w.reject(this.failure);
        this.waiting.clear();
        this.buffer = [];
        this.wakeIdle();
        resolve();
      };
      this.call.on("error", (err: Parameters<typeof fromServiceError>[0]) => fail(fromServiceError(err)));
      this.call.on("end", () => fail(new HermesError("unavailable", "the append stream ended")));
    });
  }

  private settle(result: AppendResult): void {
    const waiter = this.waiting.get(result.tag);
    if (!waiter) return;
    this.waiting.delete(result.tag);
    if (this.waiting.size === 0) this.wakeIdle();
    if (result.ok) {
      waiter.resolve(result.ok);
      return;
    }
    const error = result.error;
    let data: Record<string, unknown> = {};
    try {
      data = error?.data_json ? (JSON.parse(error.data_json) as Record<string, unknown>) : {};
    } catch {
      data = {};
    }
    const reason = isErrorReason(error?.reason) ? error.reason : "unknown";
    waiter.reject(new HermesError(reason, error?.message ?? "refused", { data }));
  }

  /** Sends one message; resolves with where it landed once it is durable on the authority. */
  send(request: SendRequest): Promise<AppendAck> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closing) return Promise.reject(new HermesError("unavailable", "the append stream is closing"));
    const tag = this.nextTag++;
    return new Promise((resolve, reject) => {
      this.waiting.set(tag, { resolve, reject });
      this.buffer.push({ tag, send: request });
      if (!this.flushQueued && !this.writing) {
        // Sends made in the same turn (a loop, a Promise.all) leave in one message.
        this.flushQueued = true;
        queueMicrotask(() => {
          this.flushQueued = false;
          this.flush();
        });
      }
    });
  }

  private flush(): void {
    if (this.writing || this.buffer.length === 0 || this.failure) return;
    const batch = this.buffer.splice(0, MAX_SENDS_PER_MESSAGE);
    this.writing = true;
    this.call.write({ sends: batch }, () => {
      this.writing = false;
      this.flush();
    });
  }

  /** Sends not yet answered. */
  get inFlight(): number {
    return this.waiting.size;
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Waits until every send was answered, then half-closes the stream. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.waiting.size > 0 && !this.failure) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    this.call.end();
    await this.finished;
  }

  cancel(): void {
    this.call.cancel();
  }
}

/** A RoomService client for a gRPC URL (`grpc://host:port`), with message limits fit for replication pages. */
export function roomClient(url: string): RoomServiceClient {
  return PeerChannel.open({ url }).client(RoomServiceClient);
}
