import { type Clock, HermesError, type Logger, settlesWithin, toHermesError } from "@hermes/common";
import { isDeliveryReason } from "@hermes/contract";
import PQueue from "p-queue";
import { Counter, Gauge, type Registry } from "prom-client";
import { attemptFailure } from "../../delivery/app/failure.js";
import {
  type DiscussionLimits,
  isPass,
  lastUserMessageIndex,
  needsYou,
  nextDiscussionAction,
  ORPHANED_REASON,
  openTurns,
  STOPPED_REASON,
  summarizeDiscussion,
  type TurnPlan,
  type TurnRecord,
  turnEventIds,
  turnFields,
} from "../core/discussion.js";
import type { Actor, AppendRequest, Member, RoomEvent } from "../core/index.js";
import { fitReply, type MemberTurnRequest, transcriptWindow } from "../core/member-turn.js";
import type { StoredRoom } from "../store/rooms-store.js";
import type { MemberTurnRouter } from "./member-turn-routes.js";
import type { RoomLog } from "./room-log.js";
import type { RoomDriverStatus, RoomDriverView } from "./rooms-service.js";

export interface DiscussionDriverSettings {
  /** A member turn still running after this long fails with delivery_timeout. */
  turnTimeoutMs: number;
  /** Rooms whose turns run at the same time (upstream: 4). */
  maxConcurrentRooms: number;
  limits: DiscussionLimits;
  /** A failed step (database busy, …) is tried again after this long. */
  retryMs: number;
  /**
   * How long a member's availability (profile here, route to its gateway) is reused. Every commit
   * wakes the room's pump, so this keeps file-system lookups off the append path.
   */
  availabilityTtlMs: number;
}

export const DEFAULT_DRIVER_SETTINGS: DiscussionDriverSettings = {
  turnTimeoutMs: 600_000,
  maxConcurrentRooms: 4,
  limits: { max_rounds: 3, max_replies: 10 },
  retryMs: 1_000,
  availabilityTtlMs: 2_000,
};

export interface DiscussionDriverDeps {
  /** The room logs: read from, appended to, and heard from (commits, authority changes). */
  log: RoomLog;
  members: MemberTurnRouter;
  gatewayId: string;
  clock: Clock;
  logger: Logger;
  registry?: Registry | undefined;
  settings?: Partial<DiscussionDriverSettings> | undefined;
}

type AbortWhy = "stop" | "shutdown" | "fenced";

interface RoomDrive {
  pumping: boolean;
  dirty: boolean;
  /** groups.stop arrived: the next turn this discussion would run is logged as stopped instead. */
  stopRequested: boolean;
  inflight?: { plan: TurnPlan; controller: AbortController; why?: AbortWhy } | undefined;
  /** Seq of the newest user message seen; where the next backwards search stops. */
  triggerSeq: number;
  /** The tail was searched for turns left open by an earlier process (or authority). */
  orphansChecked: boolean;
  /** Why this room is not driven (a refused append: fenced, demoted, disbanded). */
  halted?: string | undefined;
  retry?: NodeJS.Timeout | undefined;
}

/** Events read per page when searching backwards for the newest user message. */
const SCAN_PAGE = 256;
/** A user message further back than this is not under discussion any more. */
const SCAN_LIMIT = 8192;
/** How far back a restarted driver looks for turns left open. */
const ORPHAN_SCAN = 512;
/** Events read to build a member's transcript window (messages among them). */
const TRANSCRIPT_SCAN = 400;

const STOP_TEXT = "the discussion was stopped by an operator (groups.stop)";
const SHUTDOWN_TEXT = "the gateway stopped during this turn; it was not re-run";
const ORPHAN_TEXT = "the gateway running this turn went away before it ended (restart or crash); it was not re-run";

/** Thrown when the room log refuses the driver's append: the room is no longer driven here. */
class Halt extends Error {
  constructor(readonly why: string) {
    super(why);
  }
}

const HALTING_REASONS = new Set(["not_authority", "authority_conflict", "room_disbanded", "not_found", "replica_quarantined"]);

/**
 * The discussion driver of the rooms this gateway leads. Everything it does is
 * decided by the pure policy (rooms/core/discussion.ts) from the room log, and everything it
 * decides is written to the log before it acts on it:
 *
 *   turn.started → (member turn, local or on the member's gateway) →
 *   message.member + turn.settled{passed:false}  |  turn.settled{passed:true}  |  turn.failed{reason_code}
 *
 * Each room has one pump that runs one step at a time: read the log from the newest user message,
 * decide, act, repeat until the decision is to wait. A restart (or a promote) loses nothing: the
 * next step re-reads the log, and a turn that has `turn.started` without an end is logged as
 * `turn.failed{reason_code: runtime_offline}` — never silently run again — before the discussion
 * goes on. A refused append (fenced, demoted, disbanded) stops driving the room.
 */
export class DiscussionDriver implements RoomDriverView {
  private readonly settings: DiscussionDriverSettings;
  private readonly drives = new Map<string, RoomDrive>();
  private readonly pumps = new Set<Promise<void>>();
  private readonly slots: PQueue;
  private readonly actor: Actor;
  private readonly turnsCounter: Counter<"outcome">;
  private readonly availabilityCache = new Map<string, { at: number; why: string | null }>();
  private started = false;
  private stopping = false;

  constructor(private readonly deps: DiscussionDriverDeps) {
    this.settings = { ...DEFAULT_DRIVER_SETTINGS, ...deps.settings };
    this.slots = new PQueue({ concurrency: this.settings.maxConcurrentRooms });
    this.actor = Object.freeze({ kind: "gateway", id: deps.gatewayId });
    const registers = deps.registry ? [deps.registry] : [];
    this.turnsCounter = new Counter({
      name: "hermes_room_member_turns_total",
      help: "Discussion member turns ended on this gateway's rooms, by outcome (replied, passed, failed, orphaned, stopped)",
      labelNames: ["outcome"] as const,
      registers,
    });
    const drives = this.drives;
    new Gauge({
      name: "hermes_room_member_turns_running",
      help: "Discussion member turns running now for rooms this gateway leads",
      registers,
      collect() {
        let n = 0;
        for (const d of drives.values()) if (d.inflight) n++;
        this.set(n);
      },
    });
    deps.log.events.on("appended", (roomId) => this.appended(roomId));
    deps.log.events.on("authorityChanged", (roomId) => this.authorityChanged(roomId));
  }

  /** `groups.capabilities` `driver`: true while the driver runs. */
  get running(): boolean {
    return this.started && !this.stopping;
  }

  /** Start-up: every room led here is looked at once (open turns failed, unfinished discussions resumed). */
  start(): void {
    this.started = true;
    const { store } = this.deps.log;
    for (let offset = 0; ; offset += 500) {
      const ids = store.roomIds({ limit: 500, offset, includeDisbanded: false });
      for (const id of ids) if (store.state(id)?.role === "authority") this.wake(id);
      if (ids.length < 500) break;
    }
  }

  // -------------------------------------------------------------------------------------------
  // What the room log tells

  /**
   * Something was committed to the room: a user message may have arrived. Every commit of every
   * room lands here, so a room the pump would look at and leave at once (not driven here, no member
   * that can take a turn) is left now, before a pump is scheduled for it.
   */
  appended(roomId: string): void {
    const drive = this.drives.get(roomId);
    if (!drive?.pumping) {
      const stored = this.deps.log.store.room(roomId);
      if (stored && drive?.orphansChecked && this.nothingToDecide(stored, drive)) return;
    }
    this.wake(roomId);
  }

  /** Promote, demote or a fence: a room that is no longer ours stops its turn; one that became ours is looked at afresh. */
  authorityChanged(roomId: string): void {
    const drive = this.drives.get(roomId);
    const stored = this.deps.log.store.room(roomId);
    const why = stored ? this.notDriven(stored) : "no such room";
    if (why !== null) {
      if (drive?.inflight) {
        drive.inflight.why ??= "fenced";
        drive.inflight.controller.abort(new HermesError("authority_conflict", why));
      }
      return;
    }
    if (drive) {
      drive.halted = undefined;
      drive.orphansChecked = false;
      drive.triggerSeq = 0;
    }
    this.wake(roomId);
  }

  /** `groups.stop`: cancels the running turn (logged as discussion_stopped) or the next one; the number cancelled. */
  stopRoom(roomId: string): number {
    const stored = this.deps.log.store.room(roomId);
    if (!stored || this.notDriven(stored) !== null) return 0;
    const drive = this.drive(roomId);
    if (drive.inflight) {
      drive.inflight.why ??= "stop";
      drive.inflight.controller.abort(new HermesError("discussion_stopped", STOP_TEXT));
      drive.stopRequested = true;
      return 1;
    }
    const status = this.status(roomId);
    if (status.discussion?.state !== "running") return 0;
    drive.stopRequested = true;
    this.wake(roomId);
    return 1;
  }

  /** Driver status, needs-you and the current discussion of a room (groups.state). */
  status(roomId: string): RoomDriverStatus {
    const stored = this.deps.log.store.room(roomId);
    if (!stored) return { driver_status: "none", needs_you: false };
    const members = stored.meta.members;
    const tail = () => this.discussionEvents(roomId, stored.state.last_seq, 0).events;
    if (stored.state.role !== "authority") return { driver_status: "replica", needs_you: needsYou(members, tail()) };
    const why = this.notDriven(stored) ?? this.drives.get(roomId)?.halted;
    if (why !== undefined && why !== null) {
      const status = stored.meta.disbanded_at !== null ? "disbanded" : "fenced";
      return { driver_status: status, needs_you: needsYou(members, tail()) };
    }
    const { available, unavailable } = this.availability(members);
    const summary = summarizeDiscussion({
      room_id: roomId,
      members,
      events: tail(),
      available,
      limits: this.settings.limits,
    });
    return {
      driver_status: this.running ? summary.state : "off",
      needs_you: summary.needs_you,
      discussion: { ...summary, unavailable },
    };
  }

  // -------------------------------------------------------------------------------------------
  // The pump

  private drive(roomId: string): RoomDrive {
    let drive = this.drives.get(roomId);
    if (!drive) {
      drive = { pumping: false, dirty: false, stopRequested: false, triggerSeq: 0, orphansChecked: false };
      this.drives.set(roomId, drive);
    }
    return drive;
  }

  /**
   * Marks the room for another look and starts its pump if none runs. Wakes come from inside a
   * group commit (before its sends are answered), so the pump starts on a later turn of the event
   * loop: reading the log never delays an acknowledgement.
   */
  private wake(roomId: string): void {
    if (!this.started || this.stopping) return;
    const drive = this.drive(roomId);
    drive.dirty = true;
    if (drive.pumping) return;
    drive.pumping = true;
    const pump = this.pump(roomId, drive);
    this.pumps.add(pump);
    void pump.finally(() => this.pumps.delete(pump));
  }

  private async pump(roomId: string, drive: RoomDrive): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      while (drive.dirty && !this.stopping) {
        drive.dirty = false;
        if (await this.step(roomId, drive)) drive.dirty = true;
      }
    } catch (err) {
      if (err instanceof Halt) {
        drive.halted = err.why;
        this.deps.logger.warn({ room_id: roomId, why: err.why }, "discussion driver stops driving this room");
      } else {
        this.deps.logger.error({ err, room_id: roomId }, "discussion driver step failed; will try again");
        clearTimeout(drive.retry);
        drive.retry = setTimeout(() => this.wake(roomId), this.settings.retryMs);
        drive.retry.unref();
      }
    } finally {
      drive.pumping = false;
    }
  }

  /** Why a room is not driven here, or null. */
  private notDriven(stored: StoredRoom): string | null {
    const { state } = stored;
    if (state.role !== "authority") return `this gateway replicates the room; ${state.authority.gateway_id} drives it`;
    if (state.fenced_by) return `fenced by ${state.fenced_by.gateway_id}@${state.fenced_by.epoch}`;
    if (state.disbanded || stored.meta.disbanded_at !== null) return "the room is disbanded";
    if (state.safety_status === "quarantined") return "the room is quarantined";
    return null;
  }

  /**
   * True when a step of this room (its orphans already checked) would decide nothing: not driven
   * here, or no member can take a turn (a stop asked for then has nothing to cancel).
   */
  private nothingToDecide(stored: StoredRoom, drive: RoomDrive): boolean {
    if (drive.halted !== undefined || this.notDriven(stored) !== null) return true;
    if (this.availability(stored.meta.members, true).available.size > 0) return false;
    drive.stopRequested = false;
    return true;
  }

  private availability(
    members: readonly Member[],
    cached = false,
  ): { available: Set<string>; unavailable: { member_id: string; why: string }[] } {
    const available = new Set<string>();
    const unavailable: { member_id: string; why: string }[] = [];
    const now = this.deps.clock.now();
    for (const m of members) {
      const key = `${m.profile}\n${m.gateway_id ?? ""}`;
      const hit = cached ? this.availabilityCache.get(key) : undefined;
      let why: string | null;
      if (hit && now - hit.at < this.settings.availabilityTtlMs) why = hit.why;
      else {
        why = this.deps.members.unavailable(m);
        if (this.availabilityCache.size > 4096) this.availabilityCache.clear();
        this.availabilityCache.set(key, { at: now, why });
      }
      if (why === null) available.add(m.member_id);
      else unavailable.push({ member_id: m.member_id, why });
    }
    return { available, unavailable };
  }

  /** One decision and its action. True when the pump should look again at once. */
  private async step(roomId: string, drive: RoomDrive): Promise<boolean> {
    const stored = this.deps.log.store.room(roomId);
    if (!stored) {
      this.drives.delete(roomId);
      return false;
    }
    const lastSeq = stored.state.last_seq;
    if (!drive.orphansChecked) {
      if (drive.halted !== undefined || this.notDriven(stored) !== null) return false;
      // Turns another process (or the previous authority) started and never ended: failed, not re-run.
      const tail = this.deps.log.store.events(roomId, Math.max(0, lastSeq - ORPHAN_SCAN), ORPHAN_SCAN);
      for (const turn of openTurns(tail)) await this.failOrphan(roomId, turn);
      drive.orphansChecked = true;
      return true;
    }
    if (this.nothingToDecide(stored, drive)) return false;
    const members = stored.meta.members;
    const { available } = this.availability(members, true);
    const { events, triggerSeq } = this.discussionEvents(roomId, lastSeq, drive.triggerSeq);
    drive.triggerSeq = triggerSeq;
    const decision = nextDiscussionAction({ room_id: roomId, members, events, available, limits: this.settings.limits });
    if (drive.stopRequested) {
      drive.stopRequested = false;
      if (decision.kind === "turn") {
        await this.append(roomId, this.failedEvent(decision.turn, STOPPED_REASON, STOP_TEXT, false));
        this.turnsCounter.inc({ outcome: "stopped" });
        return true;
      }
    }
    switch (decision.kind) {
      case "waiting":
        // Nothing runs in this process while a step does: an open turn is an orphan.
        await this.failOrphan(roomId, decision.turn);
        return true;
      case "turn": {
        const member = members.find((m) => m.member_id === decision.turn.member_id);
        if (!member) return false;
        await this.slots.add(() => this.runTurn(roomId, stored, member, decision.turn, drive));
        return true;
      }
      default:
        return false;
    }
  }

  /**
   * The events from the newest user message to `lastSeq` (searching backwards page by page, not
   * past `knownTrigger` when one is known and no newer one turns up). Empty when there is none.
   */
  private discussionEvents(roomId: string, lastSeq: number, knownTrigger: number): { events: RoomEvent[]; triggerSeq: number } {
    const pages: RoomEvent[][] = [];
    let hi = lastSeq;
    let scanned = 0;
    while (hi > 0 && scanned < SCAN_LIMIT) {
      const lo = Math.max(0, hi - SCAN_PAGE, knownTrigger > 0 ? knownTrigger - 1 : 0);
      if (lo >= hi) break;
      const page = this.deps.log.store.events(roomId, lo, hi - lo);
      pages.unshift(page);
      scanned += page.length;
      const at = lastUserMessageIndex(page);
      if (at >= 0) {
        const events = pages.flat();
        const start = events.indexOf(page[at]!);
        return { events: events.slice(start), triggerSeq: page[at]!.seq };
      }
      hi = lo;
    }
    return { events: [], triggerSeq: knownTrigger };
  }

  // -------------------------------------------------------------------------------------------
  // Turns

  private append(roomId: string, request: AppendRequest): Promise<RoomEvent> {
    return this.deps.log.append(roomId, request).then(
      (outcome) => outcome.event,
      (err: unknown) => {
        const e = toHermesError(err);
        if (HALTING_REASONS.has(e.reason)) throw new Halt(`${e.reason}: ${e.message}`);
        throw e;
      },
    );
  }

  private startedEvent(plan: TurnPlan): AppendRequest {
    return {
      origin: "server",
      event_id: turnEventIds(plan.turn_id).started,
      kind: "turn.started",
      actor: this.actor,
      payload: turnFields(plan),
    };
  }

  private failedEvent(plan: TurnPlan, reasonCode: string, error: string, started = true): AppendRequest {
    return {
      origin: "server",
      event_id: turnEventIds(plan.turn_id).failed,
      kind: "turn.failed",
      actor: this.actor,
      payload: { ...turnFields(plan), reason_code: reasonCode, error: error.slice(0, 2000), ...(started ? {} : { started: false }) },
    };
  }

  private async failOrphan(roomId: string, turn: TurnRecord): Promise<void> {
    const plan: TurnPlan = {
      turn_id: turn.turn_id,
      discussion_event_id: "",
      discussion_seq: turn.discussion_seq,
      member_id: turn.member_id,
      member_index: turn.member_index,
      round_index: turn.round_index,
      seen_through_seq: turn.seen_through_seq,
    };
    // Same fields as its turn.started, read back from the log.
    const started = turn.started_seq !== null ? this.deps.log.store.eventAt(roomId, turn.started_seq) : null;
    const payload = started ? (JSON.parse(started.payload_json) as Record<string, unknown>) : turnFields(plan);
    await this.append(roomId, {
      origin: "server",
      event_id: turnEventIds(turn.turn_id).failed,
      kind: "turn.failed",
      actor: this.actor,
      payload: { ...payload, reason_code: ORPHANED_REASON, error: ORPHAN_TEXT },
    });
    this.turnsCounter.inc({ outcome: "orphaned" });
    this.deps.logger.warn(
      { room_id: roomId, turn_id: turn.turn_id, member_id: turn.member_id },
      "open turn marked failed (runtime_offline)",
    );
  }

  private memberActor(member: Member): Actor {
    return {
      kind: "member",
      id: member.member_id,
      profile: member.profile,
      ...(member.display_name !== undefined ? { display_name: member.display_name } : {}),
    };
  }

  /** turn.started, the member's turn where it lives, then its end — all in the log before the next decision. */
  private async runTurn(roomId: string, stored: StoredRoom, member: Member, plan: TurnPlan, drive: RoomDrive): Promise<void> {
    // A stop (or shutdown) that arrived while this room waited for a slot: the next step logs it.
    if (this.stopping || drive.stopRequested) return;
    const controller = new AbortController();
    drive.inflight = { plan, controller };
    try {
      await this.append(roomId, this.startedEvent(plan));
      const request = this.turnRequest(roomId, stored, member, plan);
      const timeout = AbortSignal.timeout(this.settings.turnTimeoutMs);
      const signal = AbortSignal.any([controller.signal, timeout]);
      let end: AppendRequest[];
      let outcome: string;
      try {
        const result = await this.deps.members.run(member, request, signal, this.settings.turnTimeoutMs);
        const reply = fitReply(result.reply);
        const settled = (passed: boolean, messageEventId?: string): AppendRequest => ({
          origin: "server",
          event_id: turnEventIds(plan.turn_id).settled,
          kind: "turn.settled",
          actor: this.actor,
          payload: { ...turnFields(plan), passed, ...(messageEventId ? { message_event_id: messageEventId } : {}) },
        });
        if (isPass(reply)) {
          end = [settled(true)];
          outcome = "passed";
        } else {
          const messageId = turnEventIds(plan.turn_id).message;
          const payload: Record<string, unknown> = { text: reply, turn_id: plan.turn_id };
          if (plan.thread_id !== undefined) payload.thread_id = plan.thread_id;
          end = [
            { origin: "server", event_id: messageId, kind: "message.member", actor: this.memberActor(member), payload },
            settled(false, messageId),
          ];
          outcome = "replied";
        }
      } catch (err) {
        const why = drive.inflight?.why;
        if (why === "fenced") return;
        const { reason, text } =
          why === "stop"
            ? { reason: STOPPED_REASON, text: STOP_TEXT }
            : why === "shutdown"
              ? { reason: "runtime_offline", text: SHUTDOWN_TEXT }
              : timeout.aborted && !controller.signal.aborted
                ? { reason: "delivery_timeout", text: `the turn did not end within ${Math.round(this.settings.turnTimeoutMs / 1000)} s` }
                : turnFailure(err);
        end = [this.failedEvent(plan, reason, text)];
        outcome = why === "stop" ? "stopped" : "failed";
      }
      // Submitted together: one group commit, so a reply never lands without its settle.
      await Promise.all(end.map((request) => this.append(roomId, request)));
      this.turnsCounter.inc({ outcome });
    } finally {
      drive.inflight = undefined;
    }
  }

  private turnRequest(roomId: string, stored: StoredRoom, member: Member, plan: TurnPlan): MemberTurnRequest {
    const through = plan.seen_through_seq;
    const events = this.deps.log.store.events(roomId, Math.max(0, through - TRANSCRIPT_SCAN), Math.min(through, TRANSCRIPT_SCAN));
    return {
      room_id: roomId,
      room_name: stored.meta.name,
      authority: { ...stored.state.authority },
      turn_id: plan.turn_id,
      member,
      members: stored.meta.members,
      seen_through_seq: through,
      transcript: transcriptWindow(events, through),
    };
  }

  // -------------------------------------------------------------------------------------------

  /**
   * Resolves once no room's pump runs: every commit so far has been looked at and acted on (what a
   * test waits for before it checks that the driver did nothing more).
   */
  async idle(): Promise<void> {
    while (this.pumps.size > 0) await Promise.all([...this.pumps]);
  }

  /**
   * Graceful stop: no new turns; running ones get `graceMs` to end (their results are logged),
   * then they are cancelled and logged as runtime_offline. Call before the rooms service stops.
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    // Rooms waiting for a slot return at once (runTurn checks `stopping`); nothing is dropped unanswered.
    for (const drive of this.drives.values()) clearTimeout(drive.retry);
    const idle = Promise.all([...this.pumps]);
    const expired = !(await settlesWithin(idle, graceMs));
    if (expired) {
      for (const drive of this.drives.values()) {
        if (!drive.inflight) continue;
        drive.inflight.why ??= "shutdown";
        drive.inflight.controller.abort(new HermesError("runtime_offline", SHUTDOWN_TEXT));
      }
      await idle;
    }
    this.deps.members.close();
  }
}

/** The reason_code and text of a failed member turn: delivery reasons kept, platform errors mapped onto them. */
function turnFailure(err: unknown): { reason: string; text: string } {
  const e = toHermesError(err);
  if (e.reason === "unknown_target" || e.reason === "discussion_stopped") return { reason: e.reason, text: e.message };
  const failure = attemptFailure(e);
  return { reason: isDeliveryReason(failure.reason) ? failure.reason : "unknown", text: failure.error };
}
