import { Backoff, HermesError, type Logger, sleep, toHermesError } from "@hermes/common";
import { Events } from "../../home/app/events.js";
import {
  type Authority,
  type DivergenceRecord,
  formatAuthority,
  type LogPage,
  MAX_REPLICATION_LOG_LIMIT,
  newReplicaState,
  type PullEffect,
  type PullPhase,
  PullPlanner,
  type PullStopReason,
  planReplication,
  type QuorumPolicy,
  type ReplicationDecision,
  type RoomEvent,
  type RoomState,
  refusal,
  refusalError,
  TRANSIENT_PULL_REASONS,
} from "../core/index.js";
import type { RoomsStore } from "../store/rooms-store.js";
import type { AppendedEvents } from "./live-tail.js";
import {
  describeSpec,
  joinWaitingPages,
  type RepostMessage,
  type RoomSource,
  type RoomSourceFactory,
  type SourceSpec,
} from "./room-source.js";
import type { RoomsMetrics } from "./rooms-metrics.js";

export interface ReplicateProgress {
  stored_seq: number;
  latest_seq: number;
  ingested: number;
}

export interface PreservedDivergence extends DivergenceRecord {
  divergence_id: number;
}

export interface ReplicateResult {
  room_id: string;
  stored_seq: number;
  ingested: number;
  authority: Authority;
  caught_up: boolean;
  following: boolean;
  divergences: PreservedDivergence[];
}

export interface FollowStatus {
  state: "following" | "reconnecting" | "stopped";
  source: string;
  last_error: string | null;
}

export interface ReplicatorDeps {
  store: RoomsStore;
  sources: RoomSourceFactory;
  metrics: RoomsMetrics;
  logger: Logger;
  now: () => string;
  /**
   * After events were applied (live tail of this gateway's own subscribers); `rewritten`: stored
   * events were replaced (a divergence); `appended`: the events a plain apply stored, and its state.
   */
  applied(roomId: string, rewritten: boolean, appended?: AppendedEvents): void;
  /** Self-fencing on an authority learned from a source's answer. */
  observe(roomId: string, authority: Authority): void;
  pageLimit?: number;
  maxBackoffMs?: number;
}

interface Follower {
  controller: AbortController;
  status: FollowStatus;
  done: Promise<void>;
  planner: PullPlanner | null;
}

/**
 * Following a quorum room: pages are applied durably (fsynced) and each applied seq is reported to
 * the authority, which acknowledges sends only once every in-sync replica holds them; pages of an
 * epoch below the newest one known are refused.
 */
export interface QuorumFollow {
  policy: QuorumPolicy;
  /** The newest epoch of the room known from the coordinator. */
  epoch: number;
  /** The replica holds everything through `seq` durably, as replicated from the authority at `epoch`. */
  durable(seq: number, epoch: number): void;
}

/**
 * Pull replication: the core's PullPlanner decides (what to ask for, when to retreat, refetch, back
 * off or stop) and this shell runs it against a real RoomSource: each page applied in one
 * transaction by the store (synchronous=NORMAL), the next page already in flight while one is
 * applied; `follow` tails the authority through Subscribe with reconnect and back-off until stopped.
 */
export class Replicator {
  /** A follower ended by itself (a refusal, a stale source, disband): whoever restarts followers hears it. */
  readonly events = new Events<{ followStopped: [roomId: string, reason: string] }>();
  private readonly followers = new Map<string, Follower>();
  /** The last source each room was pulled from (url + key in memory only): promote's fence notice uses it. */
  private readonly lastSource = new Map<string, SourceSpec>();
  private readonly notices = new Set<AbortController>();
  private readonly pageLimit: number;

  constructor(private readonly deps: ReplicatorDeps) {
    this.pageLimit = deps.pageLimit ?? MAX_REPLICATION_LOG_LIMIT;
  }

  /**
   * One page through the core and the store; returns the decision and the divergence id, if any. A
   * room new here starts as a replica of `sourceGatewayId` (default: the authority the page names;
   * a remote source's own id is not known over a bare URL).
   */
  applyPage(
    roomId: string,
    page: LogPage,
    sourceGatewayId = page.authority.gateway_id,
    quorum?: QuorumFollow,
  ): { decision: ReplicationDecision; divergenceId: number | null } {
    const { store } = this.deps;
    let state = store.state(roomId);
    if (state === undefined) {
      if (store.isRetired(roomId)) {
        throw refusalError(
          refusal("room_retired", `room id ${roomId} belongs to a room disbanded here; it cannot be replicated under that id`, {
            room_id: roomId,
          }),
        );
      }
      state = newReplicaState(roomId, store.selfGatewayId, sourceGatewayId);
    }
    const decision = planReplication(state, page, store.lookup(roomId), this.deps.now());
    const divergenceId = store.applyReplication(roomId, decision, { durable: quorum !== undefined, page });
    if (quorum && (decision.kind === "apply" || decision.kind === "noop" || decision.kind === "diverged")) {
      if (store.room(roomId)?.replication == null) store.setReplication(roomId, quorum.policy);
      quorum.durable(decision.state.last_seq, decision.state.authority.epoch);
    }
    const { metrics } = this.deps;
    if (decision.kind === "apply" || decision.kind === "diverged") {
      metrics.replicated.inc(decision.events.length);
      if (decision.kind === "apply") this.deps.applied(roomId, false, { state: decision.state, events: decision.events });
      else this.deps.applied(roomId, true);
    }
    if (decision.kind === "diverged" && decision.divergence.markers_only) {
      // A handover marker of an earlier version's demote: a clean move, not a split brain.
      this.deps.logger.info({ room_id: roomId, divergence: decision.divergence }, "handover marker preserved off the winning lineage");
    } else if (decision.kind === "diverged") {
      metrics.divergences.inc();
      this.deps.logger.warn({ room_id: roomId, divergence: decision.divergence }, "room diverged: local branch preserved");
    }
    if (decision.kind === "quarantined") {
      metrics.quarantines.inc();
      this.deps.logger.error({ room_id: roomId, reason: decision.refusal.reason }, decision.refusal.message);
    }
    if (decision.kind === "refused" && decision.fence) {
      this.deps.logger.warn({ room_id: roomId, fence: decision.fence }, "fenced: a newer authority claims this room");
    }
    return { decision, divergenceId };
  }

  /**
   * `groups.replicate`: pulls pages until caught up. With `follow`, the gateway then keeps tailing in
   * the background. A refusal (quarantine, a room led here, …) rejects with its typed error; what was
   * applied before stays applied.
   */
  async replicate(
    roomId: string,
    spec: SourceSpec,
    options: { follow: boolean; onProgress?: (p: ReplicateProgress) => void; signal?: AbortSignal; quorum?: QuorumFollow },
  ): Promise<ReplicateResult> {
    // A new follow replaces the old one; a one-shot pull may run next to a follower (each page is
    // planned against the state it lands on, so two loops cannot apply anything twice).
    if (options.follow) this.stopFollowing(roomId);
    const source = this.deps.sources.open(spec);
    this.lastSource.set(roomId, spec);
    let result: ReplicateResult;
    try {
      result = await this.catchUp(roomId, source, options);
    } catch (err) {
      source.close();
      throw err;
    }
    const state = this.deps.store.state(roomId);
    if (options.follow && state && !state.disbanded) {
      this.startFollowing(roomId, spec, source, "tail", options.quorum);
      if ("peer" in spec) this.deps.store.setFollowSource(roomId, { peer: spec.peer });
      return { ...result, following: true };
    }
    source.close();
    return result;
  }

  private async catchUp(
    roomId: string,
    source: RoomSource,
    options: { onProgress?: (p: ReplicateProgress) => void; signal?: AbortSignal; quorum?: QuorumFollow },
  ): Promise<ReplicateResult> {
    const planner = new PullPlanner({ mode: "catch_up", last_seq: this.deps.store.state(roomId)?.last_seq ?? 0, random: Math.random });
    if (options.quorum) planner.on({ kind: "epoch_known", epoch: options.quorum.epoch });
    let ingested = 0;
    let last: { state: RoomState; caught_up: boolean } | null = null;
    const divergences: PreservedDivergence[] = [];
    await this.runPlanner(roomId, source, planner, options.signal, options.quorum, (decision, divergenceId) => {
      if (decision.kind === "refetch" || decision.kind === "quarantined" || decision.kind === "refused") return;
      if (decision.kind === "diverged" && divergenceId !== null) divergences.push({ ...decision.divergence, divergence_id: divergenceId });
      ingested += decision.kind === "noop" ? 0 : decision.events.length;
      last = { state: decision.state, caught_up: decision.caught_up };
      options.onProgress?.({ stored_seq: decision.state.last_seq, latest_seq: decision.state.latest_seq, ingested });
    });
    const end = last as { state: RoomState; caught_up: boolean } | null;
    const state = end?.state ?? this.deps.store.state(roomId);
    return {
      room_id: roomId,
      stored_seq: state?.last_seq ?? 0,
      ingested,
      authority: state ? { ...state.authority } : { gateway_id: "", epoch: 0 },
      caught_up: end?.caught_up ?? false,
      following: false,
      divergences,
    };
  }

  /**
   * Runs a pull planner's effects against a source until it stops (resolves with the reason) or
   * fails (rejects with its refusal, or `timeout` when cancelled): the fetches (using the page
   * prefetched for the same cursor), the live tail, the applies through the core and the store, the
   * back-off.
   */
  private async runPlanner(
    roomId: string,
    source: RoomSource,
    planner: PullPlanner,
    signal: AbortSignal | undefined,
    quorum: QuorumFollow | undefined,
    applied: (decision: ReplicationDecision, divergenceId: number | null) => void,
    onPhase: (phase: PullPhase, error: HermesError | null) => void = () => undefined,
  ): Promise<PullStopReason> {
    const { store } = this.deps;
    const queue: PullEffect[] = planner.start();
    let prefetch: { since: number; page: Promise<LogPage> } | null = null;
    let tail: { iterator: AsyncIterator<LogPage>; stop: AbortController } | null = null;
    const known = () => {
      const state = store.state(roomId);
      return state && state.authority.epoch > 0 ? state.authority : undefined;
    };
    const fetch = (since: number): Promise<LogPage> =>
      source.log({ room_id: roomId, since_seq: since, limit: this.pageLimit, known: known() });
    const dropPrefetch = () => {
      prefetch?.page.catch(() => undefined);
      prefetch = null;
    };
    const closeTail = () => {
      tail?.stop.abort();
      tail = null;
    };
    const refused = (err: unknown): PullEffect[] => {
      const e = toHermesError(err);
      onPhase(planner.status, e);
      return planner.on({ kind: "refused", refusal: refusal(e.reason, e.message, e.data) });
    };
    try {
      for (;;) {
        if (signal?.aborted) throw new HermesError("timeout", `replication of room ${roomId} was cancelled`);
        const effect = queue.shift();
        if (effect === undefined) {
          // Nothing to do but wait for the live tail's next page.
          if (tail === null) throw new Error(`the pull planner of room ${roomId} stalled`);
          let next: IteratorResult<LogPage>;
          try {
            next = await tail.iterator.next();
          } catch (err) {
            closeTail();
            queue.push(...refused(err));
            continue;
          }
          if (signal?.aborted) continue;
          if (next.done) closeTail();
          queue.push(...planner.on(next.done ? { kind: "tail_ended" } : { kind: "page", page: next.value }));
          continue;
        }
        switch (effect.kind) {
          case "fetch": {
            closeTail();
            const reuse = prefetch !== null && prefetch.since === effect.since_seq;
            const pending = reuse ? prefetch!.page : fetch(effect.since_seq);
            if (!reuse) dropPrefetch();
            prefetch = null;
            let page: LogPage;
            try {
              page = await pending;
            } catch (err) {
              queue.push(...refused(err));
              break;
            }
            if (!signal?.aborted) queue.push(...planner.on({ kind: "page", page }));
            break;
          }
          case "prefetch": {
            dropPrefetch();
            const next = { since: effect.since_seq, page: fetch(effect.since_seq) };
            next.page.catch(() => undefined);
            prefetch = next;
            // grpc-js sends a call's request a few event-loop turns after the call is made: let it leave
            // before the (synchronous) apply, or the source only starts reading the next page after this
            // one is applied and the two gateways take turns instead of working in parallel.
            await new Promise<void>((resolve) => setImmediate(resolve));
            break;
          }
          case "apply": {
            const before = store.state(roomId)?.last_seq ?? 0;
            const { decision, divergenceId } = this.applyPage(roomId, effect.page, effect.page.authority.gateway_id, quorum);
            applied(decision, divergenceId);
            queue.push(...planner.on({ kind: "applied", decision, before_last_seq: before }));
            if (planner.status === "tailing") onPhase("tailing", null);
            break;
          }
          case "tail": {
            const stop = new AbortController();
            const onAbort = () => stop.abort();
            signal?.addEventListener("abort", onAbort, { once: true });
            stop.signal.addEventListener("abort", () => signal?.removeEventListener("abort", onAbort), { once: true });
            const stream = source.subscribe({ room_id: roomId, since_seq: effect.since_seq, known: known() }, stop.signal);
            tail = { iterator: joinWaitingPages(stream, this.pageLimit), stop };
            onPhase("tailing", null);
            break;
          }
          case "observe":
            this.deps.observe(roomId, effect.authority);
            break;
          case "backoff":
            onPhase("backoff", null);
            await sleep(effect.delay_ms, signal);
            queue.push(...planner.on({ kind: "timer" }));
            break;
          case "stop":
            return effect.reason;
          case "fail":
            throw refusalError(effect.refusal);
        }
      }
    } finally {
      closeTail();
      dropPrefetch();
    }
  }

  // ------------------------------------------------------------------------------------------
  // follow

  followStatus(roomId: string): FollowStatus | undefined {
    const f = this.followers.get(roomId);
    return f ? { ...f.status } : undefined;
  }

  /** Stops a follower (groups.stop, promote, shutdown). True when one was running. */
  stopFollowing(roomId: string, forget = false): boolean {
    const f = this.followers.get(roomId);
    if (forget) this.deps.store.setFollowSource(roomId, null);
    if (!f) return false;
    f.controller.abort();
    this.followers.delete(roomId);
    return f.status.state !== "stopped";
  }

  /** A newer epoch of the room is known (the coordinator's record): its follower refuses older pages. */
  knowEpoch(roomId: string, epoch: number): void {
    this.followers.get(roomId)?.planner?.on({ kind: "epoch_known", epoch });
  }

  /** Follows in the background, catching up first (a registered peer at start; a quorum room's authority). */
  resume(roomId: string, spec: SourceSpec, quorum?: QuorumFollow): void {
    this.stopFollowing(roomId);
    let source: RoomSource;
    try {
      source = this.deps.sources.open(spec);
    } catch (err) {
      this.deps.logger.warn({ room_id: roomId, err }, "cannot resume following the room");
      return;
    }
    this.lastSource.set(roomId, spec);
    this.startFollowing(roomId, spec, source, "catch_up", quorum);
  }

  private startFollowing(roomId: string, spec: SourceSpec, source: RoomSource, first: "tail" | "catch_up", quorum?: QuorumFollow): void {
    const controller = new AbortController();
    const status: FollowStatus = { state: "following", source: source.describe ?? describeSpec(spec), last_error: null };
    const follower: Follower = { controller, status, done: Promise.resolve(), planner: null };
    follower.done = this.followLoop(roomId, source, follower, first, quorum).finally(() => source.close());
    this.followers.set(roomId, follower);
  }

  private async followLoop(roomId: string, source: RoomSource, follower: Follower, first: "tail" | "catch_up", quorum?: QuorumFollow) {
    const { store, logger } = this.deps;
    const { status, controller } = follower;
    const signal = controller.signal;
    const state = store.state(roomId);
    if (state?.disbanded) {
      status.state = "stopped";
      return;
    }
    const planner = new PullPlanner({
      mode: "follow",
      last_seq: state?.last_seq ?? 0,
      tail_first: first === "tail",
      backoff: { maxMs: this.deps.maxBackoffMs ?? 30_000 },
      random: Math.random,
    });
    follower.planner = planner;
    if (quorum) planner.on({ kind: "epoch_known", epoch: quorum.epoch });
    const onPhase = (phase: PullPhase, error: HermesError | null) => {
      if (error !== null) {
        status.last_error = `${error.reason}: ${error.message}`;
        if (TRANSIENT_PULL_REASONS.has(error.reason))
          logger.warn({ room_id: roomId, reason: error.reason, err: error.message }, "lost the room's live tail; reconnecting");
      }
      if (phase === "backoff") status.state = "reconnecting";
      else if (phase === "tailing" && error === null) {
        status.state = "following";
        status.last_error = null;
      }
    };
    try {
      const reason = await this.runPlanner(roomId, source, planner, signal, quorum, () => undefined, onPhase);
      status.state = "stopped";
      this.events.emit("followStopped", roomId, reason);
    } catch (err) {
      if (signal.aborted) return;
      const e = toHermesError(err);
      status.state = "stopped";
      status.last_error = `${e.reason}: ${e.message}`;
      store.setFollowSource(roomId, null);
      logger.error({ room_id: roomId, reason: e.reason, err: e.message }, "stopped following the room");
      this.events.emit("followStopped", roomId, e.reason);
    }
  }

  // ------------------------------------------------------------------------------------------
  // fence notice after promote

  /**
   * After a promote, tells the previous source about the new claim (a log call carrying it), so an
   * old authority that is still writable fences itself as soon as it can be reached
   * (self-fencing). Retries with back-off until the source answers; a failure changes nothing.
   */
  noticeNewAuthority(roomId: string, authority: Authority): void {
    const spec = this.lastSource.get(roomId);
    if (!spec) return;
    let source: RoomSource;
    try {
      source = this.deps.sources.open(spec);
    } catch {
      return;
    }
    const controller = new AbortController();
    this.notices.add(controller);
    const backoff = new Backoff({ maxMs: this.deps.maxBackoffMs ?? 30_000 });
    const run = async () => {
      while (!controller.signal.aborted) {
        try {
          await source.log({ room_id: roomId, since_seq: 0, limit: 1, known: authority });
          this.deps.logger.info(
            { room_id: roomId, source: source.describe },
            `told ${source.describe} about ${formatAuthority(authority)}`,
          );
          return;
        } catch (err) {
          const e = toHermesError(err);
          if (!TRANSIENT_PULL_REASONS.has(e.reason) || e.reason === "cursor_conflict") return; // it answered: the claim reached it
        }
        await sleep(backoff.nextDelayMs(), controller.signal);
      }
    };
    run().finally(() => {
      source.close();
      this.notices.delete(controller);
    });
  }

  /** The authority this room was last pulled from (where operator reposts go). */
  sourceSpec(roomId: string): SourceSpec | undefined {
    return this.lastSource.get(roomId);
  }

  async repostVia(spec: SourceSpec, roomId: string, messages: RepostMessage[]): Promise<{ event: RoomEvent; idempotent: boolean }[]> {
    const source = this.deps.sources.open(spec);
    try {
      if (!source.repost) {
        throw new HermesError("refused", `${source.describe} cannot carry reposts; run the repost on the room's authority`);
      }
      return await source.repost(roomId, messages);
    } finally {
      source.close();
    }
  }

  /** Stops every follower and notice (gateway shutdown) and waits for them to end. */
  async stop(): Promise<void> {
    const done = [...this.followers.values()].map((f) => {
      f.controller.abort();
      return f.done.catch(() => undefined);
    });
    this.followers.clear();
    for (const n of this.notices) n.abort();
    await Promise.all(done);
  }
}
