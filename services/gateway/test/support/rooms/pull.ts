/**
 * The pull loop over simulated gateways: the production PullPlanner (../pull-planner.ts) decides,
 * this shell does what it says against a SimGateway source and replica, the way
 * rooms/app/replicator.ts does against a real RoomSource and the store. The requester's known
 * authority travels with each request so the source can fence itself.
 */
import { formatAuthority } from "../../../src/rooms/core/lineage.js";
import { type PullEffect, type PullLimits, PullPlanner, type PullStopReason } from "../../../src/rooms/core/pull-planner.js";
import type { Refusal } from "../../../src/rooms/core/refusal.js";
import type { ReplicationDecision } from "../../../src/rooms/core/replication.js";
import type { Authority, LogPage } from "../../../src/rooms/core/types.js";
import type { SimGateway } from "./sim-gateway.js";

export type PullStep =
  | { kind: "fenced"; source: string; fence: Authority }
  | { kind: "log_refused"; since: number; refusal: Refusal }
  | { kind: "page"; since: number; page: LogPage; decision: ReplicationDecision }
  | { kind: "observed"; authority: Authority }
  | { kind: "stopped"; reason: PullStopReason }
  | { kind: "failed"; refusal: Refusal };

export interface PullOptions {
  limit?: number;
  maxBytes?: number;
  /** Pages to apply at most (a partial pull), then stop where the loop is. */
  maxPages?: number;
  /** Ask from this seq for the first page instead of last_seq. */
  since?: number;
  /** Fault injection on each page in transit. */
  tamper?: (page: LogPage) => void;
  limits?: Partial<PullLimits>;
}

export function pull(source: SimGateway, replica: SimGateway, roomId: string, now: () => string, options: PullOptions = {}): PullStep[] {
  const steps: PullStep[] = [];
  const planner = new PullPlanner({
    mode: "catch_up",
    last_seq: replica.rooms.get(roomId)?.state.last_seq ?? 0,
    ...(options.since === undefined ? {} : { since: options.since }),
    ...(options.limits ? { limits: options.limits } : {}),
    random: () => 0.5,
  });
  const queue: PullEffect[] = planner.start();
  let since = 0;
  let pages = 0;
  const maxPages = options.maxPages ?? 50;
  while (queue.length > 0) {
    const effect = queue.shift()!;
    switch (effect.kind) {
      case "fetch": {
        if (pages >= maxPages || !source.rooms.has(roomId)) return steps;
        since = effect.since_seq;
        const known = replica.rooms.get(roomId)?.state;
        const knows = known && known.authority.epoch > 0 ? known.authority : undefined;
        const served = source.log(
          roomId,
          {
            since_seq: since,
            ...(options.limit ? { limit: options.limit } : {}),
            ...(options.maxBytes ? { max_bytes: options.maxBytes } : {}),
          },
          knows,
        );
        if (served.fence) steps.push({ kind: "fenced", source: source.id, fence: served.fence });
        if ("refusal" in served) {
          steps.push({ kind: "log_refused", since, refusal: served.refusal });
          queue.push(...planner.on({ kind: "refused", refusal: served.refusal }));
          break;
        }
        const page = structuredClone(served.page);
        options.tamper?.(page);
        queue.push(...planner.on({ kind: "page", page }));
        break;
      }
      case "apply": {
        const before = replica.rooms.get(roomId)?.state.last_seq ?? 0;
        const decision = replica.replicate(roomId, effect.page, source.id, now());
        pages++;
        steps.push({ kind: "page", since, page: effect.page, decision });
        queue.push(...planner.on({ kind: "applied", decision, before_last_seq: before }));
        break;
      }
      case "observe":
        replica.observe(roomId, effect.authority);
        steps.push({ kind: "observed", authority: effect.authority });
        break;
      case "stop":
        // A plain caught-up end is what every script expects; only the unusual ends are shown.
        if (effect.reason !== "caught_up") steps.push({ kind: "stopped", reason: effect.reason });
        return steps;
      case "fail":
        // Refusals by a page's decision are shown with the page; other ends are shown here.
        if (!steps.some((s) => s.kind === "page" && "refusal" in s.decision && s.decision.refusal === effect.refusal)) {
          steps.push({ kind: "failed", refusal: effect.refusal });
        }
        return steps;
      case "prefetch":
        // Nothing to gain in memory: the next fetch asks again.
        break;
      case "tail":
      case "backoff":
        throw new Error(`a catch-up pull never ${effect.kind}s`);
    }
  }
  return steps;
}

export function describeFence(step: Extract<PullStep, { kind: "fenced" }>, requester: string): string {
  return `${step.source} fenced by ${formatAuthority(step.fence)} (learned from ${requester})`;
}
