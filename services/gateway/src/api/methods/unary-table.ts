import type { handleUnaryCall } from "@grpc/grpc-js";
import type { ServiceHandlers } from "@hermes/common";
import type { z } from "zod";
import { isPromise, parseParams } from "../../rooms/api/methods.js";
import type { RpcMethod } from "../../rooms/api/room-methods.js";

/**
 * A table of request/answer methods, each defined once with its params, its call into the app and
 * its codecs, from which the gRPC handlers of one service and the JSON-RPC methods are derived (the
 * room API's pattern, rooms/api/methods.ts, for methods with no streams and no tunnel). Params are
 * parsed the same way on both transports: gRPC's request codec turns the request into the JSON-RPC
 * params object, then the method's schema checks it; values are checked by the core, so both
 * transports give the same answer to the same input.
 */

/** S's unary methods (its declared ones: a service's string index signature is left out). */
type UnaryName<S> = {
  [K in keyof ServiceHandlers<S>]: K extends keyof S ? (S[K] extends handleUnaryCall<infer _Req, infer _Res> ? K : never) : never;
}[keyof ServiceHandlers<S>];
type GrpcRequest<S, K extends keyof S> = S[K] extends handleUnaryCall<infer Req, infer _Res> ? Req : never;
type GrpcReply<S, K extends keyof S> = S[K] extends handleUnaryCall<infer _Req, infer Res> ? Res : never;

/** Which method of service S, its request as params, its result as the reply. */
export type GrpcCodec<S, R> = {
  [K in UnaryName<S>]: { method: K; request(req: GrpcRequest<S, K>): unknown; reply(result: R): GrpcReply<S, K> };
}[UnaryName<S>];

export interface UnaryMethod<Ctx, S, P, R> {
  /** The JSON-RPC method name. */
  name: string;
  params: z.ZodType<P>;
  call(ctx: Ctx, params: P): R | Promise<R>;
  /** The JSON-RPC result. */
  json(result: R): unknown;
  grpc: GrpcCodec<S, R>;
}

export type MethodTable<Ctx, S> = readonly UnaryMethod<Ctx, S, unknown, unknown>[];

/** Infers an entry's params and result from its schema and call. */
export function unaryMethod<Ctx, S>() {
  return <P, R>(m: UnaryMethod<Ctx, S, P, R>): UnaryMethod<Ctx, S, unknown, unknown> => m as UnaryMethod<Ctx, S, unknown, unknown>;
}

/** The gRPC handlers of a table's methods (adaptService adds auth, status mapping and metrics). */
export function grpcHandlers<Ctx, S>(table: MethodTable<Ctx, S>, ctx: Ctx): Partial<ServiceHandlers<S>> {
  const handlers: Record<string, unknown> = {};
  for (const method of table) {
    const grpc = method.grpc;
    handlers[grpc.method as string] = (req: never) => {
      const result = method.call(ctx, parseParams(method, grpc.request(req)));
      return isPromise(result) ? result.then((r) => grpc.reply(r)) : grpc.reply(result);
    };
  }
  return handlers as Partial<ServiceHandlers<S>>;
}

/** The JSON-RPC methods of a table. */
export function rpcMethods<Ctx, S>(table: MethodTable<Ctx, S>, ctx: Ctx): Record<string, RpcMethod> {
  return Object.fromEntries(
    table.map((method): [string, RpcMethod] => [
      method.name,
      (raw) => {
        const result = method.call(ctx, parseParams(method, raw));
        return isPromise(result) ? result.then((r) => method.json(r)) : method.json(result);
      },
    ]),
  );
}
