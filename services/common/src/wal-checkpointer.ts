import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import {
  CHECKPOINT_BYTES,
  type CheckpointPace,
  checkpointPace,
  framesWrittenSince,
  nextCheckpointDelay,
  pagesOf,
} from "./pure/checkpoint-pace.js";
import type { Db } from "./sqlite.js";

/**
 * With a checkpointer the writer's own checkpoint is only the backstop: it runs when the WAL has
 * grown past this many bytes anyway (the checkpointer stopped, or sustained writes never left it a
 * moment to finish; 4,096 pages of 4 KiB). It then copies only what the checkpointer has not.
 */
const BACKSTOP_CHECKPOINT_BYTES = 4096 * 4096;

/** What one checkpoint of the worker did: PRAGMA wal_checkpoint's answer and how long it took. */
export interface CheckpointReport {
  /** Frames in the WAL. */
  log: number;
  /** Of them, copied into the database file (when that is all of them, the next write starts the WAL over). */
  checkpointed: number;
  seconds: number;
}

export interface WalCheckpointerOptions {
  /** How often the worker checkpoints, by the write rate (tests make it fast). */
  pace?: CheckpointPace;
  onCheckpoint?: (report: CheckpointReport) => void;
  /** The worker failed to checkpoint, or stopped: the writer checkpoints for itself again. */
  onFailure?: (message: string) => void;
}

type WorkerMessage = ({ kind: "checkpointed" } & CheckpointReport) | { kind: "failed"; message: string };

/**
 * Checkpoints a WAL database from a worker thread, so that the writer's commits stop paying for
 * them. By default the commit that takes the WAL past 1,000 pages copies them all into the
 * database file and fsyncs it, on the writer's thread: for a gateway, its event loop. The worker
 * holds its own connection and, once the writer committed, runs a PASSIVE checkpoint (it never
 * waits for, or blocks, a reader or the writer) at about SQLite's own pace in bytes, whatever the
 * write rate (checkpointPace); the writer's own checkpoint stays as a backstop at
 * BACKSTOP_CHECKPOINT_BYTES.
 *
 * Durability does not change: a commit is as durable as its synchronous setting makes it before
 * any checkpoint runs, and a checkpoint fsyncs the WAL before it copies frames and the database
 * before it records them as copied, whichever connection runs it. A kill -9 in the middle leaves
 * a WAL that SQLite replays at the next open.
 */
export class WalCheckpointer {
  private readonly worker: Worker;
  private stopping = false;
  private readonly exited: Promise<void>;
  /** The file's page size: `wal_autocheckpoint` counts pages, the sizes here are bytes. */
  private readonly pageSize: number;

  constructor(
    private readonly db: Db,
    private readonly options: WalCheckpointerOptions = {},
  ) {
    const require = createRequire(import.meta.url);
    this.pageSize = db.pragma("page_size", { simple: true }) as number;
    const data: WorkerData = {
      sqlite: require.resolve("better-sqlite3"),
      path: db.name,
      pace: options.pace ?? checkpointPace(this.pageSize),
    };
    // The worker's body is the function below, sent as source in a data: URL: the worker then needs
    // no file of its own (it runs the same from the built package and from the sources the tests
    // import), and a data: URL is always an ES module (an eval'd worker follows the parent's
    // --input-type).
    const source = [
      'import { createRequire } from "node:module";',
      'import { workerData } from "node:worker_threads";',
      `(${checkpointWorker})(createRequire(workerData.sqlite), workerData, ${nextCheckpointDelay}, ${framesWrittenSince});`,
    ].join("\n");
    this.worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`), { workerData: data });
    this.worker.on("message", (message: WorkerMessage) => {
      if (message.kind === "checkpointed") this.options.onCheckpoint?.(message);
      else this.options.onFailure?.(message.message);
    });
    this.worker.on("error", (err) => this.options.onFailure?.(err.message));
    this.exited = new Promise((resolve) => {
      this.worker.once("exit", () => {
        this.writerCheckpoints();
        if (!this.stopping) this.options.onFailure?.("the checkpoint worker stopped; commits checkpoint for themselves again");
        resolve();
      });
    });
    // After the listeners: adding a "message" listener holds the process again.
    this.worker.unref();
    db.pragma(`wal_autocheckpoint = ${pagesOf(BACKSTOP_CHECKPOINT_BYTES, this.pageSize)}`);
  }

  /** Ends the worker (its connection closed) and gives checkpoints back to the writer; call it before the writer closes. */
  stop(): Promise<void> {
    this.stopping = true;
    // Held from here on: unreferenced, a process with nothing else to do would exit before it has.
    this.worker.ref();
    this.worker.postMessage("stop");
    return this.exited;
  }

  private writerCheckpoints(): void {
    if (this.db.open) this.db.pragma(`wal_autocheckpoint = ${pagesOf(CHECKPOINT_BYTES, this.pageSize)}`);
  }
}

interface WorkerData {
  /** better-sqlite3, resolved by the parent (a data: URL has no folder to resolve from). */
  sqlite: string;
  path: string;
  pace: CheckpointPace;
}

/**
 * The worker (self-contained: it is sent as source, with the pace's two pure functions). At each
 * tick it asks SQLite whether another connection committed since it last looked (`PRAGMA
 * data_version`: a read of the shared WAL index, exact where a stat of the -wal file is not: a
 * file's mtime is coarser than a millisecond, and a WAL that started over keeps its size) and, if
 * so or if its last checkpoint could not copy everything, runs a PASSIVE checkpoint. The next tick
 * comes when, at the rate the writer wrote since the last one, about `pace.targetFrames` frames
 * will be waiting. It reports each checkpoint that found frames, and the first of a run of
 * failures (it keeps trying, once a second: a full disk may clear).
 */
function checkpointWorker(
  require: NodeJS.Require,
  data: WorkerData,
  nextDelay: typeof nextCheckpointDelay,
  framesSince: typeof framesWrittenSince,
): void {
  const { parentPort } = require("node:worker_threads") as typeof import("node:worker_threads");
  const Database = require(data.sqlite) as typeof import("better-sqlite3");
  const db = new Database(data.path, { fileMustExist: true });
  // It only reads and checkpoints; FULL: the checkpoint fsyncs the WAL and the database file.
  db.pragma("synchronous = FULL");
  let seenVersion = -1;
  let behind = false;
  let failing = false;
  // The WAL's frames at the last checkpoint, and since when the writer has been writing.
  let lastLog = 0;
  let since = performance.now();
  /** Checkpoints if there is anything to copy; the delay until the next tick. */
  const checkpoint = (): number => {
    const started = performance.now();
    try {
      const version = db.pragma("data_version", { simple: true }) as number;
      if (version === seenVersion && !behind && !failing) {
        // Idle: the rate is measured from the next commit on.
        since = started;
        return data.pace.maxMs;
      }
      seenVersion = version;
      const [result] = db.pragma("wal_checkpoint(PASSIVE)") as { busy: number; log: number; checkpointed: number }[];
      failing = false;
      if (result === undefined) return data.pace.maxMs;
      const written = framesSince(lastLog, result.log);
      lastLog = result.log;
      // Frames left: a reader's snapshot held them back, or the writer committed meanwhile.
      behind = result.checkpointed < result.log;
      if (result.log > 0) {
        const seconds = (performance.now() - started) / 1000;
        parentPort?.postMessage({ kind: "checkpointed", log: result.log, checkpointed: result.checkpointed, seconds });
      }
      const delay = nextDelay(written, started - since, data.pace);
      since = started;
      return delay;
    } catch (err) {
      // Reported once, until a checkpoint works again (a full disk fails every tick).
      if (!failing) parentPort?.postMessage({ kind: "failed", message: err instanceof Error ? err.message : String(err) });
      failing = true;
      return 1000;
    }
  };
  let timer: NodeJS.Timeout;
  const tick = (): void => {
    timer = setTimeout(tick, checkpoint());
  };
  timer = setTimeout(tick, data.pace.minMs);
  parentPort?.on("message", (message) => {
    if (message !== "stop") return;
    clearTimeout(timer);
    db.close();
    parentPort.close();
  });
}
