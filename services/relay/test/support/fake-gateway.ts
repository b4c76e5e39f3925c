import { Client, type ClientDuplexStream, credentials, Metadata, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import { fromServiceError, type HermesError } from "@hermes/common";
import type { DeliveryEnvelope, Receipt } from "@hermes/proto/hermes/v1/delivery";
import { GatewayFrame, RelayFrame } from "@hermes/proto/hermes/v1/relay";

type Case = NonNullable<RelayFrame["frame"]>["$case"];
type FrameOf<C extends Case> = Extract<NonNullable<RelayFrame["frame"]>, { $case: C }>["value"];

/**
 * A gateway speaking the relay protocol by hand, for relay-level tests: it can send anything
 * (including bytes that are no frame at all) and records every frame the relay sends it.
 */
export class FakeGateway {
  readonly received: RelayFrame[] = [];
  private waiters: { match: (f: RelayFrame) => boolean; resolve: (f: RelayFrame) => void }[] = [];
  readonly ended: Promise<{ error?: HermesError; status?: StatusObject }>;
  private readonly client: Client;
  private readonly stream: ClientDuplexStream<GatewayFrame | Buffer, RelayFrame>;

  constructor(address: string, key: string | undefined) {
    this.client = new Client(address, credentials.createInsecure());
    const md = new Metadata();
    if (key) md.set("authorization", `Bearer ${key}`);
    this.stream = this.client.makeBidiStreamRequest<GatewayFrame | Buffer, RelayFrame>(
      "/hermes.v1.RelayService/Connect",
      (value) => (Buffer.isBuffer(value) ? value : Buffer.from(GatewayFrame.encode(value).finish())),
      (buffer) => RelayFrame.decode(buffer),
      md,
    );
    this.stream.on("data", (frame: RelayFrame) => {
      this.received.push(frame);
      const w = this.waiters.find((x) => x.match(frame));
      if (w) {
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve(frame);
      }
    });
    this.ended = new Promise((resolve) => {
      this.stream.on("error", (err: ServiceError) => resolve({ error: fromServiceError(err) }));
      this.stream.on("status", (status: StatusObject) => {
        if (status.code === 0) resolve({ status });
      });
    });
  }

  /** Opens a stream and sends hello; resolves once the welcome arrived. */
  static async connect(address: string, key: string, connection: string, gatewayId = `gw-${connection}`): Promise<FakeGateway> {
    const g = new FakeGateway(address, key);
    g.write({ frame: { $case: "hello", value: { connection, gateway_id: gatewayId, version: "test" } } });
    await g.next("welcome");
    return g;
  }

  write(frame: GatewayFrame | Buffer): void {
    this.stream.write(frame);
  }

  /**
   * The next frame of this kind not yet consumed by an earlier `next` (frames are consumed in
   * order per kind), waiting for it when needed.
   */
  next<C extends Case>(kind: C, where: (v: FrameOf<C>) => boolean = () => true, timeoutMs = 5000): Promise<FrameOf<C>> {
    const match = (f: RelayFrame) => f.frame?.$case === kind && where(f.frame.value as FrameOf<C>) && !this.taken.has(f);
    const already = this.received.find(match);
    if (already) {
      this.taken.add(already);
      return Promise.resolve(already.frame!.value) as Promise<FrameOf<C>>;
    }
    return new Promise<FrameOf<C>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x.resolve !== done);
        reject(new Error(`no ${kind} frame within ${timeoutMs} ms; received: ${this.received.map((f) => f.frame?.$case).join(", ")}`));
      }, timeoutMs);
      const done = (f: RelayFrame) => {
        clearTimeout(timer);
        this.taken.add(f);
        (resolve as (v: unknown) => void)(f.frame!.value);
      };
      this.waiters.push({ match, resolve: done });
    });
  }

  private readonly taken = new Set<RelayFrame>();

  /** Every frame of a kind received so far. */
  all<C extends Case>(kind: C): FrameOf<C>[] {
    return this.received.filter((f) => f.frame?.$case === kind).map((f) => f.frame!.value as FrameOf<C>);
  }

  announce(bots: { handle: string; title?: string }[]): void {
    this.write({
      frame: {
        $case: "roster",
        value: { bots: bots.map((b) => ({ handle: b.handle, display_name: b.handle, title: b.title ?? "", description: "" })) },
      },
    });
  }

  send(envelope: DeliveryEnvelope, target: { connection: string; handle: string }, senderName = envelope.from_profile): void {
    this.write({
      frame: {
        $case: "send",
        value: { envelope, target_connection: target.connection, target_handle: target.handle, sender_name: senderName },
      },
    });
  }

  answer(deliveryId: string, receipt: Partial<Receipt> & { state: string }): void {
    this.write({
      frame: {
        $case: "result",
        value: {
          delivery_id: deliveryId,
          result: {
            $case: "receipt",
            value: { delivery_id: deliveryId, from: "x@y", target: "t", attempts: 1, created_at: new Date().toISOString(), ...receipt },
          },
        },
      },
    });
  }

  /** Closes our side; resolves when the relay ended the call. */
  async close(): Promise<void> {
    this.stream.end();
    // At most a second: a relay that never ends the call (stopped, killed) does not hold up the clean-up.
    await Promise.race([this.ended, new Promise((r) => setTimeout(r, 1000))]);
    this.client.close();
  }

  /** Drops the connection without a goodbye (like a crash or a dead NAT path). */
  kill(): void {
    this.stream.cancel();
    this.client.close();
  }
}

let counter = 0;

export function envelope(
  from: { profile: string; gateway: string },
  target: string,
  message: string,
  overrides: Partial<DeliveryEnvelope> = {},
): DeliveryEnvelope {
  counter += 1;
  return {
    delivery_id: `dlv_test_${process.pid}_${counter}_${Math.random().toString(16).slice(2, 8)}`,
    from_profile: from.profile,
    from_gateway: from.gateway,
    target,
    message,
    created_at: new Date().toISOString(),
    ttl_seconds: 900,
    ...overrides,
  };
}
