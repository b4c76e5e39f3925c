import { type BackoffOptions, backoffDelayMs } from "@hermes/common/pure";
import type { ApiFailure, ApiFailureKind } from "./api-failure.js";
import { updateIdOf } from "./intake.js";

/**
 * The long-polling loop of one bot token as a pure state machine: events in (call results,
 * timers, the singleton, stop), effects out (calls to make, updates to hand over, waits, log
 * lines). The shell performs the effects and feeds their outcomes back; every call and timer
 * carries an operation number, so an outcome that arrives after it was cancelled is ignored.
 *
 * Offsets: `offset` is the update_id after the last update handled durably. The shell's `handle`
 * effect must make that update's intake and `next_offset` durable together before it reports
 * `handled`; the next getUpdates then sends `offset`, which tells Telegram to forget everything
 * below it. A restart starts from the stored offset, so an update is never handed over twice
 * (Telegram re-sends only what is at or above the offset asked for) and never skipped (the offset
 * moves only past updates that were handled).
 */

export type PollerStatus = "stopped" | "starting" | "standby" | "polling" | "backoff" | "conflict";

export interface PollerSettings {
  poll_timeout_seconds: number;
  /** The variable the token came from (platforms.telegram.token_env), named when Telegram refuses the token. */
  token_env: string;
  /** A coordinator decides which gateway polls: poll only while holding the bot's singleton. */
  coordinated: boolean;
  /** After 5xx, network errors and answers that are not the Bot API's. */
  backoff: BackoffOptions;
  /** After 409 Conflict (another process polls the token). */
  conflict_backoff: BackoffOptions;
  /** After 401/404: the token or api_root is wrong, and retrying fast cannot help. */
  unauthorized_delay_ms: number;
  /** An update whose handling failed this many times is skipped (logged), so one bad update cannot stall the bot. */
  max_handle_attempts: number;
  /** An empty answer that came back faster than this means the server does not hold long polls: pause this long. */
  min_poll_interval_ms: number;
}

export const DEFAULT_POLLER_SETTINGS: PollerSettings = {
  poll_timeout_seconds: 30,
  token_env: "TELEGRAM_BOT_TOKEN",
  coordinated: false,
  backoff: { initialMs: 1000, maxMs: 60_000, multiplier: 2, jitter: 0.2 },
  conflict_backoff: { initialMs: 5000, maxMs: 120_000, multiplier: 2, jitter: 0.2 },
  unauthorized_delay_ms: 300_000,
  max_handle_attempts: 5,
  min_poll_interval_ms: 1000,
};

export type PollerActivity = "idle" | "prepare" | "poll" | "handle" | "wait" | "confirm";

export interface QueuedUpdate {
  update_id: number;
  raw: unknown;
}

export interface PollerError {
  kind: ApiFailureKind | "handler";
  message: string;
}

export interface PollerState {
  status: PollerStatus;
  activity: PollerActivity;
  /** Number of the call or timer in flight; outcomes of other numbers are stale. */
  op: number;
  started: boolean;
  stopping: boolean;
  /** getMe, deleteWebhook and setMyCommands went through (again after a 401). */
  prepared: boolean;
  holds_singleton: boolean;
  /** The next update_id to ask for (undefined until one is known: Telegram then starts at the oldest it has). */
  offset: number | undefined;
  /** The offset the last getUpdates sent, i.e. what Telegram has been told to forget below. */
  confirmed: number | undefined;
  /** Updates of the current batch not yet handled, in update_id order. */
  queue: QueuedUpdate[];
  /** Consecutive failures, the exponent of the back-off. */
  failures: number;
  /** Failed attempts at the update at the head of the queue. */
  handle_attempts: number;
  /** The 409 warning is logged once per conflict, not once per retry. */
  conflict_reported: boolean;
  last_error: PollerError | undefined;
  /** The last wait scheduled, for status and tests. */
  scheduled_delay_ms: number | undefined;
}

export type PollerEvent =
  | { type: "start"; offset: number | undefined }
  | { type: "singleton"; held: boolean }
  | { type: "prepared"; op: number }
  | { type: "polled"; op: number; updates: readonly unknown[]; elapsed_ms: number }
  | { type: "call_failed"; op: number; failure: ApiFailure }
  | { type: "handled"; op: number }
  | { type: "handle_failed"; op: number; message: string }
  | { type: "timer"; op: number }
  | { type: "confirmed"; op: number }
  | { type: "stop" };

export type PollerEffect =
  /** getMe, deleteWebhook, setMyCommands; answer `prepared` or `call_failed`. */
  | { type: "prepare"; op: number }
  /** getUpdates; answer `polled` or `call_failed`. */
  | { type: "poll"; op: number; offset: number | undefined; timeout_seconds: number }
  /**
   * Hand one update over, making its intake and `next_offset` durable together; with `skip`, only
   * store `next_offset`. Answer `handled` or `handle_failed`.
   */
  | { type: "handle"; op: number; update_id: number; update: unknown; next_offset: number; skip: boolean }
  /** Answer `timer` after `ms`. */
  | { type: "wait"; op: number; ms: number }
  /** Abort the call or timer in flight; its outcome will be stale. */
  | { type: "cancel" }
  /** getUpdates with `offset`, limit 1, timeout 0: tells Telegram what was handled before stopping. Answer `confirmed`. */
  | { type: "confirm"; op: number; offset: number }
  | { type: "log"; level: "info" | "warn" | "error"; message: string };

export const CONFLICT_MESSAGE = "another process polls this bot token";

export function initialPollerState(): PollerState {
  return {
    status: "stopped",
    activity: "idle",
    op: 0,
    started: false,
    stopping: false,
    prepared: false,
    holds_singleton: false,
    offset: undefined,
    confirmed: undefined,
    queue: [],
    failures: 0,
    handle_attempts: 0,
    conflict_reported: false,
    last_error: undefined,
    scheduled_delay_ms: undefined,
  };
}

export interface PollerStep {
  state: PollerState;
  effects: PollerEffect[];
}

/** Advances the machine by one event. `random` feeds the back-off jitter. */
export function stepPoller(state: PollerState, event: PollerEvent, settings: PollerSettings, random: () => number): PollerStep {
  return new Step({ ...state, queue: [...state.queue] }, settings, random).on(event);
}

class Step {
  private readonly effects: PollerEffect[] = [];

  constructor(
    private readonly s: PollerState,
    private readonly settings: PollerSettings,
    private readonly random: () => number,
  ) {}

  on(event: PollerEvent): PollerStep {
    const s = this.s;
    switch (event.type) {
      case "start":
        if (s.started) break;
        s.started = true;
        s.offset = event.offset;
        s.confirmed = event.offset;
        s.status = "starting";
        this.proceed();
        break;
      case "singleton":
        this.singleton(event.held);
        break;
      case "prepared":
        if (!this.current(event.op, "prepare")) break;
        s.prepared = true;
        s.activity = "idle";
        this.succeeded();
        this.proceed();
        break;
      case "polled":
        if (this.current(event.op, "poll")) this.polled(event.updates, event.elapsed_ms);
        break;
      case "call_failed":
        if (this.current(event.op, "prepare") || this.current(event.op, "poll")) this.failed(event.failure);
        break;
      case "handled": {
        if (!this.current(event.op, "handle")) break;
        const done = s.queue.shift()!;
        s.offset = done.update_id + 1;
        s.handle_attempts = 0;
        s.activity = "idle";
        this.proceed();
        break;
      }
      case "handle_failed":
        if (this.current(event.op, "handle")) this.handleFailed(event.message);
        break;
      case "timer":
        if (!this.current(event.op, "wait")) break;
        s.activity = "idle";
        this.proceed();
        break;
      case "confirmed":
        if (!this.current(event.op, "confirm")) break;
        s.confirmed = s.offset;
        s.activity = "idle";
        this.proceed();
        break;
      case "stop":
        if (!s.started) break;
        if (s.stopping) break;
        s.stopping = true;
        this.interrupt();
        this.proceed();
        break;
    }
    return { state: s, effects: this.effects };
  }

  private current(op: number, activity: PollerActivity): boolean {
    return this.s.op === op && this.s.activity === activity;
  }

  /** Ends a call or timer in flight; a running handle is never interrupted (its commit must land). */
  private interrupt(): void {
    const s = this.s;
    if (s.activity === "poll" || s.activity === "prepare" || s.activity === "wait") {
      this.effects.push({ type: "cancel" });
      s.op += 1;
      s.activity = "idle";
    }
  }

  private get mayPoll(): boolean {
    return !this.settings.coordinated || this.s.holds_singleton;
  }

  /** The next step when nothing is in flight: finish a stop, stand by, handle, prepare or poll. */
  private proceed(): void {
    const s = this.s;
    if (s.activity !== "idle") return;
    if (s.stopping) this.finish();
    else if (!this.mayPoll) this.standby();
    else if (s.queue.length > 0) this.handleNext();
    else if (!s.prepared) this.prepare();
    else this.poll();
  }

  private prepare(): void {
    const s = this.s;
    if (s.status === "standby") s.status = "starting";
    s.op += 1;
    s.activity = "prepare";
    this.effects.push({ type: "prepare", op: s.op });
  }

  private poll(): void {
    const s = this.s;
    s.op += 1;
    s.activity = "poll";
    // After a back-off the retry is a long poll that may hold for its whole timeout: it is polling
    // (the failure stays in last_error until a poll succeeds). A conflict stays visible until a
    // poll succeeds: two pollers of one token take turns, and the one whose turn it is must not
    // look healthy.
    if (s.status !== "conflict") s.status = "polling";
    s.confirmed = s.offset;
    this.effects.push({ type: "poll", op: s.op, offset: s.offset, timeout_seconds: this.settings.poll_timeout_seconds });
  }

  private handleNext(): void {
    const s = this.s;
    const next = s.queue[0]!;
    const skip = s.handle_attempts >= this.settings.max_handle_attempts;
    if (skip) {
      this.log("error", `update ${next.update_id} could not be handled in ${s.handle_attempts} attempts; skipping it`);
    }
    s.op += 1;
    s.activity = "handle";
    this.effects.push({ type: "handle", op: s.op, update_id: next.update_id, update: next.raw, next_offset: next.update_id + 1, skip });
  }

  private wait(ms: number): void {
    const s = this.s;
    s.op += 1;
    s.activity = "wait";
    s.scheduled_delay_ms = ms;
    this.effects.push({ type: "wait", op: s.op, ms });
  }

  private standby(): void {
    const s = this.s;
    // The rest of a batch is not ours to handle any more; Telegram keeps it for the holder.
    s.queue = [];
    s.handle_attempts = 0;
    if (s.status !== "standby") this.log("info", "standby: another gateway of the mesh holds this bot's poller");
    s.status = "standby";
  }

  private finish(): void {
    const s = this.s;
    s.queue = [];
    if (s.offset !== undefined && s.offset !== s.confirmed && this.mayPoll) {
      s.op += 1;
      s.activity = "confirm";
      this.effects.push({ type: "confirm", op: s.op, offset: s.offset });
      return;
    }
    s.status = "stopped";
  }

  private singleton(held: boolean): void {
    const s = this.s;
    if (s.holds_singleton === held) return;
    s.holds_singleton = held;
    if (!s.started || s.stopping || !this.settings.coordinated) return;
    if (held) {
      this.log("info", "this gateway now holds the bot's poller");
      this.proceed();
      return;
    }
    // Lost: stop asking at once. No confirming call: the new holder may already be polling.
    this.interrupt();
    this.proceed();
  }

  private succeeded(): void {
    const s = this.s;
    s.failures = 0;
    s.conflict_reported = false;
    s.last_error = undefined;
    s.scheduled_delay_ms = undefined;
    s.status = "polling";
  }

  private backoffMs(options: BackoffOptions): number {
    return backoffDelayMs(this.s.failures, { ...options, random: this.random });
  }

  private failed(failure: ApiFailure): void {
    const s = this.s;
    s.activity = "idle";
    s.last_error = { kind: failure.kind, message: failure.message };
    let ms: number;
    switch (failure.kind) {
      case "rate_limited":
        ms = failure.retry_after_seconds !== undefined ? failure.retry_after_seconds * 1000 : this.backoffMs(this.settings.backoff);
        s.status = "backoff";
        this.log("warn", `Telegram is rate limiting this bot (429); next call in ${Math.ceil(ms / 1000)} s`);
        break;
      case "conflict":
        ms = this.backoffMs(this.settings.conflict_backoff);
        s.status = "conflict";
        if (!s.conflict_reported) {
          this.log("warn", `${CONFLICT_MESSAGE} (409 Conflict from getUpdates); this gateway backs off and retries`);
          s.conflict_reported = true;
        }
        break;
      case "unauthorized":
        ms = this.settings.unauthorized_delay_ms;
        s.status = "backoff";
        s.prepared = false;
        // What the operator reads in `platforms status` too: which variable and which setting to check.
        s.last_error = {
          kind: failure.kind,
          message: `Telegram refused the bot token (${failure.message}): check ${this.settings.token_env} (platforms.telegram.token_env) and platforms.telegram.api_root`,
        };
        this.log("error", `${s.last_error.message}; next try in ${Math.ceil(ms / 1000)} s`);
        break;
      default:
        ms = this.backoffMs(this.settings.backoff);
        s.status = "backoff";
        this.log("warn", `Telegram call failed (${failure.kind}: ${failure.message}); retrying in ${Math.ceil(ms / 1000)} s`);
    }
    s.failures += 1;
    this.wait(ms);
  }

  private polled(raw: readonly unknown[], elapsedMs: number): void {
    const s = this.s;
    s.activity = "idle";
    this.succeeded();
    const byId = new Map<number, unknown>();
    let unusable = 0;
    for (const update of raw) {
      const id = updateIdOf(update);
      if (id === undefined || (s.offset !== undefined && id < s.offset)) unusable += 1;
      else if (!byId.has(id)) byId.set(id, update);
    }
    s.queue = [...byId.entries()].sort(([a], [b]) => a - b).map(([update_id, update]) => ({ update_id, raw: update }));
    if (unusable > 0) this.log("warn", `${unusable} update(s) without a usable update_id or below the offset were ignored`);
    if (s.queue.length > 0) this.handleNext();
    // Nothing to move the offset past: asking again at once would get the same answer.
    else if (raw.length > 0) this.failed({ kind: "protocol", message: "getUpdates answered only updates that cannot be used" });
    else if (elapsedMs < this.settings.min_poll_interval_ms) this.wait(this.settings.min_poll_interval_ms);
    else this.proceed();
  }

  private handleFailed(message: string): void {
    const s = this.s;
    s.activity = "idle";
    s.handle_attempts += 1;
    s.last_error = { kind: "handler", message };
    const head = s.queue[0]!;
    this.log("error", `handling update ${head.update_id} failed (attempt ${s.handle_attempts}): ${message}`);
    if (s.stopping) {
      this.finish();
      return;
    }
    const ms = this.backoffMs(this.settings.backoff);
    s.failures += 1;
    s.status = "backoff";
    this.wait(ms);
  }

  private log(level: "info" | "warn" | "error", message: string): void {
    this.effects.push({ type: "log", level, message });
  }
}
