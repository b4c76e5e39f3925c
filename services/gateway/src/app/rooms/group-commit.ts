import {
  type AppendItem,
  type AppendOutcome,
  type AppendRequest,
  MAX_BATCH_APPENDS,
  planAppendBatch,
  refusal,
} from "../../core/rooms/index.js";
import type { RoomsStore } from "../../store/rooms-store.js";

interface Pending {
  roomId: string;
  request: AppendRequest;
  resolve(outcome: AppendOutcome): void;
  reject(err: unknown): void;
}

export interface GroupCommitHooks {
  /** After a commit: which rooms got how many new events (metrics, live tail). */
  committed(appendedByRoom: ReadonlyMap<string, number>, batchSize: number): void;
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
 * batch is as large as the load makes it (1 when idle, thousands under a pipelined stream). At most
 * MAX_BATCH_APPENDS per room go into one flush; the rest wait for the next one, in order.
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;

  constructor(
    private readonly store: RoomsStore,
    private readonly now: () => string,
    private readonly hooks: GroupCommitHooks,
    private readonly maxPerRoom = MAX_BATCH_APPENDS,
  ) {}

  submit(roomId: string, request: AppendRequest): Promise<AppendOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ roomId, request, resolve, reject });
      this.schedule();
    });
  }

  get pending(): number {
    return this.queue.length;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Plans and commits what is queued (synchronously: nothing else runs in between). */
  flush(): void {
    if (this.queue.length === 0) return;
    const perRoom = new Map<string, Pending[]>();
    const later: Pending[] = [];
    for (const item of this.queue) {
      let list = perRoom.get(item.roomId);
      if (list === undefined) {
        list = [];
        perRoom.set(item.roomId, list);
      }
      if (list.length < this.maxPerRoom) list.push(item);
      else later.push(item);
    }
    this.queue = later;

    const answers: { item: Pending; outcome: AppendOutcome }[] = [];
    const plans: { roomId: string; plan: ReturnType<typeof planAppendBatch> }[] = [];
    try {
      for (const [roomId, items] of perRoom) {
        const state = this.store.state(roomId);
        if (state === undefined) {
          const missing = refusal("not_found", `no room ${roomId} on this gateway; create it or replicate it first`, { room_id: roomId });
          for (const item of items) answers.push({ item, outcome: { kind: "refused", refusal: missing } });
          continue;
        }
        const stored = this.store.eventsByIds(
          roomId,
          items.map((item) => item.request.event_id),
        );
        const appendItems: AppendItem[] = items.map((item) => ({
          request: item.request,
          stored: stored.get(item.request.event_id) ?? null,
        }));
        const plan = planAppendBatch(state, appendItems, this.now());
        plans.push({ roomId, plan });
        for (const [i, item] of items.entries()) answers.push({ item, outcome: plan.outcomes[i]! });
      }
      this.store.commitAppends(plans);
    } catch (err) {
      // Nothing of this batch committed: nobody is acknowledged.
      for (const items of perRoom.values()) for (const item of items) item.reject(err);
      if (this.queue.length > 0) this.schedule();
      return;
    }
    const appended = new Map<string, number>();
    for (const { roomId, plan } of plans) if (plan.appended.length > 0) appended.set(roomId, plan.appended.length);
    try {
      if (appended.size > 0) this.hooks.committed(appended, answers.length);
    } catch (err) {
      // Committed is committed: every append is answered whatever a listener did.
      this.hooks.listenerFailed?.(err);
    }
    for (const { item, outcome } of answers) item.resolve(outcome);
    if (this.queue.length > 0) this.schedule();
  }
}
