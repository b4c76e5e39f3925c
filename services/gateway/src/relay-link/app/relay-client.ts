import type { ClientDuplexStream, ServiceError } from "@grpc/grpc-js";
import {
  Backoff,
  type BackoffOptions,
  type Clock,
  fromServiceError,
  fromWireError,
  HermesError,
  type Logger,
  PeerChannel,
  sleep,
  toHermesError,
  toWireError,
} from "@hermes/common";
import { ttlDeadline, ttlExpired } from "@hermes/contract";
import type { DeliveryEnvelope, Receipt as WireReceipt } from "@hermes/proto/hermes/v1/delivery";
import {
  type GatewayFrame,
  type RelayDeliver,
  type RelayFrame,
  type RelayOutcome,
  type RelaySend,
  RelayServiceClient,
  type RosterBot,
  type TunnelAnswer,
  type TunnelCall,
} from "@hermes/proto/hermes/v1/relay";
import { RemoteRoster } from "./remote-roster.js";
import type { TunnelHandlers } from "./tunnel-handlers.js";

/** The link state `hermes gateway status` shows. */
export type RelayLinkState = "connecting" | "connected" | "backoff" | "refused" | "stopped";

/** Runs a delivery the relay forwarded here; resolves with the receipt once it has ended (the ingress). */
export type RelayIngress = (deliver: RelayDeliver & { envelope: DeliveryEnvelope }, signal: AbortSignal) => Promise<WireReceipt>;

export interface RelayClientOptions {
  /** The channel to the relay (`relayChannel`): its URL, this connection's key, keepalive. */
  channel: PeerChannel;
  /** The bots on the other connections; the client keeps it up to date. */
  remote?: RemoteRoster;
  /** This gateway's connection name at the relay (the one its key was issued for). */
  connection: string;
  gatewayId: string;
  version: string;
  logger: Logger;
  clock: Clock;
  /** This gateway's bots, as announced (read on connect and whenever they may have changed). */
  localBots: () => RosterBot[];
  ingress: RelayIngress;
  tunnel: TunnelHandlers;
  backoff?: Partial<BackoffOptions>;
  /** How often the local roster is compared with the last announce (config edits change titles). */
  rosterCheckMs?: number;
  /** How long a delivery may wait for its outcome after the relay queued it. */
  outcomeTimeoutMs: number;
}

interface PendingSend {
  frame: RelaySend;
  acked: boolean;
  promise: Promise<WireReceipt>;
  resolve(receipt: WireReceipt): void;
  reject(err: HermesError): void;
  timer: NodeJS.Timeout | undefined;
  /** The sender's signal: when it aborts, the sender no longer waits. */
  signal?: AbortSignal;
}

const MAX_FRAME_BYTES = 8 * 1024 * 1024;
const WELCOME_TIMEOUT_MS = 15_000;
/**
 * Bytes of tunnel answers written to the relay stream that HTTP/2 has not sent yet. At or above
 * it, streaming tunnel calls (a live tail) wait before producing more, as a live tail over /rpc
 * waits for its socket: a relay that reads slowly gets bigger pages, not a growing buffer here.
 */
export const MAX_UNSENT_TUNNEL_BYTES = 1024 * 1024;

/**
 * The channel to the relay: frames up to 8 MiB, keepalive pings (they keep a NAT mapping alive and
 * detect a dead path; the relay's policy allows them) and a short channel back-off, since the
 * client's own back-off decides when to reconnect. The tunnel caller shares it.
 */
export function relayChannel(
  relay: { url: string; key?: string | undefined },
  keepalive: { keepaliveMs?: number | undefined; keepaliveTimeoutMs?: number | undefined } = {},
): PeerChannel {
  return PeerChannel.open(
    { url: relay.url, key: relay.key, describe: `the relay (${relay.url})` },
    {
      maxMessageBytes: MAX_FRAME_BYTES,
      keepalive: { timeMs: keepalive.keepaliveMs ?? 20_000, timeoutMs: keepalive.keepaliveTimeoutMs ?? 10_000, withoutCalls: true },
      reconnectBackoffMs: { initial: 200, max: 2000 },
    },
  );
}

/**
 * The gateway's side of the relay: dials OUT (so it works from behind NAT), keeps one
 * Connect stream open with keepalive pings, reconnects with back-off, announces this gateway's
 * bots, carries deliveries both ways and serves tunnelled room calls.
 *
 * Outgoing deliveries wait here until the relay has acked them and sent their outcome. Across a
 * reconnect (a relay restart, a dead NAT path) every delivery still waiting is sent again: the relay
 * answers a repeat of a delivery it already holds with an ack (and the outcome, when known), so
 * nothing is lost and nothing is queued twice.
 */
export class RelayClient {
  readonly remote: RemoteRoster;
  private readonly client: RelayServiceClient;
  private readonly backoff: Backoff;
  private stateValue: RelayLinkState = "connecting";
  private lastError: string | undefined;
  private stream: ClientDuplexStream<GatewayFrame, RelayFrame> | undefined;
  private welcomed = false;
  private stopped = false;
  private readonly stopController = new AbortController();
  private readonly pending = new Map<string, PendingSend>();
  private readonly watchedSignals = new WeakSet<AbortSignal>();
  /** Deliveries the relay forwarded here that are still running (aborted when the link drops for good). */
  private readonly inbound = new Map<string, AbortController>();
  private readonly tunnelCalls = new Map<string, AbortController>();
  /** Bytes of tunnel answers on the current stream whose write has not completed. */
  private unsentTunnel = 0;
  private tunnelDrainWaiters: (() => void)[] = [];
  private lastAnnounce: string | undefined;
  private rosterTimer: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;
  private connectedAt: number | undefined;

  constructor(private readonly options: RelayClientOptions) {
    this.client = options.channel.client(RelayServiceClient);
    this.remote = options.remote ?? new RemoteRoster();
    this.backoff = new Backoff({ initialMs: 250, maxMs: 30_000, ...options.backoff });
  }

  get state(): RelayLinkState {
    return this.stateValue;
  }

  get error(): string | undefined {
    return this.lastError;
  }

  get connection(): string {
    return this.options.connection;
  }

  get url(): string {
    return this.options.channel.target.url;
  }

  start(): void {
    this.loop ??= this.run();
    this.rosterTimer = setInterval(() => this.rosterChanged(), this.options.rosterCheckMs ?? 5000);
    this.rosterTimer.unref();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      this.stateValue = "connecting";
      const ended = await this.connectOnce();
      if (this.stopped) break;
      this.stateValue = ended.reason === "unauthenticated" ? "refused" : "backoff";
      this.lastError = ended.message;
      if (this.stateValue === "refused")
        this.failPending(new HermesError("runtime_offline", `the relay refused this gateway: ${ended.message}`));
      const delay = this.stateValue === "refused" ? Math.max(this.backoff.nextDelayMs(), 5000) : this.backoff.nextDelayMs();
      this.options.logger.warn({ relay: this.url, reason: ended.reason, err: ended.message, retry_in_ms: delay }, "relay link down");
      await sleep(delay, this.stopController.signal);
    }
    this.stateValue = "stopped";
  }

  /** One stream, from hello to its end. Resolves with why it ended. */
  private connectOnce(): Promise<HermesError> {
    return new Promise((resolve) => {
      const stream = this.client.connect(this.options.channel.metadata());
      this.stream = stream;
      this.welcomed = false;
      let done = false;
      // A relay that accepts the connection but never welcomes us (hung, or not a relay) is given up on.
      const welcomeTimer = setTimeout(() => {
        if (!this.welcomed) stream.cancel();
      }, WELCOME_TIMEOUT_MS);
      welcomeTimer.unref();
      const finish = (err: HermesError) => {
        if (done) return;
        done = true;
        clearTimeout(welcomeTimer);
        if (this.stream === stream) this.stream = undefined;
        this.welcomed = false;
        this.linkLost();
        resolve(err);
      };
      stream.on("data", (frame: RelayFrame) => {
        try {
          this.onFrame(frame);
        } catch (err) {
          this.options.logger.warn({ err: toHermesError(err) }, "relay frame could not be handled");
        }
      });
      stream.on("error", (err: ServiceError) => finish(fromServiceError(err)));
      stream.on("end", () => finish(new HermesError("unavailable", "the relay ended the stream")));
      stream.write({
        frame: {
          $case: "hello",
          value: { connection: this.options.connection, gateway_id: this.options.gatewayId, version: this.options.version },
        },
      });
    });
  }

  /** Bytes of tunnel answers waiting to be sent on the relay stream (see MAX_UNSENT_TUNNEL_BYTES). */
  get unsentTunnelBytes(): number {
    return this.unsentTunnel;
  }

  /** Writes a tunnel answer, counted until HTTP/2 has sent it (flow control holds it while the relay does not read). */
  private writeTunnelAnswer(answer: TunnelAnswer): void {
    const stream = this.stream;
    if (!stream || !this.welcomed) return;
    // Pages travel as base64 (ASCII): characters are bytes.
    const bytes = answer.result_json.length;
    this.unsentTunnel += bytes;
    try {
      stream.write({ frame: { $case: "tunnel_answer", value: answer } }, () => this.tunnelAnswerSent(stream, bytes));
    } catch {
      this.tunnelAnswerSent(stream, bytes);
    }
  }

  private tunnelAnswerSent(stream: ClientDuplexStream<GatewayFrame, RelayFrame>, bytes: number): void {
    // A write of a stream that has ended no longer counts (linkLost started afresh).
    if (stream !== this.stream) return;
    this.unsentTunnel -= bytes;
    if (!this.tunnelFull()) this.wakeTunnelDrainWaiters();
  }

  private tunnelFull(): boolean {
    return this.unsentTunnel >= MAX_UNSENT_TUNNEL_BYTES;
  }

  private tunnelDrained(): Promise<void> {
    return new Promise((resolve) => {
      if (this.tunnelFull()) this.tunnelDrainWaiters.push(resolve);
      else resolve();
    });
  }

  private wakeTunnelDrainWaiters(): void {
    for (const resolve of this.tunnelDrainWaiters.splice(0)) resolve();
  }

  private write(frame: GatewayFrame): boolean {
    const stream = this.stream;
    if (!stream || !this.welcomed) return false;
    try {
      stream.write(frame);
      return true;
    } catch {
      return false;
    }
  }

  private onFrame(frame: RelayFrame): void {
    const f = frame.frame;
    switch (f?.$case) {
      case "welcome": {
        if (f.value.connection !== this.options.connection) {
          this.options.logger.error(
            { expected: this.options.connection, got: f.value.connection },
            "relay welcomed another connection name",
          );
        }
        this.welcomed = true;
        this.stateValue = "connected";
        this.connectedAt = this.options.clock.now();
        this.lastError = undefined;
        this.backoff.reset();
        this.remote.resetEpoch();
        this.options.logger.info({ relay: this.url, relay_id: f.value.relay_id, connection: this.options.connection }, "relay link up");
        this.lastAnnounce = undefined;
        this.rosterChanged();
        for (const p of this.pending.values()) this.write({ frame: { $case: "send", value: p.frame } });
        return;
      }
      case "roster":
        this.remote.update(f.value.epoch, f.value.bots, this.options.connection);
        return;
      case "ack": {
        const p = this.pending.get(f.value.delivery_id);
        if (!p) return;
        if (f.value.error) {
          this.settle(f.value.delivery_id, undefined, fromWireError(f.value.error));
          return;
        }
        if (!p.acked) {
          p.acked = true;
          this.armOutcomeTimer(f.value.delivery_id, p);
        }
        return;
      }
      case "outcome":
        this.onOutcome(f.value);
        return;
      case "deliver":
        this.onDeliver(f.value);
        return;
      case "tunnel_call":
        this.onTunnelCall(f.value);
        return;
      case "tunnel_cancel":
        this.tunnelCalls.get(f.value.call_id)?.abort();
        return;
      case "error":
        this.options.logger.warn(
          { frame: f.value.frame, delivery_id: f.value.delivery_id || undefined, error: f.value.error },
          "the relay refused a frame",
        );
        if (f.value.delivery_id) this.settle(f.value.delivery_id, undefined, fromWireError(f.value.error));
        return;
      case undefined:
        return;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Outgoing deliveries

  /**
   * Hands an envelope to the relay and resolves with the target's receipt when the delivery has
   * ended (rejects with the typed error: runtime_offline when the target dropped mid-delivery,
   * idempotency_conflict, unknown_target, …). Re-sending the same envelope joins the same wait.
   */
  send(frame: RelaySend & { envelope: DeliveryEnvelope }, signal?: AbortSignal): Promise<WireReceipt> {
    if (this.stopped)
      return Promise.reject(new HermesError("runtime_offline", "the relay link is stopping; the delivery continues after the restart"));
    if (this.stateValue === "refused") {
      return Promise.reject(new HermesError("runtime_offline", `the relay refused this gateway: ${this.lastError ?? "unauthenticated"}`));
    }
    const id = frame.envelope.delivery_id;
    const existing = this.pending.get(id);
    if (existing) return existing.promise;
    // Until the relay takes it, the envelope's own TTL bounds the wait (the relay would expire it too).
    const deadline = ttlDeadline(frame.envelope);
    if (ttlExpired(deadline, this.options.clock.now())) {
      // A retry that starts after the TTL ran out: nothing to do with the relay, so it is not blamed.
      return Promise.reject(
        new HermesError(
          "queued_expired",
          `the delivery's TTL of ${frame.envelope.ttl_seconds} s ran out (created ${frame.envelope.created_at}) before this attempt; nothing was sent`,
        ),
      );
    }
    let resolve!: (r: WireReceipt) => void;
    let reject!: (e: HermesError) => void;
    const promise = new Promise<WireReceipt>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const p: PendingSend = { frame, acked: false, promise, resolve, reject, timer: undefined };
    // The timer says when to look; the TTL rule says whether it has run out (a timer may fire a moment early).
    const expireAtDeadline = () => {
      p.timer = setTimeout(
        () => {
          if (p.acked) return;
          if (!ttlExpired(deadline, this.options.clock.now())) return expireAtDeadline();
          this.settle(
            id,
            undefined,
            new HermesError(
              "queued_expired",
              `the relay (${this.url}) could not be reached within the delivery's TTL of ${frame.envelope.ttl_seconds} s`,
            ),
          );
        },
        Math.max(1, deadline - this.options.clock.now()),
      );
      p.timer.unref?.();
    };
    expireAtDeadline();
    this.pending.set(id, p);
    if (signal) {
      p.signal = signal;
      // One listener per signal (the outbox passes the same one with every delivery), not one per send.
      if (!this.watchedSignals.has(signal)) {
        this.watchedSignals.add(signal);
        signal.addEventListener(
          "abort",
          () => {
            for (const [pendingId, pending] of [...this.pending]) {
              if (pending.signal === signal)
                this.settle(pendingId, undefined, new HermesError("runtime_offline", "the sender stopped waiting"));
            }
          },
          { once: true },
        );
      }
    }
    this.write({ frame: { $case: "send", value: frame } });
    return promise;
  }

  private armOutcomeTimer(id: string, p: PendingSend): void {
    if (p.timer) clearTimeout(p.timer);
    p.timer = setTimeout(() => {
      this.settle(
        id,
        undefined,
        new HermesError("delivery_timeout", `no outcome from the relay within ${Math.round(this.options.outcomeTimeoutMs / 1000)} s`),
      );
    }, this.options.outcomeTimeoutMs);
    p.timer.unref?.();
  }

  private onOutcome(outcome: RelayOutcome): void {
    const r = outcome.result;
    if (r?.$case === "receipt") this.settle(outcome.delivery_id, r.value);
    else this.settle(outcome.delivery_id, undefined, fromWireError(r?.value));
  }

  private settle(id: string, receipt: WireReceipt | undefined, error?: HermesError): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (p.timer) clearTimeout(p.timer);
    if (receipt) p.resolve(receipt);
    else p.reject(error ?? new HermesError("unknown", "the relay ended the delivery without an outcome"));
  }

  private failPending(error: HermesError): void {
    for (const id of [...this.pending.keys()]) this.settle(id, undefined, error);
  }

  /** Deliveries waiting for their outcome: `acked` ones the relay has committed, `unacked` ones not yet. */
  pendingSummary(): { acked: number; unacked: number } {
    let acked = 0;
    for (const p of this.pending.values()) if (p.acked) acked++;
    return { acked, unacked: this.pending.size - acked };
  }

  // -------------------------------------------------------------------------------------------
  // Incoming deliveries and tunnel calls

  private onDeliver(deliver: RelayDeliver): void {
    const envelope = deliver.envelope;
    const id = envelope?.delivery_id ?? "";
    if (!envelope) {
      this.write({
        frame: {
          $case: "result",
          value: {
            delivery_id: id,
            result: { $case: "error", value: toWireError(new HermesError("invalid_params", "deliver without an envelope")) },
          },
        },
      });
      return;
    }
    const controller = new AbortController();
    this.inbound.get(id)?.abort();
    this.inbound.set(id, controller);
    this.options
      .ingress({ ...deliver, envelope }, controller.signal)
      .then(
        (receipt) => ({ $case: "receipt" as const, value: receipt }),
        (err: unknown) => ({ $case: "error" as const, value: toWireError(err) }),
      )
      .then((result) => {
        if (this.inbound.get(id) === controller) this.inbound.delete(id);
        // Written on whatever stream is current; if the link dropped meanwhile the relay has told
        // the sender runtime_offline, and its retry is answered from the ingress's stored result.
        this.write({ frame: { $case: "result", value: { delivery_id: id, result } } });
      });
  }

  private onTunnelCall(call: TunnelCall): void {
    const answer = (result_json: string, end: boolean, error?: unknown) =>
      this.writeTunnelAnswer({ call_id: call.call_id, result_json, error: error === undefined ? undefined : toWireError(error), end });
    const controller = new AbortController();
    this.tunnelCalls.set(call.call_id, controller);
    const run = async () => {
      const handler = this.options.tunnel.get(call.method);
      let params: Record<string, unknown> = {};
      try {
        const parsed = JSON.parse(call.params_json || "{}") as unknown;
        if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) params = parsed as Record<string, unknown>;
        else throw new Error("not an object");
      } catch (err) {
        throw new HermesError("invalid_params", `tunnel params for ${call.method} are not a JSON object: ${(err as Error).message}`);
      }
      const ctx = { from_connection: call.from_connection, signal: controller.signal, drained: () => this.tunnelDrained() };
      if (handler.kind === "unary") {
        if (call.stream) throw new HermesError("invalid_params", `${call.method} is not a streaming method; call it with Tunnel`);
        const result = await handler.run(params, ctx);
        answer(JSON.stringify(result ?? null), true);
        return;
      }
      if (!call.stream) throw new HermesError("invalid_params", `${call.method} is a streaming method; call it with TunnelStream`);
      await handler.run(params, ctx, (item) => {
        if (!controller.signal.aborted) answer(JSON.stringify(item ?? null), false);
        return !this.tunnelFull();
      });
      answer("", true);
    };
    run()
      .catch((err: unknown) => {
        if (!controller.signal.aborted) answer("", true, err);
      })
      .finally(() => this.tunnelCalls.delete(call.call_id));
  }

  // -------------------------------------------------------------------------------------------
  // Roster

  /** Announces this gateway's bots if they changed since the last announce on this stream. */
  rosterChanged(): void {
    if (!this.welcomed) return;
    let bots: RosterBot[];
    try {
      bots = this.options.localBots();
    } catch (err) {
      this.options.logger.warn({ err: toHermesError(err) }, "building the roster announce failed");
      return;
    }
    const text = JSON.stringify(bots);
    if (text === this.lastAnnounce) return;
    if (this.write({ frame: { $case: "roster", value: { bots } } })) this.lastAnnounce = text;
  }

  // -------------------------------------------------------------------------------------------
  // Lifecycle

  private linkLost(): void {
    if (this.stateValue === "connected") this.stateValue = "backoff";
    this.connectedAt = undefined;
    // Tunnel calls cannot be answered on a new stream (the relay failed them already).
    for (const c of this.tunnelCalls.values()) c.abort();
    this.tunnelCalls.clear();
    this.unsentTunnel = 0;
    this.wakeTunnelDrainWaiters();
  }

  /** Since when the link is up (undefined while it is down). */
  get upSince(): number | undefined {
    return this.connectedAt;
  }

  /**
   * Graceful stop: deliveries still waiting are told runtime_offline (the outbox keeps them open and
   * sends them again after the restart), the stream is closed, the channel too.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    // Let results of deliveries the ingress has just finished (or abandoned) reach the relay.
    await new Promise((r) => setImmediate(r));
    this.stopped = true;
    this.stopController.abort();
    if (this.rosterTimer) clearInterval(this.rosterTimer);
    this.failPending(new HermesError("runtime_offline", "the gateway is stopping; the delivery continues after the restart"));
    for (const c of this.inbound.values()) c.abort();
    const stream = this.stream;
    if (stream) {
      stream.end();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        stream.once("close", done);
        stream.once("error", done);
        stream.once("status", done);
      });
      stream.cancel();
    }
    await this.loop;
    this.options.channel.close();
  }
}
