// The acknowledged-write ledger. Every send a scenario makes is
// recorded with its outcome:
//   acked          the gateway acknowledged it (seq/epoch known): it must never be lost;
//   refused        a typed refusal (e.g. fenced epoch): it must never become visible;
//   indeterminate  timeout / connection lost: it may or may not have landed; neither is a bug.
// At the end the scenario reads every gateway and hands the events to verify():
//   lost                 acked, but present nowhere (main logs or divergent branches)
//   duplicates           one event id more than once in a main log
//   refusedButVisible    refused, yet present in a main log (Jepsen's G1a)
//   preserved            acked events that live in a divergent branch (split brain, kept)
// and summary() prints "N sends, M acknowledged, 0 lost, K preserved in divergent branches".

export type SendOutcome = "acked" | "refused" | "indeterminate";

export interface SendTarget {
  /** Unique per ledger; the id the test passes to the gateway (`--event-id`). */
  eventId: string;
  room: string;
  /** Which gateway the send went to. */
  via: string;
}

export interface SendRecord extends SendTarget {
  n: number;
  startedAt: number;
  /** When the outcome was recorded (same clock as startedAt). */
  settledAt?: number;
  outcome?: SendOutcome;
  ack?: { seq: number; epoch: number };
  reason?: string;
}

export interface ObservedEvent {
  eventId: string;
  room: string;
  seq?: number;
  epoch?: number;
  gateway?: string;
}

export interface LedgerVerdict {
  sends: number;
  acknowledged: number;
  refused: number;
  indeterminate: number;
  /** Sends whose outcome was never recorded (a bug in the scenario). */
  unresolved: SendRecord[];
  lost: SendRecord[];
  duplicates: Array<{ room: string; eventId: string; count: number }>;
  refusedButVisible: SendRecord[];
  preserved: number;
  /** Indeterminate sends that did land (informational). */
  indeterminateVisible: number;
  ok: boolean;
}

export interface RecordOptions<T> {
  /** The ack of a successful call. */
  ack: (result: T) => { seq: number; epoch: number };
  /** A refusal reason for errors that are definite refusals; undefined means indeterminate. */
  refusal?: (error: unknown) => string | undefined;
}

export class Ledger {
  private readonly records: SendRecord[] = [];
  private readonly byEventId = new Map<string, SendRecord>();

  constructor(
    readonly name: string,
    private readonly now: () => number = Date.now,
  ) {}

  get all(): readonly SendRecord[] {
    return this.records;
  }

  begin(target: SendTarget): SendRecord {
    if (this.byEventId.has(target.eventId)) throw new Error(`ledger ${this.name}: event id ${target.eventId} used twice`);
    const record: SendRecord = { ...target, n: this.records.length + 1, startedAt: this.now() };
    this.records.push(record);
    this.byEventId.set(target.eventId, record);
    return record;
  }

  acked(record: SendRecord, ack: { seq: number; epoch: number }): void {
    this.settle(record, "acked");
    record.ack = ack;
  }

  refused(record: SendRecord, reason: string): void {
    this.settle(record, "refused");
    record.reason = reason;
  }

  indeterminate(record: SendRecord, reason: string): void {
    this.settle(record, "indeterminate");
    record.reason = reason;
  }

  private settle(record: SendRecord, outcome: SendOutcome): void {
    if (record.outcome) throw new Error(`ledger ${this.name}: send #${record.n} (${record.eventId}) already ${record.outcome}`);
    record.outcome = outcome;
    record.settledAt = this.now();
  }

  /** begin + run + classify in one call; never throws for the send's own failure. */
  async record<T>(target: SendTarget, send: () => Promise<T>, options: RecordOptions<T>): Promise<SendRecord> {
    const rec = this.begin(target);
    let result: T;
    try {
      result = await send();
    } catch (err) {
      const reason = options.refusal?.(err);
      if (reason !== undefined) this.refused(rec, reason);
      else this.indeterminate(rec, err instanceof Error ? err.message : String(err));
      return rec;
    }
    this.acked(rec, options.ack(result));
    return rec;
  }

  verify(observed: { main: ObservedEvent[]; divergent?: ObservedEvent[] }): LedgerVerdict {
    const key = (room: string, eventId: string) => `${room}\u0000${eventId}`;
    const mainCount = new Map<string, number>();
    for (const e of observed.main) mainCount.set(key(e.room, e.eventId), (mainCount.get(key(e.room, e.eventId)) ?? 0) + 1);
    const divergent = new Set((observed.divergent ?? []).map((e) => key(e.room, e.eventId)));

    const count = (o: SendOutcome) => this.records.filter((r) => r.outcome === o).length;
    const inMain = (r: SendRecord) => (mainCount.get(key(r.room, r.eventId)) ?? 0) > 0;
    const inDivergent = (r: SendRecord) => divergent.has(key(r.room, r.eventId));

    const duplicates: LedgerVerdict["duplicates"] = [];
    for (const [k, n] of mainCount) {
      if (n > 1) {
        const [room = "", eventId = ""] = k.split("\u0000");
        duplicates.push({ room, eventId, count: n });
      }
    }
    const acked = this.records.filter((r) => r.outcome === "acked");
    const verdict: LedgerVerdict = {
      sends: this.records.length,
      acknowledged: acked.length,
      refused: count("refused"),
      indeterminate: count("indeterminate"),
      unresolved: this.records.filter((r) => !r.outcome),
      lost: acked.filter((r) => !inMain(r) && !inDivergent(r)),
      duplicates,
      refusedButVisible: this.records.filter((r) => r.outcome === "refused" && inMain(r)),
      preserved: acked.filter(inDivergent).length,
      indeterminateVisible: this.records.filter((r) => r.outcome === "indeterminate" && (inMain(r) || inDivergent(r))).length,
      ok: false,
    };
    verdict.ok =
      verdict.unresolved.length === 0 &&
      verdict.lost.length === 0 &&
      verdict.duplicates.length === 0 &&
      verdict.refusedButVisible.length === 0;
    return verdict;
  }

  static summary(v: LedgerVerdict): string {
    return `${v.sends} sends, ${v.acknowledged} acknowledged, ${v.lost.length} lost, ${v.preserved} preserved in divergent branches`;
  }

  /** Print the summary; throw with the offending sends unless the verdict is clean. */
  assertClean(v: LedgerVerdict, log: (line: string) => void = console.log): void {
    log(
      `[ledger ${this.name}] ${Ledger.summary(v)} (${v.refused} refused, ${v.indeterminate} indeterminate, ${v.indeterminateVisible} of those landed)`,
    );
    if (v.ok) return;
    const show = (r: SendRecord) =>
      `#${r.n} ${r.eventId} room=${r.room} via=${r.via}${r.ack ? ` ack=${r.ack.epoch}/${r.ack.seq}` : ""}${r.reason ? ` (${r.reason})` : ""}`;
    const lines = [
      ...v.unresolved.map((r) => `unresolved: ${show(r)}`),
      ...v.lost.map((r) => `LOST: ${show(r)}`),
      ...v.duplicates.map((d) => `DUPLICATE: ${d.eventId} room=${d.room} x${d.count}`),
      ...v.refusedButVisible.map((r) => `REFUSED BUT VISIBLE: ${show(r)}`),
    ];
    throw new Error(`ledger ${this.name} is not clean:\n  ${lines.join("\n  ")}`);
  }
}
