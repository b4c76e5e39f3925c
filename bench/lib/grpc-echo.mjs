// The bare transport baseline for pipelined sends: a grpc-js bidi stream that echoes every message's
// bytes back, untouched (identity serialisers: no protobuf on the server), and a client that sends
// the very AppendRequest messages of RoomService.Append with the same batching as AppendStream (the
// sends ready when a write completes leave together, at most 2000 per message) and settles each
// send when its bytes come back. Our Append stream's figure over this one is our overhead.
import grpc from "@grpc/grpc-js";
import { AppendRequest } from "@hermes/proto/hermes/v1/rooms";

const identity = (b) => b;
const ECHO_SERVICE = {
  append: {
    path: "/bench.Echo/Append",
    requestStream: true,
    responseStream: true,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};
/** The same bound as room-client.ts's MAX_SENDS_PER_MESSAGE. */
const MAX_SENDS_PER_MESSAGE = 2000;

export async function startEchoServer() {
  const server = new grpc.Server({ "grpc.max_receive_message_length": 8 * 1024 * 1024 });
  server.addService(ECHO_SERVICE, {
    append(call) {
      call.on("data", (bytes) => call.write(bytes));
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return { url: `127.0.0.1:${port}`, stop: () => new Promise((r) => server.tryShutdown(r)) };
}

/** A client whose `send(request)` resolves when the AppendRequest carrying it has been echoed. */
export class EchoAppendStream {
  constructor(target) {
    const Client = grpc.makeGenericClientConstructor(ECHO_SERVICE, "Echo");
    this.client = new Client(target, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": 8 * 1024 * 1024 });
    this.call = this.client.append();
    this.waiting = new Map();
    this.buffer = [];
    this.nextTag = 1;
    this.writing = false;
    this.flushQueued = false;
    this.call.on("data", (bytes) => {
      for (const item of AppendRequest.decode(bytes).sends) {
        const resolve = this.waiting.get(item.tag);
        this.waiting.delete(item.tag);
        resolve?.();
      }
    });
    this.call.on("error", () => undefined);
  }

  send(request) {
    const tag = this.nextTag++;
    return new Promise((resolve) => {
      this.waiting.set(tag, resolve);
      this.buffer.push({ tag, send: request });
      if (!this.flushQueued && !this.writing) {
        this.flushQueued = true;
        queueMicrotask(() => {
          this.flushQueued = false;
          this.flush();
        });
      }
    });
  }

  flush() {
    if (this.writing || this.buffer.length === 0) return;
    const sends = this.buffer.splice(0, MAX_SENDS_PER_MESSAGE);
    this.writing = true;
    this.call.write(Buffer.from(AppendRequest.encode({ sends }).finish()), () => {
      this.writing = false;
      this.flush();
    });
  }

  close() {
    this.call.end();
    this.client.close();
  }
}
