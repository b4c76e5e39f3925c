/**
 * Data-driven delivery scenarios (testdata/deliveries/*.txt, the format of the room scenarios):
 * the production DeliveryService (both machines, the group commit) over a real state.db with the
 * gateway's migrations, with the delivery worker played by the script. What the world around the
 * service would do (profiles, roster, sessions) is a small in-memory stand-in; the script decides
 * when a Bot Chat lane is granted, how a turn, a transport or a notification went, when time
 * passes and when the process dies.
 *
 * Commands (every one prints what the service did meanwhile: `commit: …` per committed batch with
 * its writes in order, `work: …` per piece of work handed to the worker, `receipt: …` per answered
 * waiter, and refusals):
 *
 *   bots alice bob …                      the local profiles (peers: peer=b)
 *   worker grant=now|manual               grant Bot Chat lanes as soon as asked (as a free lane is)
 *   send <from> <target> <id> [text=…] [ttl=<s>]    message_agent; `acked <id>` after its commit
 *   accept <target> <id> from=<p>@<gw> [text=…]     mail from another gateway (a peer's Deliver)
 *   wait <id>                             a caller waiting for the end (printed when it comes)
 *   grant <id> | refuse <id>              the Bot Chat lane asked for
 *   reply <id> [text=…]                   the turn answered
 *   fail <id> <reason> [cancelled timed-out effects=<n>]   the turn failed
 *   answered <id> <state> [reason=…]      the transport's answer (the target's receipt)
 *   transport-failed <id> <reason>        the hop failed
 *   notified <id>                         the completion notification was written
 *   tick <ms>                             time passes, then the TTL sweep
 *   rename <from> <to> | delete <profile>
 *   stop                                  the graceful stop's first step (nothing new is accepted)
 *   crash                                 kill -9: the process dies, a new one opens state.db and starts
 *   rows                                  the outbox and ingress rows as stored
 *
 * Every command waits until the service is quiet (its group commit done) before it prints.
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, type Db, HermesError, openDatabase } from "@hermes/common";
import type { DeliveryReason, ReceiptState } from "@hermes/contract";
import type { ScenarioDirective } from "../../../../test/support/scenario-script.js";
import type { DeliveryWork } from "../../src/delivery/app/delivery-service.js";
import { DeliveryService } from "../../src/delivery/app/delivery-service.js";
import type { DeliveryRoster } from "../../src/delivery/app/roster.js";
import type { Receipt } from "../../src/delivery/core/receipt.js";
import { DeliveriesStore } from "../../src/delivery/store/deliveries-store.js";
import { Events } from "../../src/home/app/events.js";
import { GATEWAY_MIGRATIONS } from "../../src/home/store/migrations/index.js";
import type { ProfileService } from "../../src/identity/app/profiles.js";
import type { SessionService } from "../../src/identity/app/sessions.js";
import { describeEffect, T0 } from "./delivery-machine-fixtures.js";

/** The profiles of the scripted gateway, with the events the delivery service listens to. */
class ScriptedProfiles {
  readonly events = new Events<{ stopping: [name: string]; renamed: [from: string, to: string] }>();
  readonly names = new Set<string>();

  resolve(name: string): string {
    if (!this.names.has(name)) throw new HermesError("not_found", `no profile ${name}`);
    return name;
  }
}

const quiet = () => new Promise<void>((resolve) => setImmediate(resolve));

export class DeliveryScenario {
  private readonly dir = mkdtempSync(join(tmpdir(), "hermes-delivery-scenario-"));
  private readonly profiles = new ScriptedProfiles();
  private readonly peers: string[] = [];
  private db!: Db;
  private service!: DeliveryService;
  private now = T0;
  private grantAtOnce = false;
  /** What happened since the last command printed. */
  private out: string[] = [];
  /** Work handed out and not reported back yet, by delivery id. */
  private readonly work = new Map<string, DeliveryWork[]>();

  constructor() {
    this.open();
  }

  private open(): void {
    this.db = openDatabase(join(this.dir, "state.db"), { label: "scenario state.db", migrations: GATEWAY_MIGRATIONS });
    const profiles = this.profiles;
    const roster = {
      targets: () => ({
        local: [...profiles.names].map((profile) => ({ profile })),
        remote: [],
        peers: this.peers.map((name) => ({ name })),
      }),
      displayName: (p: string) => p,
      invalidate: () => {},
      teammates: () => [],
    };
    this.service = new DeliveryService({
      store: new DeliveriesStore(this.db),
      profiles: {
        events: profiles.events,
        resolve: (n: string) => profiles.resolve(n),
        names: () => [...profiles.names],
        assertIdentitySettled: () => {},
      } as unknown as ProfileService,
      sessions: { touch: () => {} } as unknown as SessionService,
      roster: roster as unknown as DeliveryRoster,
      flushRouting: () => {},
      clock: { now: () => this.now },
      logger: createLogger("delivery-scenario", "silent"),
      gatewayId: "gw1",
      settings: { maxParallelTargets: 8, ttlSeconds: 900, turnTimeoutMs: 30_000, retryDelayMs: 0, peerTimeoutMs: 5000, sweepMs: 3_600_000 },
    });
    this.service.commit.events.on("committed", (writes) => this.out.push(`commit: ${writes.map(describeEffect).join(", ")}`));
    this.service.events.on("work", (work) => this.handOut(work));
    this.work.clear();
    this.service.start();
  }

  private handOut(work: DeliveryWork): void {
    this.out.push(`work: ${describeEffect(work)}`);
    const id = "id" in work ? work.id : work.row.delivery_id;
    const list = this.work.get(id) ?? [];
    list.push(work);
    this.work.set(id, list);
    if (work.kind === "open_session" && this.grantAtOnce) {
      // A free lane is granted a few microtasks later, before the group commit runs.
      queueMicrotask(() =>
        this.report({ side: "ingress", event: { kind: "session_opened", id: work.id, session_id: `s-${work.target_profile}` } }),
      );
    }
  }

  /** The work of `kind` handed out for `id` and not reported yet (a script error when there is none). */
  private take<K extends DeliveryWork["kind"]>(id: string, kind: K): Extract<DeliveryWork, { kind: K }> {
    const list = this.work.get(id) ?? [];
    const i = list.findIndex((w) => w.kind === kind);
    if (i < 0) throw new Error(`no ${kind} work handed out for ${id}`);
    return list.splice(i, 1)[0] as Extract<DeliveryWork, { kind: K }>;
  }

  private report(report: Parameters<DeliveryService["report"]>[0]): void {
    this.service.report(report);
  }

  private waitFor(id: string): void {
    this.service.wait(id).then(
      (r) => this.out.push(`receipt: ${describeReceipt(r)}`),
      (err: HermesError) => this.out.push(`wait ${id}: ${err.reason}`),
    );
  }

  async run(directive: ScenarioDirective): Promise<string> {
    const { command, positional: p, named } = directive;
    try {
      await this.execute(command, p, named);
    } catch (err) {
      this.out.push(err instanceof HermesError ? `refused ${err.reason}: ${err.message}` : `script error: ${String(err)}`);
    }
    await this.settle();
    const out = this.out;
    this.out = [];
    return out.join("\n");
  }

  private async execute(command: string, p: string[], named: Map<string, string>): Promise<void> {
    const id = p[0] ?? "";
    switch (command) {
      case "bots":
        for (const name of p) this.profiles.names.add(name);
        for (const peer of named.get("peers")?.split(",") ?? []) this.peers.push(peer);
        return;
      case "worker":
        this.grantAtOnce = named.get("grant") === "now";
        return;
      case "send": {
        const [from = "", target = "", deliveryId] = p;
        const ttl = named.has("ttl") ? Number(named.get("ttl")) : undefined;
        const ack = await this.service.send(from, target, named.get("text") ?? "hello", { delivery_id: deliveryId, ttl_seconds: ttl });
        this.out.push(`acked ${ack.delivery_id}`);
        return;
      }
      case "accept": {
        const [target = "", deliveryId = ""] = p;
        const [fromProfile = "", fromGateway = ""] = (named.get("from") ?? "").split("@");
        const envelope = {
          delivery_id: deliveryId,
          from_profile: fromProfile,
          from_gateway: fromGateway,
          target,
          message: named.get("text") ?? "hello",
          created_at: new Date(this.now).toISOString(),
          ttl_seconds: 900,
        };
        this.service.accept(envelope, { target_profile: target, source: "peer" }).then(
          (r) => this.out.push(`answered: ${describeReceipt(r)}`),
          (err: HermesError) => this.out.push(`accept ${deliveryId}: ${err.reason}`),
        );
        return;
      }
      case "wait":
        this.waitFor(id);
        return;
      case "grant":
        this.take(id, "open_session");
        this.report({ side: "ingress", event: { kind: "session_opened", id, session_id: named.get("session") ?? "s-bot-chat" } });
        return;
      case "refuse":
        this.take(id, "open_session");
        this.report({ side: "ingress", event: { kind: "session_refused", id } });
        return;
      case "reply":
        this.take(id, "run_turn");
        this.report({ side: "ingress", event: { kind: "turn_ended", id, result: { kind: "reply", reply: named.get("text") ?? "ok" } } });
        return;
      case "fail": {
        this.take(id, "run_turn");
        const failure = {
          reason: (p[1] ?? "provider_server_error") as DeliveryReason,
          error: named.get("error") ?? `${p[1]} in the turn`,
          cancelled: p.includes("cancelled"),
          timed_out: p.includes("timed-out"),
          effects: Number(named.get("effects") ?? 0),
        };
        this.report({ side: "ingress", event: { kind: "turn_ended", id, result: { kind: "failed", failure } } });
        return;
      }
      case "answered": {
        const work = this.take(id, "transmit");
        const state = (p[1] ?? "settled") as ReceiptState;
        const receipt: Receipt = {
          delivery_id: id,
          from: work.row.from,
          target: work.row.target,
          state,
          reason: (named.get("reason") as DeliveryReason | undefined) ?? null,
          error: named.get("reason") ? `${named.get("reason")} on the target` : null,
          attempts: Number(named.get("attempts") ?? 1),
          created_at: work.row.created_at,
          settled_at: state === "claimed" || state === "queued" ? null : new Date(this.now).toISOString(),
          reply: state === "settled" ? (named.get("text") ?? "ok") : null,
        };
        this.report({ side: "outbox", event: { kind: "transport_answered", id, receipt } });
        return;
      }
      case "transport-failed":
        this.take(id, "transmit");
        this.report({
          side: "outbox",
          event: {
            kind: "transport_failed",
            id,
            failure: { reason: (p[1] ?? "runtime_offline") as DeliveryReason, error: `${p[1]} on the way` },
          },
        });
        return;
      case "notified":
        this.take(id, "notify");
        this.report({ side: "outbox", event: { kind: "notified", id } });
        return;
      case "tick":
        this.now += Number(p[0]);
        this.service.sweep();
        return;
      case "rename":
        this.profiles.names.delete(p[0]!);
        this.profiles.names.add(p[1]!);
        this.profiles.events.emit("renamed", p[0]!, p[1]!);
        return;
      case "delete":
        this.profiles.events.emit("stopping", id);
        this.profiles.names.delete(id);
        return;
      case "stop":
        this.service.beginStop();
        return;
      case "crash":
        // Every command ends with its commit done, so what a kill -9 now loses is the memory only.
        this.db.close();
        this.open();
        return;
      case "rows":
        this.out.push(...this.rows());
        return;
      default:
        throw new Error(`unknown command ${command}`);
    }
  }

  /** Until nothing is left to commit (a commit's follow-ups may add the next batch). */
  private async settle(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      await quiet();
      await this.service.commit.durable();
    }
  }

  private rows(): string[] {
    const outbox = this.db
      .prepare("SELECT delivery_id, state, reason, attempts, notified_at FROM delivery_outbox ORDER BY delivery_id")
      .all() as {
      delivery_id: string;
      state: string;
      reason: string | null;
      attempts: number;
      notified_at: string | null;
    }[];
    const ingress = this.db.prepare("SELECT delivery_id, state, reason, attempts FROM delivery_ingress ORDER BY delivery_id").all() as {
      delivery_id: string;
      state: string;
      reason: string | null;
      attempts: number;
    }[];
    return [
      ...outbox.map(
        (r) =>
          `outbox ${r.delivery_id} ${r.state}${r.reason ? `/${r.reason}` : ""} attempts=${r.attempts}${r.notified_at ? " notified" : ""}`,
      ),
      ...ingress.map((r) => `ingress ${r.delivery_id} ${r.state}${r.reason ? `/${r.reason}` : ""} attempts=${r.attempts}`),
    ];
  }

  destroy(): void {
    this.service.beginStop();
    this.service.stop();
    this.db.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function describeReceipt(r: Receipt): string {
  return `${r.delivery_id} ${r.state}${r.reason ? `/${r.reason}` : ""} attempts=${r.attempts}${r.reply ? ` reply=${JSON.stringify(r.reply)}` : ""}`;
}
