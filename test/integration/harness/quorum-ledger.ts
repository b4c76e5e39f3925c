// The invariants of a quorum room, checked on a Ledger and the final logs of every gateway:
//   - 0 acknowledged sends lost: every acked send is in the FINAL AUTHORITY's main log, at the seq and
//     epoch it was acknowledged with (a divergent branch holds only what was never acknowledged, so an
//     acked send found only there counts as lost);
//   - at most one gateway acknowledged in any epoch (the acks name the epoch and the gateway that gave them);
//   - logs prefix-consistent: every gateway's main log is a prefix of the longest one (same event ids
//     and hashes at the same seqs), and no event id appears twice in one;
//   - a definite refusal (never appended) is visible in no main log.
// "K preserved unacknowledged" counts the events of the divergent branches (what returning authorities
// kept of their unacknowledged suffixes). The ledger line of a scenario:
//   [ledger kill-authority] 1210 sends, 804 acked, 0 lost; failover in 4.3 s; epochs 1 gw-a (412 acks), 2 gw-b (392 acks); 3 preserved unacknowledged
import type { Ledger, SendRecord } from "./ledger.js";

export interface LoggedEvent {
  seq: number;
  eventId: string;
  epoch: number;
  hash: string;
}

export interface GatewayLog {
  gateway: string;
  events: LoggedEvent[];
}

export interface EpochAckers {
  epoch: number;
  gateways: Array<{ gateway: string; acks: number }>;
}

export interface QuorumVerdict {
  room: string;
  sends: number;
  acked: number;
  refused: number;
  indeterminate: number;
  /** Sends whose outcome was never recorded (a bug in the scenario). */
  unresolved: SendRecord[];
  /** Acked, but not in the final authority's main log. */
  lost: SendRecord[];
  /** Acked and present, but at another seq or epoch than the ack said. */
  misplaced: Array<{ record: SendRecord; found: LoggedEvent }>;
  /** Acked sends found in a divergent branch (they must never be there). */
  ackedInDivergent: SendRecord[];
  refusedButVisible: SendRecord[];
  duplicates: Array<{ gateway: string; eventId: string; count: number }>;
  epochs: EpochAckers[];
  /** Epochs in which more than one gateway acknowledged. */
  epochConflicts: EpochAckers[];
  prefixProblems: string[];
  preservedUnacknowledged: number;
  /** Unacknowledged sends (refused or indeterminate) that are in the final main log. */
  unacknowledgedVisible: number;
  ok: boolean;
}

export interface QuorumObservation {
  room: string;
  /** The gateway that is the room's authority at the end. */
  authority: string;
  /** Every gateway's main log of the room, the authority's included. */
  logs: GatewayLog[];
  /** Events of every divergent branch, on every gateway. */
  divergent: Array<{ eventId: string }>;
}

export function verifyQuorum(ledger: Ledger, seen: QuorumObservation): QuorumVerdict {
  const records = ledger.all.filter((r) => r.room === seen.room);
  const finalLog = seen.logs.find((l) => l.gateway === seen.authority);
  if (!finalLog) throw new Error(`verifyQuorum: no log of the final authority ${seen.authority}`);
  const inFinal = new Map(finalLog.events.map((e) => [e.eventId, e]));
  const inDivergent = new Set(seen.divergent.map((e) => e.eventId));
  const visibleAnywhere = new Set(seen.logs.flatMap((l) => l.events.map((e) => e.eventId)));
  const acked = records.filter((r) => r.outcome === "acked");
  const unacked = records.filter((r) => r.outcome === "refused" || r.outcome === "indeterminate");

  const misplaced: QuorumVerdict["misplaced"] = [];
  for (const r of acked) {
    const found = inFinal.get(r.eventId);
    if (found && r.ack && (found.seq !== r.ack.seq || found.epoch !== r.ack.epoch)) misplaced.push({ record: r, found });
  }

  const byEpoch = new Map<number, Map<string, number>>();
  for (const r of acked) {
    if (!r.ack) continue;
    const gateways = byEpoch.get(r.ack.epoch) ?? new Map<string, number>();
    gateways.set(r.via, (gateways.get(r.via) ?? 0) + 1);
    byEpoch.set(r.ack.epoch, gateways);
  }
  const epochs: EpochAckers[] = [...byEpoch.entries()]
    .sort(([a], [b]) => a - b)
    .map(([epoch, gateways]) => ({ epoch, gateways: [...gateways.entries()].map(([gateway, acks]) => ({ gateway, acks })) }));

  const verdict: QuorumVerdict = {
    room: seen.room,
    sends: records.length,
    acked: acked.length,
    refused: records.filter((r) => r.outcome === "refused").length,
    indeterminate: records.filter((r) => r.outcome === "indeterminate").length,
    unresolved: records.filter((r) => !r.outcome),
    lost: acked.filter((r) => !inFinal.has(r.eventId)),
    misplaced,
    ackedInDivergent: acked.filter((r) => inDivergent.has(r.eventId)),
    refusedButVisible: records.filter((r) => r.outcome === "refused" && visibleAnywhere.has(r.eventId)),
    duplicates: seen.logs.flatMap(duplicatesOf),
    epochs,
    epochConflicts: epochs.filter((e) => e.gateways.length > 1),
    prefixProblems: prefixProblems(seen.logs),
    preservedUnacknowledged: seen.divergent.length,
    unacknowledgedVisible: unacked.filter((r) => inFinal.has(r.eventId)).length,
    ok: false,
  };
  verdict.ok =
    verdict.unresolved.length === 0 &&
    verdict.lost.length === 0 &&
    verdict.misplaced.length === 0 &&
    verdict.ackedInDivergent.length === 0 &&
    verdict.refusedButVisible.length === 0 &&
    verdict.duplicates.length === 0 &&
    verdict.epochConflicts.length === 0 &&
    verdict.prefixProblems.length === 0;
  return verdict;
}

function duplicatesOf(log: GatewayLog): QuorumVerdict["duplicates"] {
  const counts = new Map<string, number>();
  for (const e of log.events) counts.set(e.eventId, (counts.get(e.eventId) ?? 0) + 1);
  return [...counts.entries()].filter(([, n]) => n > 1).map(([eventId, count]) => ({ gateway: log.gateway, eventId, count }));
}

/** Every log must be a prefix of the longest: the same (seq, event id, hash) at each position, seqs 1..n. */
export function prefixProblems(logs: GatewayLog[]): string[] {
  const problems: string[] = [];
  const longest = logs.reduce<GatewayLog | undefined>((a, b) => (!a || b.events.length > a.events.length ? b : a), undefined);
  if (!longest) return problems;
  for (const log of logs) {
    log.events.forEach((e, i) => {
      if (e.seq !== i + 1) problems.push(`${log.gateway}: seq ${e.seq} at position ${i + 1} (gap or reorder)`);
    });
    if (log === longest) continue;
    const at = log.events.findIndex((e, i) => {
      const other = longest.events[i];
      return !other || other.eventId !== e.eventId || other.hash !== e.hash;
    });
    if (at >= 0) {
      const mine = log.events[at];
      const theirs = longest.events[at];
      problems.push(
        `${log.gateway} is not a prefix of ${longest.gateway}: seq ${mine?.seq} is ${mine?.eventId} (${mine?.hash.slice(0, 12)}) there, ` +
          `${theirs ? `${theirs.eventId} (${theirs.hash.slice(0, 12)})` : "nothing"} on ${longest.gateway}`,
      );
    }
  }
  return problems;
}

/**
 * Seconds from `faultAt` to the first send acknowledged after it (settled after faultAt; with
 * `aboveEpoch`, only acks of a newer epoch count), or null when none was.
 */
export function secondsToFirstAck(ledger: Ledger, faultAt: number, options: { room?: string; aboveEpoch?: number } = {}): number | null {
  let first: number | undefined;
  for (const r of ledger.all) {
    if (r.outcome !== "acked" || r.settledAt === undefined || r.settledAt <= faultAt || !r.ack) continue;
    if (options.room !== undefined && r.room !== options.room) continue;
    if (options.aboveEpoch !== undefined && r.ack.epoch <= options.aboveEpoch) continue;
    if (first === undefined || r.settledAt < first) first = r.settledAt;
  }
  return first === undefined ? null : (first - faultAt) / 1000;
}

/**
 * What recovery the line reports: a failover to a new epoch, sends accepted again without one, or
 * (a run of many faults, not all of which move the authority) the longest time from a fault to the
 * next acknowledged send.
 */
export type Recovery = { failoverSeconds: number | null } | { noFailover: string } | { worstSeconds: number | null; faults: number };

function describeRecovery(recovery: Recovery): string {
  if ("noFailover" in recovery) return `no failover (${recovery.noFailover})`;
  if ("worstSeconds" in recovery)
    return recovery.worstSeconds === null
      ? `no send acked after some of ${recovery.faults} faults`
      : `a send acknowledged ≤ ${recovery.worstSeconds.toFixed(1)} s after each of ${recovery.faults} faults`;
  return recovery.failoverSeconds === null ? "failover: none seen" : `failover in ${recovery.failoverSeconds.toFixed(1)} s`;
}

export function quorumSummary(v: QuorumVerdict, recovery: Recovery): string {
  const failover = describeRecovery(recovery);
  const epochs = v.epochs.map((e) => `${e.epoch} ${e.gateways.map((g) => `${g.gateway} (${g.acks} acks)`).join(" + ")}`).join(", ");
  return `${v.sends} sends, ${v.acked} acked, ${v.lost.length} lost; ${failover}; epochs ${epochs || "none acked"}; ${v.preservedUnacknowledged} preserved unacknowledged`;
}

/** Prints the ledger line (and the unacknowledged detail); throws with every violation unless clean. */
export function assertQuorumClean(
  ledgerName: string,
  v: QuorumVerdict,
  recovery: Recovery,
  log: (line: string) => void = console.log,
): string {
  const line = `[ledger ${ledgerName}] ${quorumSummary(v, recovery)} (unacknowledged: ${v.refused} refused, ${v.indeterminate} indeterminate, ${v.unacknowledgedVisible} of those in the log)`;
  log(line);
  if (v.ok) return line;
  const show = (r: SendRecord) =>
    `#${r.n} ${r.eventId} via=${r.via}${r.ack ? ` ack=${r.ack.epoch}/${r.ack.seq}` : ""}${r.reason ? ` (${r.reason})` : ""}`;
  const lines = [
    ...v.unresolved.map((r) => `unresolved: ${show(r)}`),
    ...v.lost.map((r) => `LOST: ${show(r)}`),
    ...v.misplaced.map((m) => `MISPLACED: ${show(m.record)} is at ${m.found.epoch}/${m.found.seq}`),
    ...v.ackedInDivergent.map((r) => `ACKED BUT IN A DIVERGENT BRANCH: ${show(r)}`),
    ...v.refusedButVisible.map((r) => `REFUSED BUT VISIBLE: ${show(r)}`),
    ...v.duplicates.map((d) => `DUPLICATE on ${d.gateway}: ${d.eventId} x${d.count}`),
    ...v.epochConflicts.map((e) => `TWO ACKERS IN EPOCH ${e.epoch}: ${e.gateways.map((g) => `${g.gateway} (${g.acks})`).join(", ")}`),
    ...v.prefixProblems.map((p) => `NOT PREFIX-CONSISTENT: ${p}`),
  ];
  throw new Error(`ledger ${ledgerName} is not clean:\n  ${lines.join("\n  ")}`);
}
