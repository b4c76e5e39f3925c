import { Backoff, HermesError, type Logger, sleep, toHermesError } from "@hermes/common";
import {
  type Authority,
  type DivergenceRecord,
  formatAuthority,
  type LogPage,
  MAX_REPLICATION_LOG_LIMIT,
  newReplicaState,
  planReplication,
  type ReplicationDecision,
  type RoomEvent,
  refusal,
  refusalError,
} from "../../core/rooms/index.js";
import type { RoomsStore } from "../../store/rooms-store.js";
import { describeSpec, type RepostMessage, type RoomSource, type RoomSourceFactory, type SourceSpec } from "./room-source.js";
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
  /** After events were applied (live tail of this gateway's own subscribers). */
  applied(roomId: string): void;
  /** Self-fencing on an authority learned from a source's answer. */
  observe(roomId: string, authority: Authority): void;
  pageLimit?: number;
  maxBackoffMs?: number;
}

/** Errors a follower retries with back-off; anything else stops it (quarantine, refusals, bad keys). */
const TRANSIENT = new Set(["unavailable", "timeout", "database_busy", "disk_full", "cursor_conflict", "internal", "unknown"]);
const MAX_REFETCHES = 4;
const MAX_CURSOR_RETREATS = 4;
/** Pages in a row that added nothing although the source claims more: give up the call (the source is inconsistent). */
const MAX_IDLE_PAGES = 8;

interface Follower {
  controller: AbortController;
  status: FollowStatus;
  done: Promise<void>;
}

/**
 * Pull replication: the pull loop of core/rooms/testing/pull.ts against a real RoomSource,
 * each page applied in one transaction by the store (synchronous=NORMAL), the next page already in
 * flight while one is applied; and `follow`, which tails the authority through Subscribe with
 * reconnect and back-off until stopped.
 */
export class Replicator {
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
    const divergenceId = store.applyReplication(roomId, decision, page);
    const { metrics } = this.deps;
    if (decision.kind === "apply" || decision.kind === "diverged") {
      metrics.replicated.inc(decision.events.length);
      this.deps.applied(roomId);
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
    options: { follow: boolean; onProgress?: (p: ReplicateProgress) => void; signal?: AbortSignal },
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
      this.startFollowing(roomId, spec, source);
      if ("peer" in spec) this.deps.store.setFollowSource(roomId, { peer: spec.peer });
      return { ...result, following: true };
    }
    source.close();
    return result;
  }

  private async catchUp(
    roomId: string,
    source: RoomSource,
    options: { onProgress?: (p: ReplicateProgress) => void; signal?: AbortSignal },
  ): Promise<ReplicateResult> {
    const { store } = this.deps;
    let since: number | undefined;
    let refetches = 0;
    let retreats = 0;
    let idle = 0;
    let ingested = 0;
    const divergences: PreservedDivergence[] = [];
    let prefetch: { since: number; page: Promise<LogPage> } | null = null;
    const fetch = (from: number): Promise<LogPage> => {
      const state = store.state(roomId);
      const known = state && state.authority.epoch > 0 ? state.authority : undefined;
      return source.log({ room_id: roomId, since_seq: from, limit: this.pageLimit, known });
    };

    for (;;) {
      if (options.signal?.aborted) throw new HermesError("timeout", `replication of room ${roomId} was cancelled`);
      since ??= store.state(roomId)?.last_seq ?? 0;
      let page: LogPage;
      try {
        if (prefetch !== null && prefetch.since === since) page = await prefetch.page;
        else {
          prefetch?.page.catch(() => undefined);
          page = await fetch(since);
        }
      } catch (err) {
        prefetch = null;
        const e = toHermesError(err);
        this.observeRedirect(roomId, e);
        const latest = e.data.latest_seq;
        // The source ends before us (restored, or another branch): decide on a page it can serve.
        if (e.reason === "cursor_conflict" && typeof latest === "number" && latest < since && retreats++ < MAX_CURSOR_RETREATS) {
          since = latest;
          continue;
        }
        throw e;
      }
      prefetch = null;
      if (page.has_more) {
        const next = { since: page.cursor, page: fetch(page.cursor) };
        next.page.catch(() => undefined);
        prefetch = next;
        // grpc-js sends a call's request a few event-loop turns after the call is made: let it leave
        // before the (synchronous) apply below, or the source only starts reading the next page
        // after this one is applied and the two gateways take turns instead of working in parallel.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      const before = store.state(roomId)?.last_seq ?? 0;
      const { decision, divergenceId } = this.applyPage(roomId, page);
      switch (decision.kind) {
        case "refetch":
          if (++refetches > MAX_REFETCHES) {
            throw new HermesError(
              "lineage_mismatch",
              `room ${roomId}: ${decision.detail}; the source kept sending pages that cannot confirm it`,
            );
          }
          since = decision.since_seq;
          continue;
        case "quarantined":
        case "refused":
          prefetch?.page.catch(() => undefined);
          throw refusalError(decision.refusal);
        default:
          break;
      }
      if (decision.kind === "diverged" && divergenceId !== null) divergences.push({ ...decision.divergence, divergence_id: divergenceId });
      const added = decision.kind === "noop" ? 0 : decision.events.length;
      ingested += added;
      const state = decision.state;
      options.onProgress?.({ stored_seq: state.last_seq, latest_seq: state.latest_seq, ingested });
      idle = added === 0 && state.last_seq === before ? idle + 1 : 0;
      if (!page.has_more || idle >= MAX_IDLE_PAGES) {
        prefetch?.page.catch(() => undefined);
        return {
          room_id: roomId,
          stored_seq: state.last_seq,
          ingested,
          authority: { ...state.authority },
          caught_up: decision.caught_up,
          following: false,
          divergences,
        };
      }
      since = undefined;
    }
  }

  /** A source that answers not_authority names the newer authority: a gateway leading the room fences itself. */
  private observeRedirect(roomId: string, e: HermesError): void {
    if (e.reason !== "not_authority") return;
    const a = e.data.authority as { gateway_id?: unknown; epoch?: unknown } | undefined;
    if (typeof a?.gateway_id === "string" && typeof a.epoch === "number")
      this.deps.observe(roomId, { gateway_id: a.gateway_id, epoch: a.epoch });
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

  /** Resumes following a registered peer (at start). */
  resume(roomId: string, spec: SourceSpec): void {
    let source: RoomSource;
    try {
      source = this.deps.sources.open(spec);
    } catch (err) {
      this.deps.logger.warn({ room_id: roomId, err }, "cannot resume following the room");
      return;
    }
    this.lastSource.set(roomId, spec);
    this.startFollowing(roomId, spec, source, true);
  }

  private startFollowing(roomId: string, spec: SourceSpec, source: RoomSource, catchUpFirst = false): void {
    const controller = new AbortController();
    const status: FollowStatus = { state: "following", source: source.describe ?? describeSpec(spec), last_error: null };
    const follower: Follower = { controller, status, done: Promise.resolve() };
    follower.done = this.followLoop(roomId, source, controller.signal, status, catchUpFirst).finally(() => source.close());
    this.followers.set(roomId, follower);
  }

  private async followLoop(roomId: string, source: RoomSource, signal: AbortSignal, status: FollowStatus, catchUpFirst: boolean) {
    const backoff = new Backoff({ maxMs: this.deps.maxBackoffMs ?? 30_000 });
    const { store, logger } = this.deps;
    let needCatchUp = catchUpFirst;
    while (!signal.aborted) {
      try {
        if (needCatchUp) await this.catchUp(roomId, source, { signal });
        needCatchUp = true;
        const state = store.state(roomId);
        if (!state) throw new HermesError("not_found", `room ${roomId} is gone from this gateway`);
        if (state.disbanded) {
          status.state = "stopped";
          return;
        }
        const known = state.authority.epoch > 0 ? state.authority : undefined;
        for await (const page of source.subscribe({ room_id: roomId, since_seq: state.last_seq, known }, signal)) {
          if (signal.aborted) return;
          const { decision } = this.applyPage(roomId, page);
          if (decision.kind === "refetch") break;
          if (decision.kind === "quarantined" || decision.kind === "refused") throw refusalError(decision.refusal);
          status.state = "following";
          status.last_error = null;
          backoff.reset();
          if (decision.state.disbanded) {
            status.state = "stopped";
            return;
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        const e = toHermesError(err);
        this.observeRedirect(roomId, e);
        status.last_error = `${e.reason}: ${e.message}`;
        if (!TRANSIENT.has(e.reason)) {
          status.state = "stopped";
          store.setFollowSource(roomId, null);
          logger.error({ room_id: roomId, reason: e.reason, err: e.message }, "stopped following the room");
          return;
        }
        status.state = "reconnecting";
        logger.warn({ room_id: roomId, reason: e.reason, err: e.message }, "lost the room's live tail; reconnecting");
      }
      if (signal.aborted) return;
      await sleep(backoff.nextDelayMs(), signal);
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
          if (!TRANSIENT.has(e.reason) || e.reason === "cursor_conflict") return; // it answered: the claim reached it
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
