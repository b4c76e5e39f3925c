import { type Clock, HermesError, isoTime, type Logger, toHermesError } from "@hermes/common";
import type { ChatService } from "../../agents/app/chat.js";
import type { DeliverySettings } from "../../home/app/config.js";
import type { ProfileDatabases } from "../../home/store/gateway-store.js";
import type { SessionService } from "../../identity/app/sessions.js";
import { type SessionRow, TranscriptStore } from "../../identity/store/sessions-store.js";
import type { PeerDirectory } from "../../peers/app/peer-directory.js";
import { attributedMessage } from "../core/envelope.js";
import type { TurnFailure } from "../core/ingress-machine.js";
import { completionFor } from "../core/receipt.js";
import { envelopeOf, type OutboxRow } from "../core/rows.js";
import type { DeliveryService, DeliveryWork, WorkReport } from "./delivery-service.js";
import { attemptFailure } from "./failure.js";
import type { DeliveryRoster } from "./roster.js";
import { type DeliveryTransport, NoRelayTransport, PeerTransport } from "./transports.js";

export interface DeliveryWorkerDeps {
  deliveries: DeliveryService;
  chat: ChatService;
  sessions: SessionService;
  profileDbs: ProfileDatabases;
  roster: DeliveryRoster;
  peers: PeerDirectory;
  /** `<handle>@<connection>` mail, when this gateway has a relay; without one such mail fails runtime_offline. */
  relay?: DeliveryTransport | undefined;
  /** Mail for A2A agents registered as peers (`a2a.peers`); without it such mail fails runtime_offline. */
  a2a?: DeliveryTransport | undefined;
  clock: Clock;
  logger: Logger;
  settings: DeliverySettings;
}

/** Notifications waiting for their sender's Bot Chat lane: written together, in one transcript commit. */
interface PendingNotes {
  profile: string;
  items: { row: OutboxRow; recovering: boolean }[];
}

/**
 * The hands of the delivery machines: holds a Bot Chat's lane for a delivery and runs its turn in
 * the turn engine (bounded by `delivery.turn_timeout_seconds`), sends mail for other gateways over
 * its transport, and writes completion notifications into the sender's Bot Chat, through its lane
 * (so a notification lands after the turn that sent the message). Decides nothing: it reports how
 * each piece of work went back to the delivery service.
 */
export class DeliveryWorker {
  /** Bot Chat lanes held for deliveries, released when the machine says so. */
  private readonly held = new Map<string, () => void>();
  private readonly turns = new Map<string, AbortController>();
  private readonly notes = new Map<string, PendingNotes>();
  private readonly running = new Set<Promise<unknown>>();
  private readonly transports: Record<"peer" | "relay" | "a2a", DeliveryTransport>;
  private readonly stopController = new AbortController();
  private stopping = false;

  constructor(private readonly deps: DeliveryWorkerDeps) {
    this.transports = {
      peer: new PeerTransport(deps.peers, deps.settings.peerTimeoutMs),
      relay: deps.relay ?? new NoRelayTransport(),
      a2a: deps.a2a ?? {
        deliver: (route) =>
          Promise.reject(new HermesError("runtime_offline", `${route.target} is an A2A agent and this gateway has no A2A transport`)),
      },
    };
    deps.deliveries.events.on("work", (work) => this.do(work));
  }

  private do(work: DeliveryWork): void {
    switch (work.kind) {
      case "open_session":
        this.openSession(work.id, work.target_profile, work.session_key);
        return;
      case "run_turn":
        this.runTurn(work);
        return;
      case "release_session":
        this.held.get(work.id)?.();
        this.held.delete(work.id);
        return;
      case "abort_turn":
        this.turns.get(work.id)?.abort(work.error);
        return;
      case "transmit":
        this.transmit(work.row);
        return;
      case "notify":
        this.notify(work.row, work.recovering);
        return;
    }
  }

  private track(work: Promise<unknown>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  /** Waits for the Bot Chat's lane (behind the turns queued before), then holds it until released. */
  private openSession(id: string, profile: string, sessionKey: string): void {
    const { deliveries, sessions, chat } = this.deps;
    const refused = () => deliveries.report({ side: "ingress", event: { kind: "session_refused", id } });
    let session: SessionRow;
    try {
      session = sessions.store.byKey(sessionKey) ?? sessions.botChat(profile);
      const held = chat.exclusive(
        session.session_id,
        () =>
          new Promise<void>((release) => {
            this.held.set(id, release);
            deliveries.report({ side: "ingress", event: { kind: "session_opened", id, session_id: session.session_id } });
          }),
      );
      this.track(held.catch(refused));
    } catch (err) {
      this.deps.logger.warn({ err: toHermesError(err), delivery_id: id }, "delivery attempt could not start");
      refused();
    }
  }

  private runTurn(work: Extract<DeliveryWork, { kind: "run_turn" }>): void {
    const { chat, sessions, deliveries, settings } = this.deps;
    const report = (r: WorkReport) => deliveries.report(r);
    const failed = (err: unknown, timedOut: boolean) => {
      const f = attemptFailure(err);
      const failure: TurnFailure = { reason: f.reason, error: f.error, cancelled: f.cancelled, timed_out: timedOut, effects: f.effects };
      report({ side: "ingress", event: { kind: "turn_ended", id: work.id, result: { kind: "failed", failure } } });
    };
    // One controller per turn, aborted by the machine (abort_turn), by a stop, or when time is up.
    const turn = new AbortController();
    if (this.stopController.signal.aborted) turn.abort(this.stopController.signal.reason);
    this.turns.set(work.id, turn);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      turn.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
    }, settings.turnTimeoutMs);
    timer.unref();
    const run = async () => {
      if (work.compact) {
        if (!sessions.store.byId(work.session_id)) {
          throw new HermesError("profile_deleted", `profile ${work.target_profile} was deleted while its turn was queued`);
        }
        await chat.compact(work.target_profile, work.session_id);
      }
      // The turn engine reads the session row (it fails profile_deleted when the row is gone).
      return chat.runLocked(work.target_profile, { session_id: work.session_id }, work.text, {
        signal: turn.signal,
        user_meta: work.user_meta,
        commands: false,
        obligation: false,
        touch: false,
      });
    };
    this.track(
      run()
        .then(
          (out) => report({ side: "ingress", event: { kind: "turn_ended", id: work.id, result: { kind: "reply", reply: out.reply } } }),
          (err: unknown) => failed(err, timedOut),
        )
        .finally(() => {
          clearTimeout(timer);
          this.turns.delete(work.id);
        }),
    );
  }

  /** One hop to another gateway (peer or relay); the target dedupes by id, so a repeat is safe. */
  private transmit(row: OutboxRow): void {
    const { deliveries, roster } = this.deps;
    const id = row.delivery_id;
    const route = row.route;
    const transport = route.kind === "peer" && route.a2a ? this.transports.a2a : this.transports[route.kind as "peer" | "relay"];
    this.track(
      transport
        .deliver(row.route, envelopeOf(row), { sender_name: roster.displayName(row.from_profile), signal: this.stopController.signal })
        .then(
          (receipt) => deliveries.report({ side: "outbox", event: { kind: "transport_answered", id, receipt } }),
          (err: unknown) => {
            const { reason, error } = attemptFailure(err);
            deliveries.report({ side: "outbox", event: { kind: "transport_failed", id, failure: { reason, error } } });
          },
        ),
    );
  }

  /**
   * The completion notification in the sender's Bot Chat: the reply, or `Delivery to <x> failed
   * [reason: <code>]: <error>`. Written through the sender's session lane; the notifications that
   * queue for one session meanwhile are written together. A crash before it is repaired at start.
   */
  private notify(row: OutboxRow, recovering: boolean): void {
    const { deliveries, sessions, chat } = this.deps;
    // The key as stored now: a rename since the delivery's end rekeyed the sender's Bot Chat.
    const session = sessions.store.byKey(deliveries.store.senderSessionKey(row.delivery_id) ?? row.sender_session_key);
    if (completionFor(row) === undefined || !session) {
      deliveries.report({ side: "outbox", event: { kind: "notified", id: row.delivery_id } });
      return;
    }
    const pending = this.notes.get(session.session_id);
    if (pending) {
      pending.items.push({ row, recovering });
      return;
    }
    const notes: PendingNotes = { profile: session.profile_name, items: [{ row, recovering }] };
    this.notes.set(session.session_id, notes);
    const failed = (err: unknown) => {
      this.notes.delete(session.session_id);
      // A stop drops queued work: the next start writes these.
      if (!this.stopping)
        this.deps.logger.warn({ err: toHermesError(err), count: notes.items.length }, "writing completion notifications failed");
    };
    try {
      this.track(chat.exclusive(session.session_id, async () => this.writeNotes(session.session_id, notes)).catch(failed));
    } catch (err) {
      failed(err);
    }
  }

  private async writeNotes(sessionId: string, notes: PendingNotes): Promise<void> {
    this.notes.delete(sessionId);
    const db = this.deps.profileDbs.get(notes.profile);
    const transcript = new TranscriptStore(db);
    // After a crash between the two writes a notification may already be there.
    const written = notes.items.some((n) => n.recovering)
      ? new Set(
          transcript
            .list(sessionId, 200)
            .filter((m) => m.role === "notification")
            .map((m) => m.meta["delivery_id"]),
        )
      : new Set<unknown>();
    const at = isoTime(this.deps.clock.now());
    const messages = notes.items
      .filter((n) => !written.has(n.row.delivery_id))
      .map(({ row }) => {
        const text = completionFor(row)!;
        const modelText =
          row.state === "settled"
            ? attributedMessage(
                { name: row.target_profile ? this.deps.roster.displayName(row.target_profile) : row.target, handle: row.target },
                text,
              )
            : text;
        return {
          role: "notification" as const,
          content: text,
          meta: { delivery_id: row.delivery_id, target: row.target, state: row.state, reason: row.reason, model_text: modelText },
          created_at: at,
        };
      });
    if (messages.length > 0) {
      transcript.append(sessionId, messages);
      // state.db records a notification written only once it is on disk.
      await this.deps.profileDbs.durable(db);
    }
    for (const { row } of notes.items) this.deps.deliveries.report({ side: "outbox", event: { kind: "notified", id: row.delivery_id } });
  }

  /** Graceful stop, after the turn engine stopped: cancels what still runs, waits for every report, closes the transports. */
  async stop(): Promise<void> {
    this.stopping = true;
    const stopped = new HermesError("runtime_offline", "the gateway is stopping");
    this.stopController.abort(stopped);
    for (const turn of this.turns.values()) turn.abort(stopped);
    // The turn engine has stopped, so nothing else runs in a lane held here any more.
    for (const release of this.held.values()) release();
    this.held.clear();
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
    for (const t of Object.values(this.transports)) t.close?.();
  }
}
