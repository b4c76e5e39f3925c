import {
  type AppendBatchPlan,
  type AppendItem,
  type AppendOutcome,
  type AppendRequest,
  CommitLinger,
  type LingerPolicy,
  MAX_BATCH_APPENDS,
  planAppendBatch,
  refusal,
} from "../core/index.js";
import type { RoomsStore } from "../store/rooms-store.js";

/** A submitted append; it is its own AppendItem (`stored` is filled in when the flush looks it up). */
interface Pending extends AppendItem {
  roomId: string;
  resolve(outcome: AppendOutcome): void;
  reject(err: unknown): void;
}

/** One room's part of a flush: its appends in order and what answers them. */
interface RoomBatch {
  roomId: string;
  items: Pending[];
  plan: AppendBatchPlan | null;
  /** Set instead of a plan when the room does not exist here. */
  missing: AppendOutcome | null;
}

export interface GroupCommitHooks {
  /**
   * After a commit: the plan each room that got new events committed (its events, their stored
   * bytes and the state it stored; for metrics and the live tails), and how many appends were answered.
   */
  committed(appendedByRoom: ReadonlyMap<string, AppendBatchPlan>, batchSize: number): void;
  /** `committed` threw (a bug in a listener); the appends are answered anyway. */
  listenerFailed?(err: unknown): void;
}

/**
 * Group commit ("acknowledged = durable"): every append submitted while the event loop is
 * busy — unary sends, JSON-RPC sends, Append stream messages — waits for the next flush, which plans
 * them with the pure core (planAppendBatch per room) and commits ALL of them in one IMMEDIATE
 * transaction at synchronous=FULL: one fsync for the whole batch. Each promise settles only after
 * that commit; if the commit fails, every append of the batch is rejected and none was acknowledged.
 *
 * A flush runs from setImmediate, after the poll phase has read every request that arrived, so the
 * batch is as large as the load makes it (1 when idle, thousands under a pipelined stream). With a
 * linger policy, a small batch of appends that arrive one by one at a steady rate waits a few
 * milliseconds for more first (rooms/core/commit-linger.ts). At most MAX_BATCH_APPENDS per room go
 * into one flush; the rest wait for the next one, in order.
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private readonly linger: CommitLinger | undefined;
  /** While a flush lingers: how many appends its turn had collected, and how to cancel its timer. */
  private lingering: { queued: number; cancel(): void } | undefined;

  constructor(
    private readonly store: RoomsStore,
    private readonly now: () => string,
    private readonly hooks: GroupCommitHooks,
    private readonly maxPerRoom = MAX_BATCH_APPENDS,
    linger?: LingerPolicy,
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {
    this.linger = linger && linger.maxMs > 0 ? new CommitLinger(linger) : undefined;
  }

  submit(roomId: string, request: AppendRequest): Promise<AppendOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ roomId, request, stored: null, resolve, reject });
      this.linger?.arrived(this.monotonicMs());
      // Enough have come: the flush waits no longer than the end of this turn (the queue grows by one, so this happens once).
      if (this.lingering !== undefined && this.queue.length === this.linger!.policy.enoughAppends) {
        this.lingering.cancel();
        const immediate = setImmediate(() => this.endLinger());
        this.lingering.cancel = () => clearImmediate(immediate);
      }
      this.schedule(true);
    });
  }

  get pending(): number {
    return this.queue.length;
  }

  /** A flush at the end of this turn; `mayLinger` false for appends a full flush left waiting (they have waited already). */
  private schedule(mayLinger: boolean): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      const wait = mayLinger ? (this.linger?.waitMs(this.queue.length, this.monotonicMs()) ?? 0) : 0;
      if (wait > 0) {
        const timer = setTimeout(() => this.endLinger(), wait);
        this.lingering = { queued: this.queue.length, cancel: () => clearTimeout(timer) };
        return;
      }
      this.scheduled = false;
      this.flush();
    });
  }

  /** The linger is over (its time is up, or enough appends came): flush what is queued now. */
  private endLinger(): void {
    const lingering = this.lingering!;
    lingering.cancel();
    this.lingering = undefined;
    this.linger!.waited(this.queue.length - lingering.queued);
    this.scheduled = false;
    this.flush();
  }

  /**
   * Plans and commits what is queued (synchronously: nothing else runs in between).
   *
   * The idempotency lookup is skipped at first: a room's plan made as if none of its event ids were
   * stored is the right plan whenever every append of it is accepted, and the commit itself checks
   * the ids (the id index refuses a stored one; then nothing is written). Only a plan with another
   * outcome (a refusal or a repeat could be a retry whose stored event answers it), or a commit
   * that met a stored id, is made again with the stored events looked up.
   */
  flush(): void {
    if (this.queue.length === 0) return;
    const perRoom = new Map<string, RoomBatch>();
    const later: Pending[] = [];
    for (const item of this.queue) {
      let batch = perRoom.get(item.roomId);
      if (batch === undefined) {
        batch = { roomId: item.roomId, items: [], plan: null, missing: null };
        perRoom.set(item.roomId, batch);
      }
      if (batch.items.length < this.maxPerRoom) batch.items.push(item);
      else later.push(item);
    }
    this.queue = later;
    const batches = [...perRoom.values()];

    try {
      const now = this.now();
      for (const batch of batches) this.plan(batch, now, false);
      if (!this.store.commitAppends(planned(batches), { idsUnchecked: true })) {
        // A stored event id met the commit (a retry of an acknowledged send): nothing was written.
        for (const batch of batches) this.plan(batch, now, true);
        this.store.commitAppends(planned(batches));
      }
    } catch (err) {
      // Nothing of this batch committed: nobody is acknowledged.
      for (const batch of batches) for (const item of batch.items) item.reject(err);
      if (this.queue.length > 0) this.schedule(false);
      return;
    }
    const appended = new Map<string, AppendBatchPlan>();
    let answered = 0;
    for (const { roomId, items, plan } of batches) {
      answered += items.length;
      if (plan !== null && plan.appended.length > 0) appended.set(roomId, plan);
    }
    try {
      if (appended.size > 0) this.hooks.committed(appended, answered);
    } catch (err) {
      // Committed is committed: every append is answered whatever a listener did.
      this.hooks.listenerFailed?.(err);
    }
    for (const { items, plan, missing } of batches) {
      for (let i = 0; i < items.length; i++) items[i]!.resolve(plan === null ? missing! : plan.outcomes[i]!);
    }
    if (this.queue.length > 0) this.schedule(false);
  }

  /** Plans one room's appends, with their stored events looked up or (`lookup` false) assumed absent. */
  private plan(batch: RoomBatch, now: string, lookup: boolean): void {
    const state = this.store.state(batch.roomId);
    if (state === undefined) {
      const refused = refusal("not_found", `no room ${batch.roomId} on this gateway; create it or replicate it first`, {
        room_id: batch.roomId,
      });
      batch.plan = null;
      batch.missing = { kind: "refused", refusal: refused };
      return;
    }
    const { items } = batch;
    if (lookup) {
      const stored = this.store.eventsByIds(
        batch.roomId,
        items.map((item) => item.request.event_id),
      );
      for (const item of items) item.stored = stored.get(item.request.event_id) ?? null;
    }
    const plan = planAppendBatch(state, items, now);
    if (!lookup && plan.appended.length !== items.length) this.plan(batch, now, true);
    else batch.plan = plan;
  }
}

function planned(batches: readonly RoomBatch[]): { roomId: string; plan: AppendBatchPlan }[] {
  const out: { roomId: string; plan: AppendBatchPlan }[] = [];
  for (const { roomId, plan } of batches) if (plan !== null) out.push({ roomId, plan });
  return out;
}
