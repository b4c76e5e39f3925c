import { lookup } from "node:dns/promises";
import { type AddressInfo, createServer, type Server as NetServer, type Socket } from "node:net";
import {
  type ConnectionInjector,
  ServerCredentials,
  ServerInterceptingCall,
  type ServerInterceptor,
  type ServerOptions,
} from "@grpc/grpc-js";
import { GuardedServer } from "./grpc.js";
import { toServiceError } from "./grpc-status.js";
import type { Logger } from "./logger.js";
import { parseHostPort } from "./net.js";
import { HermesError } from "./pure/errors.js";

/** What one client may hold of a daemon's gRPC TCP port (the gateway's and the relay's). */
export const GRPC_SERVER_LIMITS = {
  /** HTTP/2 streams one connection may have open (SETTINGS_MAX_CONCURRENT_STREAMS); a client queues the rest. */
  maxStreamsPerConnection: 256,
  /** Unary calls of one connection that may hold memory at once (see `heldCallsGate`). */
  maxHeldCallsPerConnection: 8,
  /** Open streams of the services that need no key (health `Watch`, reflection), per server. */
  maxKeylessStreams: 100,
  /** A connection that has not sent the HTTP/2 client preface by then is closed. */
  prefaceTimeoutMs: 5000,
} as const;

/** The 24-byte HTTP/2 client connection preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`, RFC 9113 section 3.4). */
const HTTP2_PREFACE_BYTES = 24;

/** Services served without a key: health and reflection (their streams are capped per server). */
const KEYLESS_SERVICE_PREFIXES = [
  "/grpc.health.v1.Health/",
  "/grpc.reflection.v1.ServerReflection/",
  "/grpc.reflection.v1alpha.ServerReflection/",
];

/**
 * Runs `work` once the microtasks queued so far, and the ones they queue, have run: a nextTick
 * scheduled from a microtask runs only after the microtask queue is empty. By then a handler that
 * answers synchronously (a page read from SQLite) has handed its answer to grpc-js.
 */
function afterSynchronousWork(work: () => void): void {
  queueMicrotask(() => process.nextTick(work));
}

/** The unary calls of one TCP connection that hold memory, and the ones waiting for their turn. */
interface ConnectionCalls {
  held: number;
  readonly waiting: (() => void)[];
}

/**
 * Bounds what one connection's unary calls pin in memory. A call is *held* while its request is
 * read, while the handler it started runs synchronously, and while its answer waits for the client
 * to take it (HTTP/2 flow control keeps an unread answer in this process). Past `max` held calls,
 * further calls of that connection wait before their request is even read, in order. So a client
 * that never reads pins at most `max` answers, however many calls it sends at once.
 *
 * A call still running once its synchronous work is done (waiting for a commit, a turn, a peer) is
 * not held until it answers: pipelined sends, deliveries and member turns are not limited by it.
 */
function heldCallsGate(max: number): ServerInterceptor {
  const connections = new Map<string, ConnectionCalls>();
  const admitWaiting = (key: string, conn: ConnectionCalls) => {
    while (conn.held < max && conn.waiting.length > 0) conn.waiting.shift()!();
    if (conn.held === 0 && conn.waiting.length === 0) connections.delete(key);
  };
  return (method, call) => {
    if (method.requestStream || method.responseStream) return new ServerInterceptingCall(call);
    const info = call.getConnectionInfo();
    const key = `${info.remoteAddress}:${info.remotePort}`;
    let conn = connections.get(key);
    if (conn === undefined) {
      conn = { held: 0, waiting: [] };
      connections.set(key, conn);
    }
    const calls = conn;
    let held = false;
    let answered = false;
    let admit: (() => void) | undefined;
    const hold = () => {
      if (held) return;
      held = true;
      calls.held++;
    };
    const release = () => {
      if (!held) return;
      held = false;
      calls.held--;
      admitWaiting(key, calls);
    };
    const finish = () => {
      answered = true;
      const at = admit ? calls.waiting.indexOf(admit) : -1;
      if (at >= 0) calls.waiting.splice(at, 1);
      release();
      if (calls.held === 0 && calls.waiting.length === 0) connections.delete(key);
    };
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, nextMetadata) => {
            admit = () => {
              hold();
              nextMetadata(metadata);
            };
            if (calls.held < max && calls.waiting.length === 0) admit();
            else calls.waiting.push(admit);
          },
          onReceiveHalfClose: (nextHalfClose) => {
            nextHalfClose();
            afterSynchronousWork(() => {
              if (!answered) release();
            });
          },
          onCancel: finish,
        }),
      sendMessage: (message, next) => {
        answered = true;
        hold();
        next(message);
      },
      sendStatus: (status, next) => {
        finish();
        next(status);
      },
    });
  };
}

/** Refuses a health `Watch` or reflection stream past `max` open ones (they need no key, so anyone may open them). */
function keylessStreamsCap(max: number): ServerInterceptor {
  let open = 0;
  return (method, call) => {
    if (!method.responseStream || !KEYLESS_SERVICE_PREFIXES.some((prefix) => method.path.startsWith(prefix))) {
      return new ServerInterceptingCall(call);
    }
    if (open >= max) {
      const { code, details, metadata } = toServiceError(
        new HermesError("limit_exceeded", `this server already serves ${max} health and reflection streams; try again later`, {
          data: { limit: max },
        }),
      );
      const refusal = { code: code!, details: details!, metadata: metadata ?? null };
      return new ServerInterceptingCall(call, {
        // The handler never sees the call: it is answered before its request is read.
        start: (next) => next({ onReceiveMetadata: () => call.sendStatus(refusal) }),
      });
    }
    open++;
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      open--;
    };
    return new ServerInterceptingCall(call, {
      start: (next) => next({ onCancel: close }),
      sendStatus: (status, next) => {
        close();
        next(status);
      },
    });
  };
}

function listen(server: NetServer, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * A grpc-js server for a daemon's TCP port, with the limits of GRPC_SERVER_LIMITS: streams and
 * held unary calls per connection, keyless streams per server, and a deadline for the HTTP/2
 * preface. It accepts TCP connections itself (grpc-js's connection injector) so that it can close
 * a connection that never speaks HTTP/2, which grpc-js would keep forever. Every handler is
 * guarded as in GuardedServer.
 */
export class BoundedGrpcServer extends GuardedServer {
  private readonly listeners: NetServer[] = [];
  private readonly sockets = new Set<Socket>();

  /** `logger` is where a guarded handler failure is reported (see GuardedServer). */
  constructor(logger: Logger | undefined, options: ServerOptions = {}) {
    super(logger, {
      "grpc.max_concurrent_streams": GRPC_SERVER_LIMITS.maxStreamsPerConnection,
      ...options,
      interceptors: [
        heldCallsGate(GRPC_SERVER_LIMITS.maxHeldCallsPerConnection),
        keylessStreamsCap(GRPC_SERVER_LIMITS.maxKeylessStreams),
        ...(options.interceptors ?? []),
      ],
    });
  }

  /**
   * Listens on `host:port` without TLS; resolves to the port. Like grpc-js's own bind, it listens
   * on every address the host resolves to (port 0 picks one free port for all of them) and
   * succeeds when at least one of them could be bound (`localhost` on a host without IPv6).
   */
  async listenTcp(address: string): Promise<number> {
    const { host, port } = parseHostPort(address);
    const injector = this.createConnectionInjector(ServerCredentials.createInsecure());
    let bound = port;
    let failure: unknown;
    let listening = 0;
    for (const { address: ip } of await lookup(host, { all: true })) {
      const listener = createServer((socket) => this.accept(socket, injector));
      try {
        bound = await listen(listener, bound, ip);
        this.listeners.push(listener);
        listening++;
      } catch (err) {
        failure ??= err;
      }
    }
    if (listening === 0) throw failure;
    return bound;
  }

  private accept(socket: Socket, injector: ConnectionInjector): void {
    this.sockets.add(socket);
    const deadline = setTimeout(() => {
      if (socket.bytesRead < HTTP2_PREFACE_BYTES) socket.destroy();
    }, GRPC_SERVER_LIMITS.prefaceTimeoutMs).unref();
    socket.once("close", () => {
      clearTimeout(deadline);
      this.sockets.delete(socket);
    });
    injector.injectConnection(socket);
  }

  private closeListeners(): void {
    for (const listener of this.listeners) listener.close();
  }

  override tryShutdown(callback: (error?: Error) => void): void {
    this.closeListeners();
    super.tryShutdown(callback);
  }

  override forceShutdown(): void {
    this.closeListeners();
    super.forceShutdown();
    for (const socket of this.sockets) socket.destroy();
  }
}
