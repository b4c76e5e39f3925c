import type { Client } from "@grpc/grpc-js";
import { type ChannelOptions, HermesError, PeerChannel, type UnaryMethod, unixSocketAnswers } from "@hermes/common/client";
import { defaultHomePath, HermesHome } from "@hermes/gateway/home";

/** The options every command takes. */
export interface GlobalOptions {
  home?: string;
  gateway?: string;
  key?: string;
  json?: boolean;
  profile?: string;
}

export type { UnaryMethod };

/** A folder given on the command line; a blank one (`--home "$UNSET"`) would mean the current folder, and is refused. */
export function folderOption(value: string, option: string): string {
  if (value.trim() === "") throw new HermesError("invalid_params", `${option} is blank: name a folder, or leave the option out`);
  return value;
}

/** Whole room logs and profile lists come back in one answer; commands wait up to two minutes by default. */
const CLI_CHANNEL: ChannelOptions = { maxMessageBytes: 64 * 1024 * 1024, deadlineMs: 120_000 };

/** What a command needs: where the home is, how to reach the gateway, how to print. */
export class CliContext {
  readonly home: HermesHome;
  readonly json: boolean;
  readonly key: string | undefined;
  readonly gatewayUrl: string | undefined;
  readonly profile: string | undefined;
  private opened: PeerChannel | undefined;

  constructor(options: GlobalOptions) {
    this.home = new HermesHome(options.home === undefined ? defaultHomePath() : folderOption(options.home, "--home"));
    this.json = options.json ?? false;
    this.key = options.key ?? process.env.HERMES_KEY;
    this.gatewayUrl = options.gateway ?? process.env.HERMES_GATEWAY;
    this.profile = options.profile;
  }

  /**
   * Where gRPC calls go: --gateway URL (with --key), else the control socket of the gateway
   * serving --home (no key). Opened on first use.
   */
  get channel(): PeerChannel {
    this.opened ??= this.gatewayUrl
      ? PeerChannel.open(
          { url: this.gatewayUrl, key: this.key, unreachableHint: "check the URL and that the gateway runs", nameReplies: false },
          CLI_CHANNEL,
        )
      : PeerChannel.open(
          {
            url: `unix:${this.home.controlSocket}`,
            describe: `the gateway serving ${this.home.root}`,
            unreachableHint: `start one with: hermes --home ${this.home.root} gateway start`,
            nameReplies: false,
          },
          CLI_CHANNEL,
        );
    return this.opened;
  }

  /**
   * True when a gateway answers on this home's control socket. A socket file left by a crashed
   * gateway does not count.
   */
  async gatewayIsLive(): Promise<boolean> {
    if (this.gatewayUrl) return true;
    return unixSocketAnswers(this.home.controlSocket);
  }

  client<C extends Client>(Ctor: new (...args: ConstructorParameters<typeof Client>) => C): C {
    return this.channel.client(Ctor);
  }

  /** Metadata of a call: the key when the gateway is reached by URL (the control socket needs none). */
  metadata() {
    return this.channel.metadata();
  }

  /** Calls a unary method; a gateway that cannot be reached is `unavailable` with a hint to start it. */
  call<Req, Res>(client: Client, method: UnaryMethod<Req, Res>, request: Req, timeoutMs?: number): Promise<Res> {
    return this.channel.unary(client, method, request, { timeoutMs });
  }

  close(): void {
    this.opened?.close();
  }
}
