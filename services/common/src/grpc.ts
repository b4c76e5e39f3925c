import {
  type CallOptions,
  type Client,
  credentials,
  status as GrpcStatus,
  type handleUnaryCall,
  Metadata,
  type MethodDefinition,
  Server,
  type ServerCredentials,
  type ServerErrorResponse,
  type ServerOptions,
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { bearerToken, type KeyRing } from "./auth.js";
import { fromServiceError, toServiceError } from "./grpc-status.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import { HermesError, toHermesError } from "./pure/errors.js";

export interface CallContext {
  metadata: Metadata;
  peer: string;
  /** Aborted when the client cancels or the deadline passes. */
  signal: AbortSignal;
}

type Unary<H> = H extends handleUnaryCall<infer Req, infer Res> ? (req: Req, ctx: CallContext) => Promise<Res> | Res : H;

/**
 * Handlers for a ts-proto service: unary methods are plain async functions that return the reply or
 * throw (a HermesError keeps its reason); streaming methods keep grpc-js's own handler shape.
 */
export type ServiceHandlers<S> = { [K in keyof S as string extends K ? never : K]: Unary<S[K]> };

export interface AdaptOptions {
  /** Required key ring; omit for the local control socket (file mode is the guard). */
  auth?: KeyRing;
  metrics?: Metrics;
  transport: "tcp" | "control";
}

const UNAUTHENTICATED_MESSAGE = "missing or wrong API key: send `authorization: Bearer <key>` (CLI: --key or HERMES_KEY)";

function authenticate(metadata: Metadata, auth: KeyRing | undefined): HermesError | undefined {
  if (!auth?.required) return undefined;
  const header = metadata.get("authorization")[0];
  const key = bearerToken(typeof header === "string" ? header : undefined);
  return auth.accepts(key) ? undefined : new HermesError("unauthenticated", UNAUTHENTICATED_MESSAGE);
}

function statusName(code: number): string {
  return GrpcStatus[code] ?? String(code);
}

/** Turns handler maps into a grpc-js service implementation with auth, error mapping and metrics. */
export function adaptService<S>(
  definition: ServiceDefinition,
  handlers: ServiceHandlers<S>,
  options: AdaptOptions,
): UntypedServiceImplementation {
  const impl: UntypedServiceImplementation = {};
  for (const [name, method] of Object.entries(definition) as [string, MethodDefinition<unknown, unknown>][]) {
    const handler = (handlers as Record<string, unknown>)[name];
    if (typeof handler !== "function") throw new Error(`no handler for ${method.path}`);
    const label = method.path;
    if (!method.requestStream && !method.responseStream) {
      const fn = handler as (req: unknown, ctx: CallContext) => Promise<unknown>;
      impl[name] = (call: Parameters<handleUnaryCall<unknown, unknown>>[0], callback: Parameters<handleUnaryCall<unknown, unknown>>[1]) => {
        const end = options.metrics?.rpcDuration.startTimer({ method: label, transport: options.transport });
        const controller = new AbortController();
        call.on("cancelled", () => controller.abort());
        // Everything, the key check included, runs inside the chain: whatever throws becomes a typed
        // answer. The chain is returned so the GuardedServer sees anything that escapes it.
        return Promise.resolve()
          .then(() => {
            const denied = authenticate(call.metadata, options.auth);
            if (denied) throw denied;
            return fn(call.request, { metadata: call.metadata, peer: call.getPeer(), signal: controller.signal });
          })
          .then(
            (reply) => {
              end?.({ code: "OK" });
              callback(null, reply);
            },
            (err: unknown) => {
              const serviceError = toServiceError(err);
              end?.({ code: statusName(serviceError.code ?? GrpcStatus.UNKNOWN) });
              callback(serviceError as ServerErrorResponse);
            },
          );
      };
    } else {
      // Streaming handlers manage their own lifecycle; we only gate them on the key (a throw in
      // one, or in a listener it adds, is answered by the GuardedServer).
      const raw = handler as (call: { metadata: Metadata; emit(event: string, err: unknown): boolean }) => unknown;
      impl[name] = (call: { metadata: Metadata; emit(event: string, err: unknown): boolean }) => {
        const denied = authenticate(call.metadata, options.auth);
        if (denied) {
          options.metrics?.rpcDuration.observe({ method: label, transport: options.transport, code: "UNAUTHENTICATED" }, 0);
          call.emit("error", toServiceError(denied));
          return;
        }
        return raw(call);
      };
    }
  }
  return impl;
}

type UnaryCallback = (err: unknown, value?: unknown, ...rest: unknown[]) => void;
interface GuardedCall {
  emit(event: string | symbol, ...args: unknown[]): boolean;
  writableEnded?: boolean;
  destroyed?: boolean;
}

/** `/hermes.v1.RoomService/Send` → `hermes.v1.RoomService`. */
function serviceNameOf(definition: ServiceDefinition): string | undefined {
  const first = Object.values(definition)[0] as MethodDefinition<unknown, unknown> | undefined;
  return first?.path.split("/")[1];
}

/** Runs `start`; a throw, or a rejection of the promise it returns, goes to `fail`. */
function runGuarded(start: () => unknown, fail: (err: unknown) => void): void {
  try {
    const result = start();
    if (result !== null && typeof result === "object" && typeof (result as PromiseLike<unknown>).then === "function") {
      Promise.resolve(result).catch(fail);
    }
  } catch (err) {
    fail(err);
  }
}

/**
 * The call's `emit` with listener throws caught: grpc-js delivers `data`, `end`, `cancelled`…
 * through it from its own socket callbacks, where an exception would be uncaught.
 */
function guardEmit(call: GuardedCall, fail: (err: unknown) => void): void {
  const emit = call.emit.bind(call);
  call.emit = (event, ...args) => {
    try {
      return emit(event, ...args);
    } catch (err) {
      fail(err);
      return true;
    }
  };
}

/**
 * One method's handler such that nothing it throws (synchronously, in the promise it returns, in a
 * listener on its call, or while sending its answer) leaves it: the call is answered with a typed
 * error (at most once), and the failure is logged as the bug it is.
 */
type AnyHandler = (call: GuardedCall, callback?: UnaryCallback) => unknown;

function guardHandler(method: MethodDefinition<unknown, unknown>, handler: AnyHandler, self: unknown, logger?: Logger) {
  const report = (err: unknown, what: string) => logger?.error({ err, method: method.path }, what);
  if (!method.responseStream) {
    // Unary and client-streaming: answered through the callback.
    return (call: GuardedCall, callback: UnaryCallback) => {
      let answered = false;
      const respond: UnaryCallback = (err, ...rest) => {
        if (answered) return;
        answered = true;
        try {
          callback(err, ...rest);
        } catch (sendErr) {
          report(sendErr, "sending a gRPC answer failed; answering with the error instead");
          try {
            callback(toServiceError(sendErr));
          } catch {
            // The call is gone; nothing more can be sent on it.
          }
        }
      };
      const fail = (err: unknown) => {
        report(err, "a gRPC handler threw; the call gets a typed error unless it was answered already");
        respond(toServiceError(err));
      };
      guardEmit(call, fail);
      runGuarded(() => handler.call(self, call, respond), fail);
    };
  }
  // Server-streaming and bidi: answered by an `error` event, which grpc-js turns into the status.
  return (call: GuardedCall) => {
    let failed = false;
    const fail = (err: unknown) => {
      report(err, "a gRPC stream handler threw; the stream ends with a typed error unless it had ended already");
      if (failed || call.writableEnded || call.destroyed) return;
      failed = true;
      call.emit("error", toServiceError(err));
    };
    guardEmit(call, fail);
    runGuarded(() => handler.call(self, call), fail);
  };
}

/**
 * A grpc-js Server on which no handler can end the process, and which knows what it serves.
 *
 * Every implementation added is guarded: an exception from a handler (however it is raised) is
 * answered as a typed error and logged instead of reaching Node's uncaught-exception handling,
 * which would end the daemon and every other call with it. Raw grpc-js implementations (the
 * relay's streams, reflection) get the same guard as `adaptService` ones.
 */
export class GuardedServer extends Server {
  private readonly served: string[] = [];

  /** `logger` is where a guarded failure is reported. */
  constructor(
    private readonly logger: Logger | undefined,
    options: ServerOptions = {},
  ) {
    super(options);
  }

  override addService(service: ServiceDefinition, implementation: UntypedServiceImplementation): void {
    const guarded: UntypedServiceImplementation = {};
    for (const [name, method] of Object.entries(service) as [string, MethodDefinition<unknown, unknown>][]) {
      const handler = implementation[name] ?? (method.originalName === undefined ? undefined : implementation[method.originalName]);
      if (typeof handler === "function") guarded[name] = guardHandler(method, handler as AnyHandler, implementation, this.logger) as never;
    }
    super.addService(service, guarded);
    const name = serviceNameOf(service);
    if (name !== undefined) this.served.push(name);
  }

  /** Full names of the services added so far (`hermes.v1.RoomService`, …), in order. */
  get services(): readonly string[] {
    return this.served;
  }
}

/** Binds a grpc-js server to an address (`host:port` or `unix:/path`); resolves to the bound port. */
export function bindServer(server: Server, address: string, creds: ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, creds, (err, port) => (err ? reject(err) : resolve(port)));
  });
}

export function shutdownServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Client metadata carrying the API key, if any. */
export function authMetadata(key: string | undefined): Metadata {
  const metadata = new Metadata();
  if (key) metadata.set("authorization", `Bearer ${key}`);
  return metadata;
}

export function clientCredentials(tls: boolean) {
  return tls ? credentials.createSsl() : credentials.createInsecure();
}

/** Awaits a callback-style unary client call; a failed call rejects with a HermesError. */
export function unaryCall<Res>(invoke: (callback: (err: ServiceError | null, res?: Res) => void) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke((err, res) => {
      if (err) reject(fromServiceError(err));
      else resolve(res as Res);
    });
  });
}

export function deadlineIn(ms: number): CallOptions {
  return { deadline: new Date(Date.now() + ms) };
}

/** Waits until a client's channel is ready, or rejects with `unavailable` naming the target. */
export function waitForReady(client: Client, timeoutMs: number, target: string): Promise<void> {
  return new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + timeoutMs, (err) =>
      err ? reject(new HermesError("unavailable", `cannot reach ${target}: ${err.message}`, { cause: err })) : resolve(),
    );
  });
}

export { Server, toHermesError };
