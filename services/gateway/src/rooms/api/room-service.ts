import type { ServerDuplexStream, ServerWritableStream } from "@grpc/grpc-js";
import { type ServiceHandlers, toServiceError, toWireError } from "@hermes/common";
import {
  type AppendReply,
  type AppendRequest,
  type AppendResult,
  type ReplicateRequest,
  type RoomServiceServer,
  RoomServiceService,
  type SendRequest,
  type SubscribeRequest,
  type LogPage as WireLogPage,
  type ReplicateProgress as WireProgress,
} from "@hermes/proto/hermes/v1/rooms";
import type { AnyPage } from "../app/live-tail.js";
import type { RoomsService } from "../app/rooms-service.js";
import {
  isPromise,
  parseParams,
  ROOM_METHODS,
  SEND_METHOD,
  type ServerStreamRoomMethod,
  type SubscriptionRoomMethod,
  type TailParams,
  type UnaryRoomMethod,
} from "./methods.js";
import { fromWireSend, toWireAnyPage } from "./wire.js";

/** Bound on sends of one Append stream waiting for their commit; reading pauses above it. */
const MAX_IN_FLIGHT_PER_STREAM = 20_000;

type Handlers = ServiceHandlers<RoomServiceServer>;

function streamError(call: { emit(event: string, err: unknown): boolean }, err: unknown): void {
  call.emit("error", toServiceError(err));
}

function unaryHandler(method: UnaryRoomMethod<unknown, unknown>, rooms: RoomsService) {
  const grpc = method.grpc!;
  return (req: never) => {
    const result = method.call(rooms, parseParams(method, grpc.request(req)), "tuples");
    return isPromise(result) ? result.then((r) => grpc.reply(r)) : grpc.reply(result);
  };
}

/**
 * `Append`: the pipelined form of groups.send (gRPC only), each send parsed and answered like a
 * unary `Send`. Results are written in batches too: a write is in flight at most once, and
 * whatever completes meanwhile goes into the next message.
 */
function appendHandler(rooms: RoomsService) {
  const sendOne = async (send: SendRequest | undefined) => SEND_METHOD.call(rooms, parseParams(SEND_METHOD, fromWireSend(send)), "tuples");
  return (call: ServerDuplexStream<AppendRequest, AppendReply>) => {
    let inFlight = 0;
    let ended = false;
    let paused = false;
    let closed = false;
    let writing = false;
    let results: AppendResult[] = [];
    const flushResults = () => {
      if (writing || closed || results.length === 0) return maybeEnd();
      const batch = results;
      results = [];
      writing = true;
      call.write({ results: batch }, () => {
        writing = false;
        flushResults();
      });
    };
    const maybeEnd = () => {
      if (ended && inFlight === 0 && results.length === 0 && !writing && !closed) {
        closed = true;
        call.end();
      }
    };
    const answer = (result: AppendResult) => {
      inFlight--;
      results.push(result);
      if (paused && inFlight < MAX_IN_FLIGHT_PER_STREAM / 2 && !closed) {
        paused = false;
        call.resume();
      }
      if (results.length === 1) setImmediate(flushResults);
    };
    call.on("data", (req: AppendRequest) => {
      for (const item of req.sends) {
        inFlight++;
        sendOne(item.send).then(
          ({ event: e, idempotent }) =>
            answer({
              tag: item.tag,
              ok: { seq: e.seq, epoch: e.epoch, hash: e.hash, created_at: e.created_at, idempotent },
              error: undefined,
            }),
          (err: unknown) => answer({ tag: item.tag, ok: undefined, error: toWireError(err) }),
        );
      }
      if (inFlight >= MAX_IN_FLIGHT_PER_STREAM && !paused) {
        paused = true;
        call.pause();
      }
    });
    call.on("end", () => {
      ended = true;
      maybeEnd();
    });
    call.on("error", () => {
      closed = true;
    });
    call.on("cancelled", () => {
      closed = true;
    });
  };
}

/**
 * A live tail's pages as wire messages, by page object, and their encoding, by wire message: the
 * replicas of a room that tail it from the same seq are handed the same page object
 * (RoomsService reads it once), so the page is converted and protobuf-encoded once for all of them.
 */
const wirePages = new WeakMap<AnyPage, WireLogPage>();
const encodedPages = new WeakMap<WireLogPage, Buffer>();

function wirePage(page: AnyPage): WireLogPage {
  let wire = wirePages.get(page);
  if (wire === undefined) {
    wire = toWireAnyPage(page);
    wirePages.set(page, wire);
  }
  return wire;
}

/** RoomService as served: Subscribe encodes a page written to several tails once. */
export const roomServiceDefinition: typeof RoomServiceService = {
  ...RoomServiceService,
  subscribe: {
    ...RoomServiceService.subscribe,
    responseSerialize: (page: WireLogPage): Buffer => {
      let bytes = encodedPages.get(page);
      if (bytes === undefined) {
        bytes = RoomServiceService.subscribe.responseSerialize(page);
        encodedPages.set(page, bytes);
      }
      return bytes;
    },
  },
};

/** `Subscribe`: the live tail as a server stream of pages, waiting for the stream to drain. */
function subscribeHandler(method: SubscriptionRoomMethod<TailParams>, rooms: RoomsService) {
  return (call: ServerWritableStream<SubscribeRequest, WireLogPage>) => {
    try {
      const params = parseParams(method, method.grpc.request(call.request));
      const subscription = method.open(rooms, params, "tuples", {
        send: (page) => call.write(wirePage(page)),
        drained: () =>
          new Promise<void>((resolve) => {
            call.once("drain", resolve);
            call.once("close", resolve);
          }),
        end: (error) => (error ? streamError(call, error) : call.end()),
      });
      const close = () => subscription.close();
      call.on("cancelled", close);
      call.on("close", close);
      call.on("error", close);
    } catch (err) {
      streamError(call, err);
    }
  };
}

/** `Replicate`: progress messages while the replica pulls, the last one carrying the result. */
function replicateHandler(method: ServerStreamRoomMethod<unknown, unknown, unknown>, rooms: RoomsService) {
  return (call: ServerWritableStream<ReplicateRequest, WireProgress>) => {
    const controller = new AbortController();
    call.on("cancelled", () => controller.abort());
    const run = async () => {
      const params = parseParams(method, method.grpc.request(call.request));
      const result = await method.call(
        rooms,
        params,
        (item) => {
          if (!call.cancelled) call.write(method.grpc.item(item));
        },
        controller.signal,
      );
      if (call.cancelled) return;
      call.write(method.grpc.result(result, rooms, params));
      call.end();
    };
    run().catch((err: unknown) => {
      if (!call.cancelled) streamError(call, err);
    });
  };
}

/**
 * RoomService over gRPC, generated from the room method table: every unary method, the live tail
 * (`Subscribe`), the pull (`Replicate`) and the pipelined sends (`Append`). Auth, status mapping
 * and metrics come from adaptService.
 */
export function roomServiceHandlers(rooms: RoomsService): Handlers {
  const handlers: Record<string, unknown> = { append: appendHandler(rooms) };
  for (const method of ROOM_METHODS) {
    switch (method.kind) {
      case "unary":
        if (method.grpc) handlers[method.grpc.method] = unaryHandler(method, rooms);
        break;
      case "subscription":
        handlers[method.grpc.method] = subscribeHandler(method, rooms);
        break;
      case "server_stream":
        handlers[method.grpc.method] = replicateHandler(method, rooms);
        break;
      case "unsubscribe":
        break;
    }
  }
  return handlers as Handlers;
}
