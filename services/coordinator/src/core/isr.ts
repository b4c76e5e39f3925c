import { HermesError } from "@hermes/common/pure";

/**
 * In-sync replicas. A replica is in sync while it lags the authority's log end by at most
 * `max_lag.events` events AND the oldest event it lacks is at most `max_lag.ms` old; a replica not
 * heard from since the authority began tracking (a fresh authority, after a failover) gets
 * `max_lag.ms` to report before it counts as out of sync. Measuring time lag by the age of the
 * oldest missing event, not by "when was it last exactly at the end", keeps a replica that follows a
 * steady stream a few events behind in sync.
 */

export interface MaxLag {
  events: number;
  ms: number;
}

export const DEFAULT_MAX_LAG: MaxLag = { events: 1000, ms: 10_000 };

export function maxLag(events: number, ms: number): MaxLag {
  if (!Number.isSafeInteger(events) || events < 0 || !Number.isSafeInteger(ms) || ms < 0) {
    throw new HermesError("invalid_config", `invalid max_lag ${events} events / ${ms} ms: two whole numbers ≥ 0`, { data: { events, ms } });
  }
  return { events, ms };
}

export interface ReplicaLag {
  /** Events behind the log end; null when the replica has not reported since tracking began. */
  events: number | null;
  /** For how long it has lacked the oldest event it lacks (or, when silent, since tracking began); 0 when it lacks none. */
  lackingForMs: number;
}

export function replicaInSync(lag: ReplicaLag, limit: MaxLag): boolean {
  if (lag.events !== null && lag.events <= 0) return true;
  if (lag.events !== null && lag.events > limit.events) return false;
  return lag.lackingForMs <= limit.ms;
}

export interface IsrPlanInput {
  authority: string;
  /** The room's configured replicas (the authority excluded). */
  replicas: readonly string[];
  /** The ISR as the authority record has it (authority first). */
  recorded: readonly string[];
  /** Configured replicas that are in sync now. */
  inSync: ReadonlySet<string>;
  /** Durable seq each replica reported in this epoch. */
  durable: ReadonlyMap<string, number>;
  /** Highest acknowledged seq. */
  committed: number;
}

export type IsrPlan = { kind: "keep" } | { kind: "change"; isr: string[]; added: string[]; removed: string[] };

/**
 * The ISR the authority should record next. A member stays while in sync; a replica joins only when
 * it is in sync AND holds every acknowledged event (durable ≥ committed), because any ISR member may
 * become the authority after a failover. The authority is always first; the others are sorted so one
 * set has one spelling. The caller writes a change to the record (compare-and-swap) and only then
 * lets acks depend on it; until then acks wait for recorded and planned members alike.
 */
export function planIsr(input: IsrPlanInput): IsrPlan {
  const recorded = new Set(input.recorded);
  const members = input.replicas
    .filter((r) => r !== input.authority)
    .filter((r) => input.inSync.has(r) && (recorded.has(r) || (input.durable.get(r) ?? -1) >= input.committed))
    .sort();
  const isr = [input.authority, ...new Set(members)];
  const next = new Set(isr);
  const added = isr.filter((g) => !recorded.has(g));
  const removed = input.recorded.filter((g) => !next.has(g));
  if (added.length === 0 && removed.length === 0) return { kind: "keep" };
  return { kind: "change", isr, added, removed };
}
