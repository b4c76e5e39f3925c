/**
 * The pull loop a replication adapter runs, over simulated gateways: ask for pages since
 * last_seq, follow `refetch` (to confirm a divergence) and `cursor_conflict` (the source ends before
 * us), stop when caught up, quarantined or refused. The requester's known authority travels with each
 * request so the source can fence itself.
 */
import { formatAuthority } from "../lineage.js";
import type { Refusal } from "../refusal.js";
import type { ReplicationDecision } from "../replication.js";
import type { Authority, LogPage } from "../types.js";
import type { SimGateway } from "./sim-gateway.js";

export type PullStep =
  | { kind: "fenced"; source: string; fence: Authority }
  | { kind: "log_refused"; since: number; refusal: Refusal }
  | { kind: "page"; since: number; page: LogPage; decision: ReplicationDecision };

export interface PullOptions {
  limit?: number;
  maxBytes?: number;
  maxPages?: number;
  /** Ask from this seq for the first page instead of last_seq. */
  since?: number;
  /** Fault injection on each page in transit. */
  tamper?: (page: LogPage) => void;
}

export function pull(source: SimGateway, replica: SimGateway, roomId: string, now: () => string, options: PullOptions = {}): PullStep[] {
  const steps: PullStep[] = [];
  let since = options.since;
  for (let pages = 0; pages < (options.maxPages ?? 50); pages++) {
    const known = replica.rooms.get(roomId)?.state;
    since ??= known?.last_seq ?? 0;
    const knows = known && known.authority.epoch > 0 ? known.authority : undefined;
    if (!source.rooms.has(roomId)) break;
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
      const latest = served.refusal.data.latest_seq;
      if (served.refusal.reason === "cursor_conflict" && typeof latest === "number" && latest < since) {
        since = latest;
        continue;
      }
      break;
    }
    const page = structuredClone(served.page);
    options.tamper?.(page);
    const decision = replica.replicate(roomId, page, source.id, now());
    steps.push({ kind: "page", since, page, decision });
    since = undefined;
    if (decision.kind === "refetch") {
      since = decision.since_seq;
      continue;
    }
    if (decision.kind === "quarantined" || decision.kind === "refused" || decision.caught_up) break;
  }
  return steps;
}

export function describeFence(step: Extract<PullStep, { kind: "fenced" }>, requester: string): string {
  return `${step.source} fenced by ${formatAuthority(step.fence)} (learned from ${requester})`;
}
