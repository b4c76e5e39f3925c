import type { HermesError } from "@hermes/common/client";
import type { Etcd3, IKeyValue } from "etcd3";
import type { LeaseStatus } from "../core/lease.js";
import { encodeSingletonValue, parseSingletonValue, type SingletonKey, singletonTransition, viewSingleton } from "../core/singleton.js";
import type { WatchHandle, WatchHandlers } from "./watch.js";

export interface SingletonHandlers {
  /** This gateway is now the one holder: start the job. */
  onAcquired(): void;
  /** It no longer is (another holder, its lease lost, or released): stop the job now. */
  onLost(): void;
}

export interface SingletonHandle {
  /** This gateway holds the name now (its lease valid, the key under it). */
  holding(): boolean;
  /** The holder last seen (this gateway's id while holding), null when free or unknown. */
  holder(): string | null;
  /** Stops the job if running (onLost), deletes the key if ours and stops competing. */
  release(): Promise<void>;
}

export interface SingletonContext {
  client: Etcd3;
  key: string;
  gatewayId: string;
  lease(): LeaseStatus;
  call<T>(what: string, work: () => Promise<T>): Promise<T>;
  watch(target: { key: string }, handlers: WatchHandlers): Promise<WatchHandle>;
  backgroundError(err: unknown): void;
}

/**
 * One name competed for by this gateway: watches the key, re-evaluates on every change of the key
 * or of the lease, tries to create the key when it is free, and calls the handlers on transitions.
 * A failure to reach etcd changes nothing by itself: the holder keeps the job while its lease is
 * valid by its own clock, and stops when it is not.
 */
export class SingletonRunner {
  holding = false;
  holder: string | null = null;
  private key: SingletonKey | null = null;
  private watchHandle: WatchHandle | null = null;
  private stopped = false;
  private evaluating: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly ctx: SingletonContext,
    private readonly handlers: SingletonHandlers,
  ) {}

  start(): void {
    void this.startWatch();
  }

  private async startWatch(): Promise<void> {
    while (!this.stopped && this.watchHandle === null) {
      try {
        const handle = await this.ctx.watch(
          { key: this.ctx.key },
          {
            onPut: (kv) => this.observed(keyOf(kv)),
            onDelete: () => this.observed(null),
            onResync: () => this.reread(),
          },
        );
        if (this.stopped) await handle.cancel();
        else this.watchHandle = handle;
      } catch (err) {
        this.ctx.backgroundError(err);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  leaseChanged(): void {
    this.evaluate();
  }

  async release(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.watchHandle?.cancel();
    await this.evaluating;
    const wasHolding = this.holding;
    this.holding = false;
    if (wasHolding) this.handlers.onLost();
    const { leaseId } = this.ctx.lease();
    if (leaseId !== null && this.key?.lease === leaseId) {
      await this.ctx
        .call("releasing a singleton", () =>
          this.ctx.client.if(this.ctx.key, "Lease", "==", leaseId).then(this.ctx.client.delete().key(this.ctx.key)).commit(),
        )
        .catch((err: HermesError) => this.ctx.backgroundError(err));
    }
  }

  private observed(key: SingletonKey | null): void {
    this.key = key;
    this.evaluate();
  }

  private reread(): void {
    this.ctx
      .call("reading a singleton", () => this.ctx.client.get(this.ctx.key).exec())
      .then((res) => this.observed(res.kvs[0] ? keyOf(res.kvs[0]) : null))
      .catch((err) => this.ctx.backgroundError(err));
  }

  /** Serialized: one evaluation at a time, and one more if anything changed meanwhile. */
  private evaluate(): void {
    if (this.evaluating) {
      this.again = true;
      return;
    }
    this.evaluating = this.evaluateOnce()
      .catch((err) => this.ctx.backgroundError(err))
      .finally(() => {
        this.evaluating = null;
        if (this.again && !this.stopped) {
          this.again = false;
          this.evaluate();
        }
      });
  }

  private async evaluateOnce(): Promise<void> {
    if (this.stopped) return;
    const lease = this.ctx.lease();
    const view = viewSingleton({ self: this.ctx.gatewayId, selfLease: lease.leaseId, leaseValid: lease.phase === "valid", key: this.key });
    this.transition(view.holding);
    this.holder = view.holder;
    if (!view.acquire || lease.leaseId === null) return;
    const leaseId = lease.leaseId;
    const res = await this.ctx.call("acquiring a singleton", () =>
      this.ctx.client
        .if(this.ctx.key, "Create", "==", 0)
        .then(this.ctx.client.put(this.ctx.key).value(encodeSingletonValue(this.ctx.gatewayId)).lease(leaseId))
        .else(this.ctx.client.get(this.ctx.key))
        .commit(),
    );
    // The watch reports the key too; taking the answer here saves a round trip.
    const kv = res.succeeded ? null : res.responses[0]?.response_range.kvs[0];
    this.key = res.succeeded ? { lease: leaseId, gatewayId: this.ctx.gatewayId } : kv ? keyOf(kv) : null;
    this.again = true;
  }

  private transition(holding: boolean): void {
    const change = singletonTransition(this.holding, holding);
    this.holding = holding;
    if (change === "acquired") this.handlers.onAcquired();
    if (change === "lost") this.handlers.onLost();
  }
}

function keyOf(kv: IKeyValue): SingletonKey {
  return { lease: String(kv.lease), gatewayId: parseSingletonValue(kv.value.toString("utf8")) };
}
