import { fromWireError, HermesError, type Logger, newId } from "@hermes/common";
import type { TunnelAnswer } from "@hermes/proto/hermes/v1/relay";
import type { SessionTable } from "../../connections/app/sessions.js";
import type { RelayMetrics } from "../../home/app/relay-metrics.js";

export interface TunnelSink {
  /** One result (unary) or item (stream), JSON text. */
  item(resultJson: string): void;
  end(): void;
  fail(error: HermesError): void;
}

interface OpenCall {
  target: string;
  method: string;
  sink: TunnelSink;
  timer?: NodeJS.Timeout;
}

/**
 * The tunnel (docs/PROTOCOL.md "Tunnel"): a call for a gateway nobody can dial travels down that
 * gateway's Connect stream as `tunnel_call`; its `tunnel_answer`s come back up the same stream and are
 * handed to the caller. The relay does not interpret methods or params: the target gateway serves
 * only the methods it registered and answers method_not_found for the rest.
 */
export class TunnelRouter {
  private readonly calls = new Map<string, OpenCall>();

  constructor(
    private readonly sessions: SessionTable,
    private readonly metrics: RelayMetrics,
    private readonly logger: Logger,
  ) {}

  /**
   * Sends the call down the target's stream. Unary calls time out after `timeoutMs`; a stream runs
   * until the target ends it, the caller goes away (`signal`) or the target disconnects.
   */
  open(
    call: { caller: string; target: string; method: string; paramsJson: string; stream: boolean; timeoutMs: number },
    sink: TunnelSink,
    signal: AbortSignal,
  ): void {
    const session = this.sessions.get(call.target);
    if (!session) {
      throw new HermesError(
        "unavailable",
        `the gateway of connection ${call.target} is not connected to the relay; retry when it is back`,
        { data: { connection: call.target } },
      );
    }
    const callId = newId("tun");
    const open: OpenCall = { target: call.target, method: call.method, sink };
    if (!call.stream) {
      open.timer = setTimeout(() => {
        this.finish(callId, "timeout");
        session.send({ frame: { $case: "tunnel_cancel", value: { call_id: callId } } });
        sink.fail(
          new HermesError(
            "timeout",
            `${call.method} on connection ${call.target} did not answer within ${Math.round(call.timeoutMs / 1000)} s`,
          ),
        );
      }, call.timeoutMs);
    }
    this.calls.set(callId, open);
    signal.addEventListener(
      "abort",
      () => {
        if (!this.calls.has(callId)) return;
        this.finish(callId, "cancelled");
        this.sessions.get(call.target)?.send({ frame: { $case: "tunnel_cancel", value: { call_id: callId } } });
      },
      { once: true },
    );
    const sent = session.send({
      frame: {
        $case: "tunnel_call",
        value: { call_id: callId, from_connection: call.caller, method: call.method, params_json: call.paramsJson, stream: call.stream },
      },
    });
    if (!sent) {
      this.finish(callId, "unavailable");
      throw new HermesError("unavailable", `the gateway of connection ${call.target} just disconnected; retry`);
    }
  }

  /** An answer from `from`. False when no such call is open for that connection (ignored). */
  answer(from: string, answer: TunnelAnswer): boolean {
    const open = this.calls.get(answer.call_id);
    if (!open || open.target !== from) return false;
    if (answer.error) {
      const error = fromWireError(answer.error, "internal");
      this.finish(answer.call_id, error.reason);
      open.sink.fail(error);
      return true;
    }
    if (answer.result_json) open.sink.item(answer.result_json);
    if (answer.end) {
      this.finish(answer.call_id, "ok");
      open.sink.end();
    }
    return true;
  }

  /** The target's stream ended: its open calls fail with `unavailable`. */
  connectionDown(connection: string): void {
    for (const [id, open] of [...this.calls]) {
      if (open.target !== connection) continue;
      this.finish(id, "unavailable");
      open.sink.fail(new HermesError("unavailable", `the gateway of connection ${connection} disconnected during ${open.method}; retry`));
    }
  }

  private finish(callId: string, result: string): void {
    const open = this.calls.get(callId);
    if (!open) return;
    if (open.timer) clearTimeout(open.timer);
    this.calls.delete(callId);
    this.metrics.tunnelCalls.inc({ result });
    if (result !== "ok") this.logger.debug({ call_id: callId, method: open.method, target: open.target, result }, "tunnel call ended");
  }

  get openCalls(): number {
    return this.calls.size;
  }
}
