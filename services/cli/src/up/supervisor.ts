import { Backoff, type BackoffOptions } from "@hermes/common";
import type { Child, ChildExit } from "./children.js";

/**
 * Keeps `hermes up`'s mesh running when one of its daemons exits on its own (a crash, a `kill`, a
 * SIGTERM someone sent to try an outage): the exit is reported in one line (which daemon, how it
 * ended, what happens next), the rest of the mesh goes on, and the daemon is started again with
 * the same ports after a back-off, or at once on request (the `r` key on a terminal).
 */

/** 5 s, 10 s, 20 s, 40 s, then every 60 s: long enough to watch the outage, short enough to forget it. */
export const RESTART_BACKOFF: Partial<BackoffOptions> = { initialMs: 5_000, multiplier: 2, maxMs: 60_000, jitter: 0 };
/** A daemon that ran this long before it exited starts over with the shortest delay. */
const STABLE_MS = 60_000;

export function describeExit(exit: ChildExit): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

export interface SupervisorOptions {
  /** Starts the named daemon again (same ports) and resolves once it is ready. */
  restart(name: string): Promise<Child>;
  /** Prints one line. */
  say(line: string): void;
  /** A restarted daemon is ready (the caller records its pid). */
  restarted?(child: Child): void;
  /** How to restart at once, when there is a way (e.g. "press r to restart it now"). */
  restartHint?: string | undefined;
  backoff?: Partial<BackoffOptions>;
}

export class Supervisor {
  private closed = false;
  private readonly backoffs = new Map<string, Backoff>();
  /** Daemons that are down, with their pending restart. */
  private readonly down = new Map<string, { timer: NodeJS.Timeout; now: () => void }>();

  constructor(private readonly options: SupervisorOptions) {}

  /** From now on, `child` exiting is reported and followed by a restart. */
  watch(child: Child): void {
    const since = Date.now();
    void child.exited.then((exit) => {
      if (this.closed) return;
      const name = child.spec.name;
      const backoff = this.backoff(name);
      if (Date.now() - since >= STABLE_MS) backoff.reset();
      const delay = backoff.nextDelayMs();
      this.options.say(
        `hermes up: ${name} (pid ${child.pid}) ${describeExit(exit)}; the rest of the mesh keeps running; ${this.next(name, delay)} (log: ${child.spec.logFile})`,
      );
      this.schedule(name, delay);
    });
  }

  /** Restarts every daemon that is down now, without waiting for its back-off. */
  restartNow(): void {
    for (const pending of [...this.down.values()]) pending.now();
  }

  /** The mesh is stopping: no more restarts. */
  close(): void {
    this.closed = true;
    for (const pending of this.down.values()) clearTimeout(pending.timer);
    this.down.clear();
  }

  private backoff(name: string): Backoff {
    let backoff = this.backoffs.get(name);
    if (!backoff) {
      backoff = new Backoff({ ...RESTART_BACKOFF, ...this.options.backoff });
      this.backoffs.set(name, backoff);
    }
    return backoff;
  }

  private next(name: string, delayMs: number): string {
    const hint = this.options.restartHint ? `, or ${this.options.restartHint}` : "";
    return `restarting ${name} in ${Math.round(delayMs / 1000)} s${hint}`;
  }

  private schedule(name: string, delayMs: number): void {
    const run = () => {
      this.down.delete(name);
      void this.attempt(name);
    };
    const timer = setTimeout(run, delayMs);
    this.down.set(name, {
      timer,
      now: () => {
        clearTimeout(timer);
        run();
      },
    });
  }

  private async attempt(name: string): Promise<void> {
    if (this.closed) return;
    let child: Child;
    try {
      child = await this.options.restart(name);
    } catch (err) {
      if (this.closed) return;
      const delay = this.backoff(name).nextDelayMs();
      // The first line says what happened (the child's last output follows it in the message).
      const why = (err instanceof Error ? err.message : String(err)).split("\n")[0]!.replace(/:$/, "");
      this.options.say(`hermes up: ${name} did not start again: ${why}; ${this.next(name, delay)}`);
      this.schedule(name, delay);
      return;
    }
    if (this.closed) return; // the mesh is stopping: it stops this one too
    this.options.say(`hermes up: ${name} is back (pid ${child.pid})`);
    this.options.restarted?.(child);
    this.watch(child);
  }
}
