import type { Clock } from "./pure/clock.js";

/** What a failed start runs to undo what it had set up (in reverse order), so nothing stays open. */
export type Cleanup = (() => void)[];

/**
 * Runs a daemon's start phases; when one throws, what the earlier ones pushed onto `cleanup` is
 * undone, newest first, and the error is rethrown.
 */
export async function startInPhases<T>(phases: (cleanup: Cleanup) => Promise<T>): Promise<T> {
  const cleanup: Cleanup = [];
  try {
    return await phases(cleanup);
  } catch (err) {
    for (const undo of cleanup.reverse()) undo();
    throw err;
  }
}

/**
 * What a running daemon knows about itself: when it started, where it listens (known once its
 * servers are bound), whether it is ready. Status calls and `/readyz` read it; the start sequence
 * fills it in, the stop sequence clears `ready` first.
 */
export class DaemonState {
  readonly startedAt: number;
  ready = false;
  /** Set once the gRPC and HTTP ports listen. */
  listening: { grpc: string; http: string } | undefined;

  constructor(protected readonly clock: Clock) {
    this.startedAt = clock.now();
  }

  get grpcAddress(): string {
    return this.listening?.grpc ?? "";
  }

  get httpAddress(): string {
    return this.listening?.http ?? "";
  }

  get uptimeSeconds(): number {
    return (this.clock.now() - this.startedAt) / 1000;
  }
}
