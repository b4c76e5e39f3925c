/**
 * Data-driven relay scenarios (testdata/relay/*.txt, the format of the room and delivery
 * scenarios): the production relay services (buildServices: hub, broker, sessions, roster) and the
 * production Connect handler (relayServiceHandlers, with the production frame decoder) over a real
 * relay.db and a scripted clock. Each gateway's Connect stream is a scripted call object instead of
 * an HTTP/2 stream: frames go in as the bytes a gateway would send and come out as the relay wrote
 * them, so every step is deterministic.
 *
 * Commands (every one prints, in order, the frames the relay wrote to each stream as
 * `<connection> <- …`, streams it ended as `<connection> closed: …`, and then every delivery row of
 * relay.db that is new or changed as `db: …`; `nothing sent, relay.db unchanged` when there was none):
 *
 *   key <connection>…                           issue connection keys (`hermes relay key add`)
 *   revoke <connection>                         revoke its key (`hermes relay key revoke`)
 *   connect <connection> [key=<other>|bogus] [hello=<name>] [gateway=<id>] [stream=<label>]
 *                                               open a stream and say hello; the stream is called by
 *                                               its label (default: the connection) from then on
 *   disconnect <stream>                         the gateway's stream breaks (cancelled)
 *   send <stream> <id> to=<handle>@<connection> [text=…] [char=<c> repeat=<n>] [ttl=<s>]   a send frame
 *   result <stream> <id> <state> [reply=…] | result <stream> <id> error=<reason>   the target's answer
 *   tick <ms>                                   time passes, then the sweep (TTL expiry)
 *   restart                                     graceful stop, then a new relay opens relay.db and recovers
 *   status                                      queue depth, streams online, rows by state
 *
 * Every command waits until the relay is quiet (its group commit done) before it prints.
 */
import { EventEmitter } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Metadata, type ServerDuplexStream, type ServiceError } from "@grpc/grpc-js";
import { createLogger, createMetrics, fromServiceError, isoTime } from "@hermes/common";
import { GatewayFrame, type RelayFrame } from "@hermes/proto/hermes/v1/relay";
import type { ScenarioDirective } from "../../../../test/support/scenario-script.js";
import { type IncomingFrame, relayServiceDefinition, relayServiceHandlers } from "../../src/api/relay-service.js";
import { buildServices } from "../../src/daemon/relay.js";
import { outcomeLabel, type RelayDelivery } from "../../src/deliveries/core/deliveries.js";
import { resolveRelaySettings } from "../../src/home/app/config.js";
import { RelayStore } from "../../src/home/store/relay-store.js";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const TURNS_UNTIL_QUIET = 10;

/** One gateway's Connect stream as the handler sees it (what grpc-js's ServerDuplexStream offers it). */
class ScriptedCall extends EventEmitter {
  writableEnded = false;
  destroyed = false;

  constructor(
    /** The connection whose gateway opened it. */
    readonly connection: string,
    readonly metadata: Metadata,
    private readonly written: (frame: RelayFrame) => void,
    private readonly ended: (how: string) => void,
  ) {
    super();
    // The handler reports its refusals by emitting a ServiceError on the call (grpc-js sends it as the status).
    this.on("error", (err: ServiceError) => {
      if (this.writableEnded) return;
      this.writableEnded = true;
      const e = fromServiceError(err);
      this.ended(`${e.reason}: ${e.message}`);
    });
  }

  write(frame: RelayFrame): boolean {
    this.written(frame);
    return true;
  }

  end(): void {
    if (this.writableEnded) return;
    this.writableEnded = true;
    this.ended("ended");
  }

  /** Bytes from the gateway, through the production decoder. */
  receive(frame: GatewayFrame): void {
    const incoming: IncomingFrame = relayServiceDefinition.connect.requestDeserialize(Buffer.from(GatewayFrame.encode(frame).finish()));
    this.emit("data", incoming);
  }

  /** The gateway's side of the stream breaks. */
  cancel(): void {
    this.writableEnded = true;
    this.destroyed = true;
    this.emit("cancelled");
  }
}

type Services = ReturnType<typeof buildServices>;

const quoted = (text: string) =>
  text.length > 40 ? `${JSON.stringify(text.slice(0, 40))}… (${[...text].length} chars)` : JSON.stringify(text);

function describeFrame(frame: RelayFrame): string {
  const f = frame.frame;
  switch (f?.$case) {
    case "welcome":
      return `welcome epoch=${f.value.roster_epoch} max_envelope_bytes=${f.value.max_envelope_bytes}`;
    case "roster":
      return `roster epoch=${f.value.epoch} bots=${f.value.bots.length}`;
    case "ack":
      return f.value.error
        ? `ack ${f.value.delivery_id} refused ${f.value.error.reason}: ${f.value.error.message}`
        : `ack ${f.value.delivery_id} ${f.value.status}`;
    case "outcome": {
      const r = f.value.result;
      if (r?.$case === "receipt")
        return `outcome ${f.value.delivery_id} ${r.value.state}${r.value.reason ? `/${r.value.reason}` : ""}${r.value.reply ? ` reply=${JSON.stringify(r.value.reply)}` : ""}`;
      return `outcome ${f.value.delivery_id} error ${r?.value.reason}`;
    }
    case "deliver":
      return `deliver ${f.value.envelope?.delivery_id} to=${f.value.target_profile} from=${f.value.from_connection} text=${quoted(f.value.envelope?.message ?? "")}`;
    case "error":
      return `error ${f.value.frame}${f.value.delivery_id ? ` ${f.value.delivery_id}` : ""}: ${f.value.error?.reason}: ${f.value.error?.message}`;
    default:
      return f?.$case ?? "empty frame";
  }
}

function describeRow(row: RelayDelivery): string {
  const end = row.outcome === null ? "" : ` outcome=${row.outcome.kind === "error" ? "error/" : ""}${outcomeLabel(row.outcome)}`;
  return `${row.delivery_id} ${row.state} forwards=${row.forwards} ${row.sender_connection}->${row.target_handle}@${row.target_connection}${end}`;
}

export class RelayScenario {
  private readonly dir = mkdtempSync(join(tmpdir(), "hermes-relay-scenario-"));
  private now = T0;
  private store!: RelayStore;
  private services!: Services;
  private readonly keys = new Map<string, string>();
  private readonly streams = new Map<string, ScriptedCall>();
  private out: string[] = [];
  /** The delivery rows as last printed, by id. */
  private rows = new Map<string, string>();

  constructor() {
    this.open();
  }

  private open(): RelayStore {
    this.store = new RelayStore(join(this.dir, "relay.db"));
    this.services = buildServices({
      id: "relay-scenario",
      settings: resolveRelaySettings(this.dir, {}, {}),
      clock: { now: () => this.now },
      store: this.store,
      logger: createLogger("relay-scenario", "silent"),
      metrics: createMetrics(),
    });
    return this.store;
  }

  async run(directive: ScenarioDirective): Promise<string> {
    const { command, positional: p, named } = directive;
    try {
      this.execute(command, p, named);
    } catch (err) {
      this.out.push(`error: ${err instanceof Error ? err.message : String(err)}`);
    }
    await this.quiet();
    this.out.push(...this.changedRows());
    // An empty block would assert the same, but says it less plainly.
    const printed = this.out.length > 0 ? this.out.join("\n") : "nothing sent, relay.db unchanged";
    this.out = [];
    return printed;
  }

  /** Lets the group commit (and what it sends) run until nothing new happens. */
  private async quiet(): Promise<void> {
    let seen = -1;
    for (let turn = 0; turn < TURNS_UNTIL_QUIET && seen !== this.out.length; turn++) {
      seen = this.out.length;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  private changedRows(): string[] {
    // Every row, read back through the store (the ids in commit order).
    const ids = this.store.db.prepare("SELECT delivery_id FROM deliveries ORDER BY seq").pluck().all() as string[];
    const all = ids.map((id) => this.store.delivery(id)!);
    const changed: string[] = [];
    const now = new Map<string, string>();
    for (const row of all) {
      const line = describeRow(row);
      now.set(row.delivery_id, line);
      if (this.rows.get(row.delivery_id) !== line) changed.push(`db: ${line}`);
    }
    for (const id of this.rows.keys()) if (!now.has(id)) changed.push(`db: ${id} gone`);
    this.rows = now;
    return changed;
  }

  private execute(command: string, p: string[], named: Map<string, string>): void {
    switch (command) {
      case "key":
        for (const connection of p) this.keys.set(connection, this.services.keys.add(connection).key);
        this.out.push(
          `keys: ${this.store
            .keys()
            .map((k) => k.connection)
            .join(" ")}`,
        );
        return;
      case "revoke": {
        const { disconnected } = this.services.hub.revokeKey(p[0]!);
        this.out.push(
          `revoked ${p[0]} disconnected=${disconnected}; keys: ${this.store
            .keys()
            .map((k) => k.connection)
            .join(" ")}`,
        );
        return;
      }
      case "connect":
        this.connect(p[0]!, named);
        return;
      case "disconnect":
        this.stream(p[0]!).cancel();
        this.streams.delete(p[0]!);
        return;
      case "send":
        this.send(p[0]!, p[1]!, named);
        return;
      case "result":
        this.result(p[0]!, p[1]!, p[2], named);
        return;
      case "tick":
        this.now += Number(p[0]);
        this.services.broker.sweep();
        return;
      case "restart":
        this.restart();
        return;
      case "status": {
        const depth = this.services.broker.depth();
        const online = this.services.sessions.all().map((s) => s.connection);
        const byState = Object.entries(this.store.countByState())
          .map(([state, n]) => `${state}=${n}`)
          .join(" ");
        this.out.push(`queued=${depth.queued} in_flight=${depth.in_flight} online=${online.sort().join(",") || "-"} rows: ${byState}`);
        return;
      }
      default:
        throw new Error(`unknown command ${command}`);
    }
  }

  private stream(connection: string): ScriptedCall {
    const call = this.streams.get(connection);
    if (!call) throw new Error(`${connection} has no open stream in this script`);
    return call;
  }

  private connect(connection: string, named: Map<string, string>): void {
    const label = named.get("stream") ?? connection;
    const keyOf = named.get("key") ?? connection;
    const key = keyOf === "bogus" ? "hrk_bogus" : this.keys.get(keyOf);
    if (key === undefined) throw new Error(`no key issued for ${keyOf} in this script`);
    const metadata = new Metadata();
    metadata.set("authorization", `Bearer ${key}`);
    const call = new ScriptedCall(
      connection,
      metadata,
      (frame) => this.out.push(`${label} <- ${describeFrame(frame)}`),
      (how) => {
        this.out.push(`${label} closed: ${how}`);
        if (this.streams.get(label) === call) this.streams.delete(label);
      },
    );
    this.streams.set(label, call);
    const connect = relayServiceHandlers(this.services.hub).connect as (call: ServerDuplexStream<IncomingFrame, RelayFrame>) => void;
    connect(call as unknown as ServerDuplexStream<IncomingFrame, RelayFrame>);
    if (call.writableEnded) return;
    call.receive({
      frame: {
        $case: "hello",
        value: {
          connection: named.get("hello") ?? connection,
          gateway_id: named.get("gateway") ?? `gw-${connection}`,
          version: "scenario",
        },
      },
    });
  }

  private send(stream: string, id: string, named: Map<string, string>): void {
    const to = named.get("to") ?? "";
    const at = to.indexOf("@");
    const [handle, connection] = at < 0 ? [to, ""] : [to.slice(0, at), to.slice(at + 1)];
    const message = named.has("char") ? named.get("char")!.repeat(Number(named.get("repeat") ?? 1)) : (named.get("text") ?? "hello");
    const call = this.stream(stream);
    call.receive({
      frame: {
        $case: "send",
        value: {
          envelope: {
            delivery_id: id,
            from_profile: "alice",
            from_gateway: `gw-${call.connection}`,
            target: to,
            message,
            created_at: isoTime(this.now),
            ttl_seconds: Number(named.get("ttl") ?? 900),
          },
          target_connection: connection,
          target_handle: handle,
          sender_name: "Alice",
        },
      },
    });
  }

  private result(connection: string, id: string, state: string | undefined, named: Map<string, string>): void {
    const error = named.get("error");
    this.stream(connection).receive({
      frame: {
        $case: "result",
        value: {
          delivery_id: id,
          result:
            error !== undefined
              ? { $case: "error", value: { reason: error, message: `the target says ${error}`, data_json: "" } }
              : {
                  $case: "receipt",
                  value: {
                    delivery_id: id,
                    from: "alice@gw-a",
                    target: "bob",
                    state: state ?? "settled",
                    attempts: 1,
                    created_at: isoTime(T0),
                    settled_at: isoTime(this.now),
                    ...(named.has("reply") ? { reply: named.get("reply")! } : {}),
                  },
                },
        },
      },
    });
  }

  /** What Relay.stop and Relay.start do to the services: commit, end the streams, close; reopen, recover. */
  private restart(): void {
    this.services.hub.close();
    this.services.hub.endStreams();
    this.store.close();
    this.streams.clear();
    this.open();
    this.out.push(`recovered ${this.services.broker.recover()}`);
  }

  destroy(): void {
    this.services.hub.close();
    this.store.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
