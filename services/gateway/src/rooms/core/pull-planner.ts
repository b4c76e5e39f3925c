import { type BackoffOptions, backoffDelayMs, DEFAULT_BACKOFF } from "@hermes/common/pure";
import { formatAuthority } from "./lineage.js";
import { type Refusal, refusal } from "./refusal.js";
import type { ReplicationDecision } from "./replication.js";
import type { Authority, LogPage } from "./types.js";

/**
 * The pull loop's decisions, as a state machine: what a replica asks its source for next, when it
 * retreats, refetches, backs off, or stops. The shells only do what it says (rooms/app/replicator.ts
 * against a real RoomSource; testing/pull.ts against simulated gateways), so the limits below are
 * decided and tested here once.
 *
 * Events in: a page received (from a fetch or the live tail), the decision the shell applied for
 * it, a refusal (a failed fetch or tail), the tail's end, a timer, a newer epoch learned elsewhere.
 * Effects out: fetch a page since N (and prefetch the next one while a page is applied), apply a
 * page, open the live tail since N, observe an authority (self-fencing on a redirect), back off,
 * stop with a reason, or fail with a refusal.
 */

export interface PullLimits {
  /** Refetches from a divergence point (to see the hash that confirms it) before giving up. */
  maxRefetches: number;
  /** Retreats to where the source says it ends (`cursor_conflict`) before giving up. */
  maxCursorRetreats: number;
  /** Fetched pages in a row that add nothing although the source says it has more: it is inconsistent. */
  maxIdlePages: number;
}

export const PULL_LIMITS: PullLimits = { maxRefetches: 4, maxCursorRetreats: 4, maxIdlePages: 8 };

/** Failures a follower retries with back-off; any other refusal stops it (quarantine, refusals, bad keys). */
export const TRANSIENT_PULL_REASONS: ReadonlySet<string> = new Set([
  "unavailable",
  "timeout",
  "database_busy",
  "disk_full",
  "cursor_conflict",
  "internal",
  "unknown",
]);

/**
 * - `catch_up`: pull pages until the source has no more, then stop (`groups.replicate`).
 * - `follow`: catch up, then tail the source; reconnect with back-off after transient failures;
 *   stop only at `room.disbanded` or on a refusal.
 */
export type PullMode = "catch_up" | "follow";

export type PullEvent =
  | { kind: "page"; page: LogPage }
  | { kind: "applied"; decision: ReplicationDecision; before_last_seq: number }
  | { kind: "refused"; refusal: Refusal }
  | { kind: "tail_ended" }
  | { kind: "timer" }
  /** A newer epoch of the room is known from elsewhere (the coordinator): pages of older epochs are stale. */
  | { kind: "epoch_known"; epoch: number };

export type PullStopReason = "caught_up" | "idle_source" | "disbanded";

export type PullEffect =
  | { kind: "fetch"; since_seq: number }
  /** The page after the one being applied: ask now, so the source reads it while this one is applied. */
  | { kind: "prefetch"; since_seq: number }
  | { kind: "apply"; page: LogPage }
  | { kind: "tail"; since_seq: number }
  | { kind: "observe"; authority: Authority }
  | { kind: "backoff"; delay_ms: number }
  | { kind: "stop"; reason: PullStopReason }
  | { kind: "fail"; refusal: Refusal };

/** What the shell reports while following: tailing or pulling, waiting to reconnect, or done. */
export type PullPhase = "pulling" | "tailing" | "backoff" | "stopped";

export interface PullPlannerOptions {
  mode: PullMode;
  /** The replica's last_seq when the loop starts. */
  last_seq: number;
  /** Ask from this seq for the first page instead of last_seq (tests; a divergence check). */
  since?: number;
  /** `follow` only: start with the live tail (right after a catch-up) instead of catching up first. */
  tail_first?: boolean;
  limits?: Partial<PullLimits>;
  backoff?: Partial<BackoffOptions>;
  /** The jitter of back-off delays, in [0, 1): injected. */
  random: () => number;
}

export class PullPlanner {
  private readonly mode: PullMode;
  private readonly limits: PullLimits;
  private readonly backoffOptions: BackoffOptions & { random: () => number };
  private phase: PullPhase = "pulling";
  private lastSeq: number;
  private readonly firstSince: number | undefined;
  private readonly tailFirst: boolean;
  /** The page being applied: its has_more decides what comes next. */
  private current: LogPage | null = null;
  /** Since of the last fetch. */
  private requested = 0;
  private refetches = 0;
  private retreats = 0;
  private idle = 0;
  private failures = 0;
  private newestEpoch = 0;

  constructor(options: PullPlannerOptions) {
    this.mode = options.mode;
    this.limits = { ...PULL_LIMITS, ...options.limits };
    this.backoffOptions = { ...DEFAULT_BACKOFF, ...options.backoff, random: options.random };
    this.lastSeq = options.last_seq;
    this.firstSince = options.since;
    this.tailFirst = options.mode === "follow" && options.tail_first === true;
  }

  get status(): PullPhase {
    return this.phase;
  }

  /** The first effects. */
  start(): PullEffect[] {
    if (this.tailFirst) return this.tail();
    return [this.fetch(this.firstSince ?? this.lastSeq)];
  }

  on(event: PullEvent): PullEffect[] {
    if (this.phase === "stopped") return [];
    switch (event.kind) {
      case "page":
        return this.received(event.page);
      case "applied":
        return this.applied(event.decision, event.before_last_seq);
      case "refused":
        return this.refused(event.refusal);
      case "tail_ended":
        return this.phase === "tailing" ? this.retry() : [];
      case "timer":
        return this.phase === "backoff" ? [this.fetch(this.lastSeq)] : [];
      case "epoch_known":
        this.newestEpoch = Math.max(this.newestEpoch, event.epoch);
        return [];
    }
  }

  private received(page: LogPage): PullEffect[] {
    if (page.authority.epoch < this.newestEpoch) {
      // A source still serving an epoch that was superseded (a paused or cut-off old authority).
      return this.fail(
        refusal(
          "epoch_regression",
          `${formatAuthority(page.authority)} serves room ${page.room_id} but epoch ${this.newestEpoch} is known; pull from the newer authority`,
          { page_epoch: page.authority.epoch, known_epoch: this.newestEpoch },
        ),
      );
    }
    this.current = page;
    if (this.phase === "pulling" && page.has_more)
      return [
        { kind: "prefetch", since_seq: page.cursor },
        { kind: "apply", page },
      ];
    return [{ kind: "apply", page }];
  }

  private applied(decision: ReplicationDecision, before: number): PullEffect[] {
    const page = this.current;
    this.current = null;
    switch (decision.kind) {
      case "refetch":
        if (++this.refetches > this.limits.maxRefetches) {
          return this.fail(
            refusal(
              "lineage_mismatch",
              `room ${page?.room_id ?? "?"}: ${decision.detail}; the source kept sending pages that cannot confirm it`,
              {
                refetches: this.refetches - 1,
              },
            ),
          );
        }
        return [this.fetch(decision.since_seq)];
      case "quarantined":
      case "refused":
        return this.fail(decision.refusal);
      default:
        break;
    }
    this.lastSeq = decision.state.last_seq;
    this.failures = 0;
    if (decision.state.disbanded && this.mode === "follow") return this.stop("disbanded");
    if (this.phase === "tailing") return [];
    const added = decision.kind === "noop" ? 0 : decision.events.length;
    this.idle = added === 0 && decision.state.last_seq === before ? this.idle + 1 : 0;
    const idleSource = page?.has_more === true && this.idle >= this.limits.maxIdlePages;
    if (page?.has_more && !idleSource) return [this.fetch(this.lastSeq)];
    if (this.mode === "catch_up") return this.stop(idleSource ? "idle_source" : "caught_up");
    return this.tail();
  }

  private refused(error: Refusal): PullEffect[] {
    const effects: PullEffect[] = [];
    const redirect = error.reason === "not_authority" ? authorityOf(error.data.authority) : null;
    if (redirect) effects.push({ kind: "observe", authority: redirect });
    const latest = error.data.latest_seq;
    if (
      this.phase === "pulling" &&
      error.reason === "cursor_conflict" &&
      typeof latest === "number" &&
      latest < this.requested &&
      this.retreats++ < this.limits.maxCursorRetreats
    ) {
      // The source ends before us (restored, or another branch): decide on a page it can serve.
      return [...effects, this.fetch(latest)];
    }
    if (this.mode === "follow" && TRANSIENT_PULL_REASONS.has(error.reason)) return [...effects, ...this.retry()];
    return [...effects, ...this.fail(error)];
  }

  private fetch(since: number): PullEffect {
    this.phase = "pulling";
    this.requested = since;
    return { kind: "fetch", since_seq: since };
  }

  private tail(): PullEffect[] {
    this.phase = "tailing";
    this.refetches = 0;
    this.retreats = 0;
    this.idle = 0;
    return [{ kind: "tail", since_seq: this.lastSeq }];
  }

  private retry(): PullEffect[] {
    this.phase = "backoff";
    const delay = backoffDelayMs(this.failures++, this.backoffOptions);
    return [{ kind: "backoff", delay_ms: delay }];
  }

  private stop(reason: PullStopReason): PullEffect[] {
    this.phase = "stopped";
    return [{ kind: "stop", reason }];
  }

  private fail(error: Refusal): PullEffect[] {
    this.phase = "stopped";
    return [{ kind: "fail", refusal: error }];
  }
}

function authorityOf(value: unknown): Authority | null {
  const a = value as { gateway_id?: unknown; epoch?: unknown } | undefined;
  return typeof a?.gateway_id === "string" && typeof a.epoch === "number" ? { gateway_id: a.gateway_id, epoch: a.epoch } : null;
}
