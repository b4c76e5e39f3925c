/**
 * How often a WAL checkpointer checkpoints: often enough that the WAL stays small while a writer
 * writes fast (a replica's catch-up), rarely enough that pages written again and again (a busy
 * table's few hot pages) are not copied and fsynced into the database file again at every tick.
 * The aim is SQLite's own pace in bytes, about `targetFrames` per checkpoint, at any write rate.
 */
export interface CheckpointPace {
  /** Frames one checkpoint should find. */
  targetFrames: number;
  minMs: number;
  /** Also the delay while nothing is written. */
  maxMs: number;
}

/**
 * SQLite's own auto-checkpoint comes every 1,000 pages, ~4 MB at its default 4 KiB page. A file with
 * larger pages is checkpointed at the same number of bytes, not of pages: how large the WAL grows,
 * and how much one checkpoint copies, stay what they are for a default file.
 */
export const CHECKPOINT_BYTES = 1000 * 4096;

/** The pace for a database of `pageSize`-byte pages: ~CHECKPOINT_BYTES per checkpoint, 10–500 ms apart. */
export function checkpointPace(pageSize: number): CheckpointPace {
  return { targetFrames: pagesOf(CHECKPOINT_BYTES, pageSize), minMs: 10, maxMs: 500 };
}

/** How many pages of `pageSize` bytes make about `bytes` (at least one). */
export function pagesOf(bytes: number, pageSize: number): number {
  return Math.max(1, Math.round(bytes / pageSize));
}

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
