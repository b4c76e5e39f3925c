/**
 * How often a WAL checkpointer checkpoints: often enough that the WAL stays small while a writer
 * writes fast (a replica's catch-up), rarely enough that pages written again and again (a busy
 * table's few hot pages) are not copied and fsynced into the database file again at every tick.
 * The aim is SQLite's own pace, about `targetFrames` per checkpoint, at any write rate.
 */
export interface CheckpointPace {
  /** Frames one checkpoint should find (SQLite's auto-checkpoint default is 1,000). */
  targetFrames: number;
  minMs: number;
  /** Also the delay while nothing is written. */
  maxMs: number;
}

export const CHECKPOINT_PACE: CheckpointPace = { targetFrames: 1000, minMs: 10, maxMs: 500 };

/**
 * The delay until the next checkpoint, from what the writer wrote since the last one: at that
 * rate, the time `targetFrames` take, within [minMs, maxMs].
 *
 * Self-contained (no import, no constant from outside): the checkpointer's worker runs it from
 * its source.
 */
export function nextCheckpointDelay(framesWritten: number, elapsedMs: number, pace: CheckpointPace): number {
  if (!(framesWritten > 0) || !(elapsedMs > 0)) return pace.maxMs;
  const ms = (pace.targetFrames * elapsedMs) / framesWritten;
  return Math.min(pace.maxMs, Math.max(pace.minMs, Math.round(ms)));
}

/**
 * Frames written between two checkpoints, from the WAL's frame counts they reported: a WAL that
 * started over since (fewer frames than before) holds only new ones.
 */
export function framesWrittenSince(previousLog: number, log: number): number {
  return log >= previousLog ? log - previousLog : log;
}
