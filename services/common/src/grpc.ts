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
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { bearerToken, type KeyRing } from "./auth.js";
import { fromServiceError, HermesError, toHermesError, toServiceError } from "./errors.js";
import type { Metrics } from "./metrics.js";

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
        const denied = authenticate(call.metadata, options.auth);
        if (denied) {
          end?.({ code: "UNAUTHENTICATED" });
          callback(toServiceError(denied) as ServerErrorResponse);
          return;
        }
        const controller = new AbortController();
        call.on("cancelled", () => controller.abort());
        Promise.resolve()
          .then(() => fn(call.request, { metadata: call.metadata, peer: call.getPeer(), signal: controller.signal }))
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
      // Streaming handlers manage their own lifecycle; we only gate them on the key.
      const raw = handler as (call: { metadata: Metadata; emit(event: string, err: unknown): boolean }) => void;
      impl[name] = (call: { metadata: Metadata; emit(event: string, err: unknown): boolean }) => {
        const denied = authenticate(call.metadata, options.auth);
        if (denied) {
          options.metrics?.rpcDuration.observe({ method: label, transport: options.transport, code: "UNAUTHENTICATED" }, 0);
          call.emit("error", toServiceError(denied));
          return;
        }
        raw(call);
      };
    }
  }
  return impl;
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
