import { HermesError } from "@hermes/common/client";
import { handleWhen, type IBackoff, noop, retry } from "cockatiel";
import { Etcd3, EtcdLeaseInvalidError, isRecoverableError } from "etcd3";

/**
 * The etcd3 client as this package uses it: no circuit breaker inside the library (it would refuse
 * calls for seconds after etcd is back), and no retry of a call except once on each other endpoint
 * when one does not answer (the lease clock and the callers decide when to try again), a deadline
 * on every unary call, and quick watch reconnects. Every failure to get an answer becomes `coordinator_unavailable`.
 */

export interface ClientOptions {
  endpoints: string[];
  callTimeoutMs: number;
}

const ENDPOINT_RE = /^https?:\/\/[^/\s]+$/;

export function checkEndpoints(endpoints: readonly string[]): string[] {
  if (endpoints.length === 0)
    throw new HermesError("invalid_config", "no coordinator endpoints: give at least one etcd URL, e.g. http://127.0.0.1:2379");
  for (const endpoint of endpoints) {
    if (!ENDPOINT_RE.test(endpoint)) {
      throw new HermesError("invalid_config", `invalid etcd endpoint ${JSON.stringify(endpoint)}: http://host:port or https://host:port`, {
        data: { endpoint },
      });
    }
  }
  return [...endpoints];
}

export function createEtcdClient(options: ClientOptions): Etcd3 {
  const hosts = checkEndpoints(options.endpoints);
  return new Etcd3({
    hosts,
    dialTimeout: options.callTimeoutMs,
    faultHandling: {
      host: () => noop,
      global: hosts.length > 1 ? retry(handleWhen(isRecoverableError), { maxAttempts: hosts.length - 1 }) : noop,
      watchBackoff: watchBackoff(100, 2000),
    },
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + options.callTimeoutMs }),
  });
}

/** Watch reconnect delays: 100 ms doubling to 2 s (the library asks `next()` of it for each attempt). */
function watchBackoff(delayMs: number, maxMs: number): IBackoff<unknown> {
  return { duration: delayMs, next: () => watchBackoff(Math.min(delayMs * 2, maxMs), maxMs) };
}

/** etcd answered that a lease does not exist (expired or revoked). */
export function isLeaseGone(err: unknown): boolean {
  return err instanceof EtcdLeaseInvalidError;
}

/** Any failure to get an answer from etcd, as the typed, retryable refusal callers pass on. */
export function unavailable(err: unknown, what: string, endpoints: readonly string[]): HermesError {
  if (err instanceof HermesError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new HermesError("coordinator_unavailable", `the coordinator (etcd at ${endpoints.join(", ")}) did not answer ${what}: ${detail}`, {
    data: { endpoints: [...endpoints] },
    cause: err,
  });
}

/** Rejects with `onTimeout()` when `work` has not settled within `ms`. */
export async function withTimeout<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onTimeout()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
