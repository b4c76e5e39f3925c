import type { CallOptions, ChannelCredentials, Client, ClientOptions, Metadata, ServiceError } from "@grpc/grpc-js";
import { credentials } from "@grpc/grpc-js";
import { authMetadata, HermesError, parseGrpcUrl, plainTransportText, unaryCall, unixSocketAnswers } from "@hermes/common/client";
import { defaultHomePath, HermesHome } from "@hermes/gateway/home";

/** The options every command takes. */
export interface GlobalOptions {
  home?: string;
  gateway?: string;
  key?: string;
  json?: boolean;
  profile?: string;
}

type ClientConstructor<C extends Client> = new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>) => C;

export type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;

/** What a command needs: where the home is, how to reach the gateway, how to print. */
export class CliContext {
  readonly home: HermesHome;
  readonly json: boolean;
  readonly key: string | undefined;
  readonly gatewayUrl: string | undefined;
  readonly profile: string | undefined;
  private readonly clients: Client[] = [];

  constructor(options: GlobalOptions) {
    this.home = new HermesHome(options.home ?? defaultHomePath());
    this.json = options.json ?? false;
    this.key = options.key ?? process.env.HERMES_KEY;
    this.gatewayUrl = options.gateway ?? process.env.HERMES_GATEWAY;
    this.profile = options.profile;
  }

  /** Where gRPC calls go: --gateway URL, else the control socket of the gateway serving --home. */
  get target(): { address: string; tls: boolean; describe: string } {
    if (this.gatewayUrl) {
      const { target, tls } = parseGrpcUrl(this.gatewayUrl);
      return { address: target, tls, describe: this.gatewayUrl };
    }
    return { address: `unix:${this.home.controlSocket}`, tls: false, describe: `the gateway serving ${this.home.root}` };
  }

  /**
   * True when a gateway answers on this home's control socket. A socket file left by a crashed
   * gateway does not count.
   */
  async gatewayIsLive(): Promise<boolean> {
    if (this.gatewayUrl) return true;
    return unixSocketAnswers(this.home.controlSocket);
  }

  client<C extends Client>(Ctor: ClientConstructor<C>): C {
    const { address, tls } = this.target;
    const client = new Ctor(address, tls ? credentials.createSsl() : credentials.createInsecure(), {
      "grpc.max_receive_message_length": 64 * 1024 * 1024,
    });
    this.clients.push(client);
    return client;
  }

  metadata(): Metadata {
    return authMetadata(this.gatewayUrl ? this.key : undefined);
  }

  /** Calls a unary method; transport failures become `unavailable` with a hint to start the gateway. */
  async call<Req, Res>(client: Client, method: UnaryMethod<Req, Res>, request: Req, timeoutMs = 120_000): Promise<Res> {
    try {
      return await unaryCall<Res>((cb) =>
        method.call(client, request, this.metadata(), { deadline: new Date(Date.now() + timeoutMs) }, (err, res) => cb(err, res)),
      );
    } catch (err) {
      if (err instanceof HermesError && err.reason === "unavailable") {
        const hint = this.gatewayUrl
          ? `check the URL and that the gateway runs`
          : `start one with: hermes --home ${this.home.root} gateway start`;
        throw new HermesError("unavailable", `cannot reach ${this.target.describe}: ${plainTransportText(err.message)}; ${hint}`, {
          cause: err,
        });
      }
      throw err;
    }
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}
