import type { CallOptions, Metadata, ServiceError } from "@grpc/grpc-js";
import { authMetadata, clientCredentials, HermesError, parseGrpcUrl, unaryCall } from "@hermes/common";
import {
  type DmRequest,
  type GetRunRequest,
  PeerServiceClient,
  type Run,
  type RunReply,
  type StartRunRequest,
  type StopRunRequest,
} from "@hermes/proto/hermes/v1/peers";
import { type PeerDirectory, peerKeyName } from "./peer-directory.js";

/** What the calling side states about the sender of a dm or run. */
export interface PeerSender {
  profile: string;
  gateway: string;
  name: string;
}

export interface PeerMessage {
  /** The profile on the peer; empty: its default bot. */
  profile: string;
  input: string;
  sender: PeerSender;
  idempotency_key?: string | undefined;
}

/** Slack on top of a server-side wait before the client gives up on the call itself. */
const CALL_MARGIN_MS = 30_000;
const SHORT_CALL_MS = 30_000;

type Unary<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;

/**
 * A registered peer's PeerService, reached with the URL and key the peer directory holds.
 * Failures are typed so `hermes peer` exits 1 for peer/transport errors (unknown peer, missing key,
 * unreachable) and 2 for refusals (a wrong key, a bad request, an idempotency conflict).
 */
export class PeerClient {
  private constructor(
    readonly peer: string,
    readonly url: string,
    private readonly key: string,
    private readonly client: PeerServiceClient,
  ) {}

  /** Looks the peer up; an unknown peer or a missing key is missing_config (exit 1) naming what to set. */
  static open(directory: PeerDirectory, peer: string): PeerClient {
    const url = directory.url(peer);
    if (!url) {
      throw new HermesError(
        "missing_config",
        `unknown peer ${peer}: register it with hermes peer add ${peer} --url grpc://HOST:PORT --key KEY`,
        {
          data: { peer },
        },
      );
    }
    const key = directory.key(peer);
    if (!key) {
      const variable = peerKeyName(peer);
      throw new HermesError(
        "missing_config",
        `no key for peer ${peer}: set ${variable} in HERMES_HOME/.env (hermes peer add ${peer} --url ${url} --key KEY)`,
        {
          data: { peer, key_variable: variable },
        },
      );
    }
    let target: { target: string; tls: boolean };
    try {
      target = parseGrpcUrl(url);
    } catch (err) {
      throw new HermesError("missing_config", `peer ${peer} has a bad url in config.yaml: ${(err as Error).message}`, {
        data: { peer },
        cause: err,
      });
    }
    const client = new PeerServiceClient(target.target, clientCredentials(target.tls), {
      "grpc.max_receive_message_length": 8 * 1024 * 1024,
    });
    return new PeerClient(peer, url, key, client);
  }

  private async call<Req, Res>(method: Unary<Req, Res>, request: Req, timeoutMs: number): Promise<Res> {
    try {
      return await unaryCall<Res>((cb) =>
        method.call(this.client, request, authMetadata(this.key), { deadline: new Date(Date.now() + timeoutMs) }, (err, res) =>
          cb(err, res),
        ),
      );
    } catch (err) {
      throw this.peerError(err);
    }
  }

  /** Names the peer in every failure, and says what to do about the ones an operator can fix. */
  private peerError(err: unknown): HermesError {
    const e = err instanceof HermesError ? err : new HermesError("internal", String(err), { cause: err });
    const where = `peer ${this.peer} (${this.url})`;
    const data = { ...e.data, peer: this.peer };
    switch (e.reason) {
      case "unauthenticated":
        return new HermesError(
          "unauthenticated",
          `${where} refused our key (${peerKeyName(this.peer)}): ${e.message}. Nothing ran there; set the peer's API_SERVER_KEY with hermes peer add ${this.peer} --url ${this.url} --key KEY`,
          { data, cause: e },
        );
      case "unavailable":
        return new HermesError("unavailable", `cannot reach ${where}: ${e.message}`, { data, cause: e });
      case "timeout":
        return new HermesError("timeout", `${where} did not answer in time: ${e.message}`, { data, cause: e });
      case "method_not_found":
        return new HermesError("unknown", `${where} does not serve peer runs (an older gateway?): ${e.message}`, { data, cause: e });
      default:
        return new HermesError(e.reason, `${where}: ${e.message}`, { data, cause: e });
    }
  }

  /** One turn in the peer's canonical Bot Chat; answers when it has ended, or after waitSeconds with it still going. */
  dm(message: PeerMessage, waitSeconds: number): Promise<RunReply> {
    const request: DmRequest = { ...wireMessage(message), wait_seconds: waitSeconds };
    return this.call<DmRequest, RunReply>(this.client.dm, request, waitSeconds * 1000 + CALL_MARGIN_MS);
  }

  startRun(message: PeerMessage): Promise<RunReply> {
    return this.call<StartRunRequest, RunReply>(this.client.startRun, wireMessage(message), SHORT_CALL_MS);
  }

  getRun(runId: string, waitSeconds = 0): Promise<Run> {
    return this.call<GetRunRequest, Run>(
      this.client.getRun,
      { run_id: runId, wait_seconds: waitSeconds },
      waitSeconds * 1000 + CALL_MARGIN_MS,
    );
  }

  stopRun(runId: string): Promise<Run> {
    return this.call<StopRunRequest, Run>(this.client.stopRun, { run_id: runId }, SHORT_CALL_MS);
  }

  close(): void {
    this.client.close();
  }
}

function wireMessage(m: PeerMessage): StartRunRequest {
  return {
    profile: m.profile,
    input: m.input,
    sender_profile: m.sender.profile,
    sender_gateway: m.sender.gateway,
    sender_name: m.sender.name,
    idempotency_key: m.idempotency_key ?? "",
  };
}
