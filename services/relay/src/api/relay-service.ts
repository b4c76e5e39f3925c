import type {
  ServerDuplexStream,
  ServerErrorResponse,
  ServerUnaryCall,
  ServerWritableStream,
  sendUnaryData,
  UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { fromWireError, HermesError, toHermesError, toServiceError, toWireError } from "@hermes/common";
import { GATEWAY_ID_RULE, isTerminal, isValidGatewayId, isValidId, NAME_RULE } from "@hermes/contract";
import {
  GatewayFrame,
  type RelayFrame,
  type RelayResult,
  RelayServiceService,
  type TunnelReply,
  type TunnelRequest,
} from "@hermes/proto/hermes/v1/relay";
import { z } from "zod";
import { frameError } from "../connections/app/frames.js";
import type { RelayHub } from "../connections/app/relay-hub.js";
import type { GatewaySession } from "../connections/app/sessions.js";
import type { Outcome, WireReceipt } from "../deliveries/core/deliveries.js";
import { parseSend } from "../deliveries/core/send.js";
import { parseAnnounce } from "../roster/core/roster.js";

/** A frame as the Connect handler receives it: decoded, or the reason it could not be. */
export type IncomingFrame = { ok: true; frame: GatewayFrame; bytes: number } | { ok: false; error: string; bytes: number };

/**
 * RelayService with a forgiving decoder on Connect: bytes that are not a GatewayFrame become an
 * `IncomingFrame` saying so, and the handler answers with a typed `error` frame instead of grpc-js
 * failing the whole stream. One gateway's garbage never costs it (or anyone else) its connection.
 */
export const relayServiceDefinition = {
  ...RelayServiceService,
  connect: {
    ...RelayServiceService.connect,
    requestDeserialize: (buffer: Buffer): IncomingFrame => {
      try {
        return { ok: true, frame: GatewayFrame.decode(buffer), bytes: buffer.length };
      } catch (err) {
        return { ok: false, error: err instanceof Error ? err.message : String(err), bytes: buffer.length };
      }
    },
  },
};

const MAX_REPLY_CHARS = 1_000_000;

/** A target's `result` frame as an outcome, or a typed refusal naming what is wrong. */
export function parseResult(result: RelayResult): { deliveryId: string; outcome: Outcome } {
  if (!isValidId(result.delivery_id)) throw new HermesError("invalid_params", "result: delivery_id is missing or malformed");
  const r = result.result;
  if (!r) throw new HermesError("invalid_params", `result for ${result.delivery_id}: neither a receipt nor an error`);
  if (r.$case === "error") {
    const e = fromWireError(r.value);
    return { deliveryId: result.delivery_id, outcome: { kind: "error", reason: e.reason, message: e.message, data: e.data } };
  }
  const receipt = r.value;
  if (receipt.delivery_id !== result.delivery_id) {
    throw new HermesError("invalid_params", `result for ${result.delivery_id} carries the receipt of ${receipt.delivery_id}`);
  }
  if (!isTerminal(receipt.state)) {
    throw new HermesError("invalid_params", `result for ${result.delivery_id}: state ${JSON.stringify(receipt.state)} is not an end state`);
  }
  if ((receipt.reply?.length ?? 0) > MAX_REPLY_CHARS) {
    throw new HermesError("payload_too_large", `result for ${result.delivery_id}: the reply is longer than ${MAX_REPLY_CHARS} characters`);
  }
  const wire: WireReceipt = { ...receipt };
  return { deliveryId: result.delivery_id, outcome: { kind: "receipt", receipt: wire } };
}

/** One gateway's Connect stream: auth, hello, then frames until it ends. */
class ConnectStream implements GatewaySession {
  readonly id: number;
  connection = "";
  gatewayId = "";
  private attached = false;
  private closed = false;
  private helloTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly relay: RelayHub,
    private readonly call: ServerDuplexStream<IncomingFrame, RelayFrame>,
  ) {
    this.id = relay.newSessionId();
  }

  run(): void {
    try {
      this.connection = this.relay.authenticate(this.call.metadata);
    } catch (err) {
      this.close(toHermesError(err), "connect");
      return;
    }
    this.helloTimer = setTimeout(
      () =>
        this.close(
          new HermesError("invalid_params", "no hello frame arrived in time: the first frame on the stream must be hello"),
          "hello",
        ),
      this.relay.settings.helloTimeoutMs,
    );
    this.call.on("data", (incoming: IncomingFrame) => this.onFrame(incoming));
    this.call.on("end", () => this.close());
    this.call.on("error", () => this.close());
    this.call.on("cancelled", () => this.close());
    this.call.on("close", () => this.close());
  }

  send(frame: RelayFrame): boolean {
    if (this.closed || this.call.writableEnded || this.call.destroyed) return false;
    try {
      this.call.write(frame);
      return true;
    } catch {
      return false;
    }
  }

  close(error?: HermesError, frame = "stream"): void {
    if (this.closed) return;
    this.closed = true;
    if (this.helloTimer) clearTimeout(this.helloTimer);
    if (error) {
      this.relay.relayMetrics.refused.inc({ frame, reason: error.reason });
      this.relay.logger.warn({ connection: this.connection || undefined, reason: error.reason, err: error.message }, "stream refused");
    }
    try {
      if (error) this.call.emit("error", toServiceError(error));
      else if (!this.call.writableEnded) this.call.end();
    } catch {
      // The transport is already gone.
    }
    if (this.attached) {
      this.attached = false;
      this.relay.detach(this);
    }
  }

  private refuseFrame(kind: string, err: unknown, deliveryId = ""): void {
    const e = toHermesError(err);
    this.relay.relayMetrics.refused.inc({ frame: kind, reason: e.reason });
    this.relay.logger.warn(
      { connection: this.connection, frame: kind, delivery_id: deliveryId || undefined, reason: e.reason, err: e.message },
      "frame refused",
    );
    this.send(frameError(kind, e, deliveryId));
  }

  private onFrame(incoming: IncomingFrame): void {
    if (this.closed) return;
    if (!incoming.ok) {
      this.refuseFrame(
        "garbage",
        new HermesError("invalid_params", `a ${incoming.bytes}-byte frame is not a GatewayFrame (${incoming.error}); it was ignored`),
      );
      return;
    }
    const frame = incoming.frame.frame;
    if (!this.attached) {
      if (frame?.$case !== "hello") {
        this.close(new HermesError("invalid_params", `the first frame must be hello, got ${frame?.$case ?? "an empty frame"}`), "hello");
        return;
      }
      this.onHello(frame.value.connection, frame.value.gateway_id);
      return;
    }
    try {
      switch (frame?.$case) {
        case undefined:
          this.refuseFrame("empty", new HermesError("invalid_params", "an empty frame (no known field set) was ignored"));
          return;
        case "hello":
          this.refuseFrame("hello", new HermesError("invalid_params", "hello was already received on this stream; it was ignored"));
          return;
        case "roster":
          this.relay.announce(this.connection, parseAnnounce({ bots: frame.value.bots }));
          return;
        case "send": {
          const deliveryId = frame.value.envelope?.delivery_id ?? "";
          try {
            this.relay.broker.send(this.connection, parseSend(frame.value, incoming.bytes));
          } catch (err) {
            // A refused send is answered as its ack, so the sender's pending delivery ends typed.
            const e = toHermesError(err);
            this.relay.relayMetrics.refused.inc({ frame: "send", reason: e.reason });
            this.relay.logger.warn(
              { connection: this.connection, delivery_id: deliveryId || undefined, reason: e.reason, err: e.message },
              "send refused",
            );
            this.send({ frame: { $case: "ack", value: { delivery_id: deliveryId, status: "", error: toWireError(e) } } });
          }
          return;
        }
        case "result": {
          const { deliveryId, outcome } = parseResult(frame.value);
          if (!this.relay.broker.result(this.connection, deliveryId, outcome)) {
            // A late answer (after a disconnect or restart the delivery was re-forwarded or ended): harmless.
            this.relay.logger.debug(
              { connection: this.connection, delivery_id: deliveryId },
              "result for a delivery not in flight here ignored",
            );
          }
          return;
        }
        case "tunnel_answer":
          if (!this.relay.tunnel.answer(this.connection, frame.value)) {
            this.relay.logger.debug(
              { connection: this.connection, call_id: frame.value.call_id },
              "answer for no open tunnel call ignored",
            );
          }
          return;
      }
    } catch (err) {
      this.refuseFrame(frame?.$case ?? "unknown", err);
    }
  }

  private onHello(connection: string, gatewayId: string): void {
    if (this.helloTimer) clearTimeout(this.helloTimer);
    if (connection !== this.connection) {
      // Echoed as sent (any text: errors carry it intact), but bounded: the log line repeats it.
      const named = connection.slice(0, 80);
      this.close(
        new HermesError(
          "unauthenticated",
          `this key belongs to connection ${this.connection}, but the hello named ${JSON.stringify(named)}: set relay.connection: ${this.connection} in the gateway's config.yaml, or use the key issued for ${JSON.stringify(named)}`,
          { data: { key_connection: this.connection, hello_connection: named } },
        ),
        "hello",
      );
      return;
    }
    // The roster routes member turns by this id, so a missing or malformed one is refused, not guessed.
    const named = gatewayId.slice(0, 80);
    if (!isValidGatewayId(gatewayId)) {
      this.close(
        new HermesError(
          "invalid_params",
          `the hello must name this gateway's id (matching ${GATEWAY_ID_RULE}), got ${JSON.stringify(named)}`,
          { data: { field: "gateway_id" } },
        ),
        "hello",
      );
      return;
    }
    this.gatewayId = gatewayId;
    try {
      this.attached = true;
      this.relay.attach(this);
    } catch (err) {
      this.attached = false;
      this.close(toHermesError(err), "hello");
    }
  }
}

const tunnelRequestSchema = z
  .object({
    connection: z.string().regex(new RegExp(NAME_RULE), `a connection name matching ${NAME_RULE}`),
    method: z.string().regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*){0,3}$/, "a method name such as groups.log"),
    params_json: z.string().max(4 * 1024 * 1024),
  })
  .strict();

function parseTunnelRequest(req: TunnelRequest): TunnelRequest {
  const parsed = tunnelRequestSchema.safeParse(req);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new HermesError("invalid_params", `invalid tunnel request: ${issue.path.join(".") || "request"}: ${issue.message}`);
  }
  if (parsed.data.params_json) {
    try {
      const params = JSON.parse(parsed.data.params_json) as unknown;
      if (params === null || typeof params !== "object" || Array.isArray(params)) throw new Error("not an object");
    } catch (err) {
      throw new HermesError("invalid_params", `invalid tunnel request: params_json must be a JSON object (${(err as Error).message})`);
    }
  }
  return parsed.data;
}

/** gRPC handlers of RelayService (use with relayServiceDefinition). */
export function relayServiceHandlers(relay: RelayHub): UntypedServiceImplementation {
  return {
    connect: (call: ServerDuplexStream<IncomingFrame, RelayFrame>) => new ConnectStream(relay, call).run(),

    tunnel: (call: ServerUnaryCall<TunnelRequest, TunnelReply>, callback: sendUnaryData<TunnelReply>) => {
      const end = relay.metrics.rpcDuration.startTimer({ method: RelayServiceService.tunnel.path, transport: "tcp" });
      const fail = (err: unknown) => {
        const e = toServiceError(err);
        end({ code: String(e.code) });
        callback(e as ServerErrorResponse);
      };
      try {
        const caller = relay.authenticate(call.metadata);
        const req = parseTunnelRequest(call.request);
        const controller = new AbortController();
        call.on("cancelled", () => controller.abort());
        let answered = false;
        relay.tunnel.open(
          {
            caller,
            target: req.connection,
            method: req.method,
            paramsJson: req.params_json || "{}",
            stream: false,
            timeoutMs: relay.settings.tunnelTimeoutMs,
          },
          {
            item: (resultJson) => {
              if (answered) return;
              answered = true;
              end({ code: "OK" });
              callback(null, { result_json: resultJson });
            },
            end: () => {
              if (answered) return;
              answered = true;
              end({ code: "OK" });
              callback(null, { result_json: "null" });
            },
            fail: (err) => {
              if (answered) return;
              answered = true;
              fail(err);
            },
          },
          controller.signal,
        );
      } catch (err) {
        fail(err);
      }
    },

    tunnelStream: (call: ServerWritableStream<TunnelRequest, TunnelReply>) => {
      let done = false;
      const fail = (err: unknown) => {
        if (done) return;
        done = true;
        call.emit("error", toServiceError(err));
      };
      try {
        const caller = relay.authenticate(call.metadata);
        const req = parseTunnelRequest(call.request);
        const controller = new AbortController();
        call.on("cancelled", () => controller.abort());
        relay.tunnel.open(
          {
            caller,
            target: req.connection,
            method: req.method,
            paramsJson: req.params_json || "{}",
            stream: true,
            timeoutMs: relay.settings.tunnelTimeoutMs,
          },
          {
            item: (resultJson) => {
              if (!done) call.write({ result_json: resultJson });
            },
            end: () => {
              if (done) return;
              done = true;
              call.end();
            },
            fail,
          },
          controller.signal,
        );
      } catch (err) {
        fail(err);
      }
    },
  };
}
