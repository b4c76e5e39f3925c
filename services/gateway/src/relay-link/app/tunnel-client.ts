import type { ServiceError } from "@grpc/grpc-js";
import { fromServiceError, HermesError, type PeerChannel } from "@hermes/common";
import { RelayServiceClient, type TunnelReply } from "@hermes/proto/hermes/v1/relay";

function parseResult(json: string, method: string): unknown {
  try {
    return JSON.parse(json) as unknown;
  } catch (err) {
    throw new HermesError("internal", `${method} through the relay tunnel answered with text that is not JSON: ${(err as Error).message}`);
  }
}

/**
 * Calls a method on another gateway through the relay tunnel: how this gateway reaches a
 * room authority (or a member) that nobody can dial. Authenticated by this gateway's own
 * connection key, on the relay's channel; errors keep the reason and the words the other gateway
 * (or the relay) gave.
 */
export class TunnelClient {
  constructor(
    private readonly relay: PeerChannel,
    /** The relay roster's connection for a gateway id (RemoteRoster.connectionOf). */
    private readonly gateways: (gatewayId: string) => string | undefined = () => undefined,
  ) {}

  private get client(): RelayServiceClient {
    return this.relay.client(RelayServiceClient);
  }

  /**
   * The connection to call to reach gateway `gatewayId`: the one the relay roster lists with that
   * gateway id; only when the roster has no such gateway, a connection named like the id (lower
   * case, as connection names are), which is the default name a gateway connects under.
   */
  connectionFor(gatewayId: string): { connection: string; from: "roster" | "name" } {
    const listed = this.gateways(gatewayId);
    return listed ? { connection: listed, from: "roster" } : { connection: gatewayId.toLowerCase(), from: "name" };
  }

  /** One request, one result. */
  call(
    connection: string,
    method: string,
    params: Record<string, unknown>,
    options: { signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const call = this.client.tunnel(
        { connection, method, params_json: JSON.stringify(params) },
        this.relay.metadata(),
        this.relay.callOptions(options.timeoutMs),
        (err: ServiceError | null, reply?: TunnelReply) => {
          options.signal?.removeEventListener("abort", onAbort);
          if (err) reject(fromServiceError(err));
          else {
            try {
              resolve(parseResult(reply?.result_json ?? "null", method));
            } catch (e) {
              reject(e);
            }
          }
        },
      );
      const onAbort = () => call.cancel();
      options.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** A streaming method: the items as they come, until the other side ends (or `signal` aborts). */
  async *stream(connection: string, method: string, params: Record<string, unknown>, signal?: AbortSignal): AsyncGenerator<unknown> {
    const call = this.client.tunnelStream({ connection, method, params_json: JSON.stringify(params) }, this.relay.metadata());
    const onAbort = () => call.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const reply of call as AsyncIterable<TunnelReply>) yield parseResult(reply.result_json, method);
    } catch (err) {
      if (signal?.aborted) return;
      throw typeof (err as ServiceError).code === "number" ? fromServiceError(err as ServiceError) : err;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      call.cancel();
    }
  }
}
