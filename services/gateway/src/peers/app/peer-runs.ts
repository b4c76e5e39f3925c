import { type Clock, HermesError, isoTime, type Logger, newId } from "@hermes/common";
import { Counter, Gauge, type Registry } from "prom-client";
import type { ChatService } from "../../agents/app/chat.js";
import { attemptFailure } from "../../delivery/app/failure.js";
import { attributedMessage } from "../../delivery/core/envelope.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { SessionService } from "../../identity/app/sessions.js";
import { applyRunEvent, isTerminalRun, type RunEvent, type RunKind, type RunRecord, recoverRun } from "../core/run.js";
import { decideIdempotency, idempotencyScope, type RunRequest, runFingerprint } from "../core/run-request.js";
import type { RunsStore } from "../store/runs-store.js";

export interface PeerRunsSettings {
  /** A turn still running after this long is cancelled and the run fails with delivery_timeout. */
  turnTimeoutMs: number;
  /** A run that ended this long ago gives its idempotency key back (24 h, as upstream). */
  keyRetentionMs: number;
  /** A run that ended this long ago is deleted. */
  runRetentionMs: number;
  /** How often the retention sweep runs. */
  pruneEveryMs: number;
}

export const DEFAULT_PEER_RUNS_SETTINGS: PeerRunsSettings = {
  turnTimeoutMs: 600_000,
  keyRetentionMs: 24 * 3600_000,
  runRetentionMs: 7 * 24 * 3600_000,
  pruneEveryMs: 3600_000,
};

export interface PeerRunsDeps {
  store: RunsStore;
  profiles: ProfileService;
  sessions: SessionService;
  chat: ChatService;
  clock: Clock;
  logger: Logger;
  registry?: Registry | undefined;
  settings?: Partial<PeerRunsSettings> | undefined;
}

interface Running {
  controller: AbortController;
  /** Set by a stop: the turn's failure is then a cancellation, not an error. */
  stoppedBecause?: string;
}

interface Waiter {
  resolve(run: RunRecord): void;
  reject(err: unknown): void;
}

const STOPPED_BY_PEER = "stopped by the peer (hermes peer stop)";
const INTERRUPTED_BY_STOP = "the gateway stopped while this run was running; it was not re-run (its turn may have had effects)";

/**
 * The run registry: turns other gateways start in this gateway's canonical Bot Chats. Each
 * run is a durable row (peers/store/runs-store.ts) moving through peers/core/run.ts; its turn waits in
 * the Bot Chat's lane behind whatever runs there (never refused). Idempotency keys are checked and
 * recorded in the same commit as the row, so a retry after a crash or a lost answer finds them.
 */
export class PeerRuns {
  private readonly settings: PeerRunsSettings;
  private readonly running = new Map<string, Running>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly ended: Counter<"status" | "reason">;
  private stopping = false;
  private pruneTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: PeerRunsDeps) {
    this.settings = { ...DEFAULT_PEER_RUNS_SETTINGS, ...deps.settings };
    const registers = deps.registry ? [deps.registry] : [];
    this.ended = new Counter({
      name: "hermes_peer_runs_total",
      help: "Peer runs (hermes peer dm/run) that reached an end state, by status and reason",
      labelNames: ["status", "reason"] as const,
      registers,
    });
    const running = this.running;
    const store = deps.store;
    new Gauge({
      name: "hermes_peer_runs_active",
      help: "Peer runs queued in or running from the Bot Chat lanes of this gateway",
      labelNames: ["status"] as const,
      registers,
      collect() {
        const counts = store.countByStatus();
        this.set({ status: "queued" }, counts["queued"] ?? 0);
        this.set({ status: "running" }, running.size);
      },
    });
  }

  private get store(): RunsStore {
    return this.deps.store;
  }

  /**
   * Start-up: runs that were running when the process went away become interrupted (never re-run);
   * queued ones are queued again in their original order. Then the retention sweep starts.
   */
  start(): { interrupted: number; requeued: number } {
    const now = this.deps.clock.now();
    let interrupted = 0;
    for (const run of this.store.inState("running")) {
      const next = recoverRun(run, now);
      if (this.store.transition(next, "running", isoTime(now))) {
        this.ended.inc({ status: next.status, reason: "none" });
        interrupted++;
        this.deps.logger.warn({ run_id: run.run_id, profile: run.profile }, "peer run was running at restart: interrupted");
      }
    }
    const queued = this.store.inState("queued");
    for (const run of queued) this.schedule(run);
    this.prune();
    this.pruneTimer = setInterval(() => this.prune(), this.settings.pruneEveryMs).unref();
    return { interrupted, requeued: queued.length };
  }

  /**
   * Admits a run (`dm` or `run`): resolves the profile, applies the idempotency key (same key and
   * input → the original run, replayed; other input → idempotency_conflict) and queues the turn.
   */
  submit(kind: RunKind, request: RunRequest): { run: RunRecord; replayed: boolean } {
    if (this.stopping) throw new HermesError("runtime_offline", "the gateway is stopping; start the run again when it is back");
    const profile = this.targetProfile(request.profile);
    this.deps.profiles.assertIdentitySettled(profile);
    const fingerprint = runFingerprint(profile, request.input);
    const scope = idempotencyScope(request);
    const key = request.idempotency_key;
    if (key !== null) {
      const decision = decideIdempotency(this.store.byIdempotencyKey(scope, key), fingerprint, key);
      if (decision.kind === "replay") {
        this.deps.logger.info({ run_id: decision.run_id, idempotency_key: key }, "peer run replayed by idempotency key");
        return { run: this.get(decision.run_id), replayed: true };
      }
    }
    // The Bot Chat exists since the profile was created; ensure() is a lookup then.
    const session = this.deps.sessions.botChat(profile);
    const now = this.deps.clock.now();
    const run: RunRecord = {
      run_id: newId("run"),
      kind,
      status: "queued",
      profile,
      session_id: session.session_id,
      sender_profile: request.sender_profile,
      sender_gateway: request.sender_gateway,
      sender_name: request.sender_name,
      input: request.input,
      fingerprint,
      idempotency_key: key,
      reply: null,
      reason: null,
      error: null,
      created_at: isoTime(now),
      started_at: null,
      ended_at: null,
    };
    // The check above and this insert run without an await between them, and the unique index
    // refuses a second row for the key even if another process wrote one meanwhile.
    this.store.insert(run, scope, isoTime(now));
    this.deps.logger.info(
      { run_id: run.run_id, kind, profile, from: `${run.sender_profile}@${run.sender_gateway}`, idempotency_key: key ?? undefined },
      "peer run queued",
    );
    this.schedule(run);
    return { run, replayed: false };
  }

  /** The local profile for a name or former name; an unknown one is unknown_target listing the bots here. */
  private targetProfile(name: string): string {
    try {
      return this.deps.profiles.resolve(name);
    } catch (err) {
      if (err instanceof HermesError && err.reason === "not_found") {
        const profiles = this.deps.profiles.names();
        throw new HermesError("unknown_target", `no bot called ${JSON.stringify(name)} on this gateway; it has: ${profiles.join(", ")}`, {
          data: { target: name, teammates: profiles },
        });
      }
      throw err;
    }
  }

  get(runId: string): RunRecord {
    const run = this.store.get(runId);
    if (!run) {
      const days = Math.round(this.settings.runRetentionMs / 86_400_000);
      throw new HermesError("not_found", `no run ${runId} on this gateway (runs are kept for ${days} days after they end)`, {
        data: { run_id: runId },
      });
    }
    return run;
  }

  /**
   * Resolves with the run once it has ended, or as it stands after `ms` (or when `signal` aborts).
   * Rejects with runtime_offline when the gateway begins to stop first.
   */
  wait(runId: string, ms: number, signal?: AbortSignal): Promise<RunRecord> {
    const run = this.get(runId);
    if (isTerminalRun(run.status) || ms <= 0) return Promise.resolve(run);
    if (this.stopping) return Promise.reject(this.stoppingError(run));
    return new Promise<RunRecord>((resolve, reject) => {
      let set = this.waiters.get(runId);
      if (!set) {
        set = new Set();
        this.waiters.set(runId, set);
      }
      const waiters = set;
      const finish = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        waiters.delete(waiter);
        if (waiters.size === 0 && this.waiters.get(runId) === waiters) this.waiters.delete(runId);
      };
      const current = () => this.store.get(runId) ?? run;
      const waiter: Waiter = {
        resolve: (r) => {
          finish();
          resolve(r);
        },
        reject: (err) => {
          finish();
          reject(err);
        },
      };
      const onAbort = () => waiter.resolve(current());
      const timer = setTimeout(() => waiter.resolve(current()), ms);
      signal?.addEventListener("abort", onAbort, { once: true });
      waiters.add(waiter);
    });
  }

  /**
   * Stops a run: a queued one is cancelled at once (its turn never starts); a running turn is
   * cancelled and this resolves when it has unwound (or after `settleMs`, as it stands). A run that
   * has already ended is returned unchanged.
   */
  async stopRun(runId: string, why = STOPPED_BY_PEER, settleMs = 10_000): Promise<RunRecord> {
    const run = this.get(runId);
    if (isTerminalRun(run.status)) return run;
    if (run.status === "queued") {
      const cancelled = this.end(run, { kind: "cancel", why });
      if (cancelled) return cancelled;
      return this.get(runId);
    }
    const active = this.running.get(runId);
    if (!active) return run; // running in the row only: the lane is about to record its end
    active.stoppedBecause ??= why;
    active.controller.abort(new HermesError("runtime_offline", why));
    this.deps.logger.info({ run_id: runId }, "peer run stop requested");
    return this.wait(runId, settleMs);
  }

  /** Queues the run's turn in its Bot Chat's lane. */
  private schedule(run: RunRecord): void {
    let lane: Promise<void>;
    try {
      lane = this.deps.chat.exclusive(run.session_id, () => this.execute(run.run_id));
    } catch (err) {
      this.notStarted(run.run_id, err);
      return;
    }
    lane.catch((err: unknown) => this.notStarted(run.run_id, err));
  }

  /**
   * The lane dropped the run before it started: while the gateway stops it stays queued for the
   * next start; otherwise (its profile is being deleted) it fails with the reason.
   */
  private notStarted(runId: string, err: unknown): void {
    if (this.stopping) return;
    const run = this.store.get(runId);
    if (run?.status !== "queued") return;
    const failure = attemptFailure(err);
    this.end(run, { kind: "fail", reason: failure.reason, error: `the run could not start: ${failure.error}` });
  }

  /** The turn, inside the Bot Chat's lane. */
  private async execute(runId: string): Promise<void> {
    const queued = this.store.get(runId);
    if (queued?.status !== "queued") return; // stopped (or its profile deleted) while it waited
    const now = this.deps.clock.now();
    const run = applyRunEvent(queued, { kind: "start" }, now);
    if (!this.store.transition(run, "queued", isoTime(now))) return;
    const active: Running = { controller: new AbortController() };
    this.running.set(runId, active);
    const timeout = AbortSignal.timeout(this.settings.turnTimeoutMs);
    const signal = AbortSignal.any([active.controller.signal, timeout]);
    const log = this.deps.logger.child({ run_id: runId, profile: run.profile });
    log.debug("peer run started");
    try {
      const session = this.deps.sessions.store.byId(run.session_id) ?? this.deps.sessions.botChat(run.profile);
      const from = `${run.sender_profile}@${run.sender_gateway}`;
      const text = attributedMessage({ name: run.sender_name || run.sender_profile, handle: from }, run.input);
      const out = await this.deps.chat.runLocked(run.profile, session, text, {
        signal,
        user_meta: { run_id: runId, from },
        commands: false,
        obligation: false,
      });
      this.end(run, { kind: "complete", reply: out.reply });
    } catch (err) {
      const failure = attemptFailure(err);
      if (active.stoppedBecause !== undefined) this.end(run, { kind: "cancel", why: active.stoppedBecause });
      else if (this.stopping && (failure.cancelled || failure.reason === "runtime_offline")) {
        this.end(run, { kind: "interrupt", why: INTERRUPTED_BY_STOP });
      } else if (timeout.aborted) {
        const seconds = Math.round(this.settings.turnTimeoutMs / 1000);
        this.end(run, { kind: "fail", reason: "delivery_timeout", error: `the turn did not finish within ${seconds} s` });
      } else this.end(run, { kind: "fail", reason: failure.reason, error: failure.error });
    } finally {
      this.running.delete(runId);
    }
  }

  /**
   * Records an end state if the row is still where `from` left it, and answers the waiters. When
   * something else got there first (a stop racing the end of the turn), the stored end stands.
   */
  private end(from: RunRecord, event: RunEvent): RunRecord | undefined {
    const now = this.deps.clock.now();
    const next = applyRunEvent(from, event, now);
    const log = this.deps.logger.child({ run_id: from.run_id, profile: from.profile });
    if (!this.store.transition(next, from.status, isoTime(now))) {
      const stored = this.store.get(from.run_id);
      if (stored && isTerminalRun(stored.status)) this.answer(stored);
      return undefined;
    }
    this.ended.inc({ status: next.status, reason: next.reason ?? "none" });
    log.info({ status: next.status, reason: next.reason ?? undefined }, `peer run ${next.status}`);
    this.answer(next);
    return next;
  }

  private answer(run: RunRecord): void {
    const waiters = this.waiters.get(run.run_id);
    if (!waiters) return;
    for (const w of [...waiters]) w.resolve(run);
  }

  private stoppingError(run: RunRecord): HermesError {
    return new HermesError(
      "runtime_offline",
      `the gateway is stopping; run ${run.run_id} was ${run.status} (a queued run starts again with the gateway, a running one ends as interrupted)`,
      { data: { run_id: run.run_id, status: run.status } },
    );
  }

  /** Retention: releases idempotency keys after keyRetentionMs, deletes runs after runRetentionMs (ended ones only). */
  prune(): { released: number; deleted: number } {
    const now = this.deps.clock.now();
    try {
      return this.store.prune(isoTime(now - this.settings.keyRetentionMs), isoTime(now - this.settings.runRetentionMs));
    } catch (err) {
      this.deps.logger.warn({ err }, "pruning peer runs failed; will retry");
      return { released: 0, deleted: 0 };
    }
  }

  /** Graceful stop, first step: no new runs; callers waiting for one are told (the rows say the rest). */
  beginStop(): void {
    this.stopping = true;
    clearInterval(this.pruneTimer);
    for (const [runId, waiters] of [...this.waiters]) {
      const run = this.store.get(runId);
      for (const w of [...waiters]) w.reject(run ? this.stoppingError(run) : new HermesError("runtime_offline", "the gateway is stopping"));
    }
  }

  /** Runs in flight right now (for status and tests). */
  get activeCount(): number {
    return this.running.size;
  }
}
