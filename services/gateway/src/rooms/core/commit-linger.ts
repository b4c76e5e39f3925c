/**
 * When a group commit waits a little before it flushes ("lingers"), so that appends arriving one
 * by one at a steady rate share one fsynced commit instead of paying one each.
 *
 * A group commit flushes at the end of the event loop's turn: under a pipelined load that batch is
 * large, but appends that arrive one per message a millisecond apart (a live chat at 1,000 events
 * per second) each get a commit of their own, and a one-event commit costs about as much CPU as
 * hundreds of batched appends (the fsync, the transaction, the tail page to every replica). So at
 * the end of a turn whose batch is small, the flush waits up to `maxMs` for more, but only while
 * that pays off:
 *
 * - appends are arriving closer together than `maxMs` (mean gap; a room written a few times a
 *   second never waits);
 * - the batch is below `enoughAppends` (a larger one already shares its commit well);
 * - recent waits gained appends: the mean number that arrived during a wait, beyond what the turn
 *   had already collected, is at least `MIN_GAIN`. A client that sends its next append only after
 *   the last one's acknowledgement (a closed loop) gains nothing from a wait and would only be
 *   slowed by it, so after a wait that gained nothing, the next one is tried only after
 *   `probeEveryMs`.
 *
 * Pure: times are milliseconds of a monotonic clock, passed in.
 */
export interface LingerPolicy {
  /** The longest a flush waits for more appends; 0 never waits. */
  maxMs: number;
  /** A batch of this many appends is flushed at once. */
  enoughAppends: number;
  /** While waits gain nothing, a wait is tried again at most this often. */
  probeEveryMs: number;
}

export const DEFAULT_LINGER: LingerPolicy = { maxMs: 4, enoughAppends: 64, probeEveryMs: 250 };

/** Mean appends a wait must gain to keep waiting (and where the mean starts, so the first wait is tried). */
export const MIN_GAIN = 0.5;

/** Gaps longer than this count as this long: after an idle hour the mean is back under `maxMs` within a few dozen arrivals. */
const MAX_COUNTED_GAP_MS = 100;

export class CommitLinger {
  private meanGapMs = Number.POSITIVE_INFINITY;
  private lastArrivalMs = Number.NaN;
  private meanGain = MIN_GAIN;
  private lastWaitMs = Number.NEGATIVE_INFINITY;

  constructor(readonly policy: LingerPolicy) {}

  /** An append was submitted. */
  arrived(nowMs: number): void {
    const gap = nowMs - this.lastArrivalMs;
    this.lastArrivalMs = nowMs;
    if (!(gap >= 0)) return;
    const counted = Math.min(gap, MAX_COUNTED_GAP_MS);
    this.meanGapMs = Number.isFinite(this.meanGapMs) ? this.meanGapMs + (counted - this.meanGapMs) / 8 : counted;
  }

  /** At the end of a turn with `queued` appends waiting: how long the flush waits for more (0: flush now). */
  waitMs(queued: number, nowMs: number): number {
    const { maxMs, enoughAppends, probeEveryMs } = this.policy;
    if (!(maxMs > 0) || queued >= enoughAppends || !(this.meanGapMs < maxMs)) return 0;
    if (this.meanGain < MIN_GAIN && nowMs - this.lastWaitMs < probeEveryMs) return 0;
    this.lastWaitMs = nowMs;
    return maxMs;
  }

  /** A wait ended with `gained` more appends than its turn had collected. */
  waited(gained: number): void {
    this.meanGain += (Math.max(0, gained) - this.meanGain) / 4;
  }

  /** The means the decisions are made on (the tests read them). */
  get means(): { gapMs: number; gain: number } {
    return { gapMs: this.meanGapMs, gain: this.meanGain };
  }
}
