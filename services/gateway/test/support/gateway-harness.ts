import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallOptions, Metadata, ServiceError } from "@grpc/grpc-js";
import { type Client, credentials } from "@grpc/grpc-js";
import { authMetadata, createLogger, unaryCall } from "@hermes/common";
import { Gateway, type GatewayOptions } from "../../src/daemon/gateway.js";

export const TEST_KEY = "test-key-0123456789abcdef";

export interface TestGateway {
  gateway: Gateway;
  home: string;
  /** A client of `Ctor` on the TCP port (pass key: undefined for none) or the control socket. */
  client<C extends Client>(
    Ctor: new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => C,
    via?: "tcp" | "control",
  ): C;
  stop(): Promise<void>;
  /** Stops and removes the home. */
  destroy(): Promise<void>;
}

/** A real gateway on 127.0.0.1 ephemeral ports with its own temporary HERMES_HOME. */
export async function startTestGateway(options: Partial<GatewayOptions> & { key?: string } = {}): Promise<TestGateway> {
  const home = options.home ?? mkdtempSync(join(tmpdir(), "hermes-gw-"));
  const key = options.key ?? TEST_KEY;
  const gateway = await Gateway.start({
    home,
    overrides: { grpc: "127.0.0.1:0", http: "127.0.0.1:0", ...options.overrides },
    logger: options.logger ?? createLogger("gateway", "silent"),
    env: { ...(key ? { API_SERVER_KEY: key } : {}), ...options.env },
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.syncFile ? { syncFile: options.syncFile } : {}),
  });
  const clients: Client[] = [];
  const stop = async () => {
    for (const c of clients) c.close();
    await gateway.stop();
  };
  return {
    gateway,
    home,
    client(Ctor, via = "tcp") {
      const address = via === "tcp" ? gateway.grpcAddress : `unix:${gateway.home.controlSocket}`;
      const c = new Ctor(address, credentials.createInsecure());
      clients.push(c);
      return c;
    },
    stop,
    async destroy() {
      await stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** The 4-argument overload of a ts-proto client method (the one TypeScript infers from). */
type Unary<Req, Res> = (req: Req, md: Metadata, options: Partial<CallOptions>, cb: (err: ServiceError | null, res: Res) => void) => unknown;

/** Calls a unary method with `authorization: Bearer <key>` (null: no key), rejecting with a HermesError. */
export function call<Req, Res>(client: Client, method: Unary<Req, Res>, req: Req, key: string | null = TEST_KEY): Promise<Res> {
  return unaryCall<Res>((cb) => method.call(client, req, authMetadata(key ?? undefined), {}, (err, res) => cb(err, res)));
}
