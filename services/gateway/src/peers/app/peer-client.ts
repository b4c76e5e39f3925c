import { HermesError, PeerChannel, type UnaryMethod } from "@hermes/common";
import {
  type DmRequest,
  type GetRunRequest,
  PeerServiceClient,
  type Run,
  type RunReply,
  type StartRunRequest,
  type StopRunRequest,
} from "@hermes/proto/hermes/v1/peers";
import type { PeerDirectory } from "./peer-directory.js";

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

/**
 * A registered peer's PeerService, reached over the peer's channel (its URL and key from the
 * peer directory). Failures are typed so `hermes peer` exits 1 for peer/transport errors (unknown
 * peer, missing key, unreachable) and 2 for refusals (a wrong key, a bad request, an idempotency
 * conflict).
 */
export class PeerClient {
  private readonly client: PeerServiceClient;

  private constructor(
    readonly peer: string,
    private readonly channel: PeerChannel,
  ) {
    this.client = channel.client(PeerServiceClient);
  }

  /** Looks the peer up; an unknown peer or a missing key is missing_config (exit 1) naming what to set. */
  static open(directory: PeerDirectory, peer: string): PeerClient {
    return new PeerClient(peer, PeerChannel.toPeer(directory, peer));
  }

  get url(): string {
    return this.channel.target.url;
  }

  private async call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, timeoutMs: number): Promise<Res> {
    try {
      return await this.channel.unary(this.client, method, request, { timeoutMs });
    } catch (err) {
      const e = err as HermesError;
      if (e.reason !== "method_not_found") throw e;
      const said = e.cause instanceof Error ? e.cause.message : e.message;
      throw new HermesError("unknown", `${this.channel.describe} does not serve peer runs (an older gateway?): ${said}`, {
        data: e.data,
        cause: e,
      });
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
    this.channel.close();
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
