import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/**
 * Room metrics. No per-room labels: a gateway may hold thousands of rooms, and a label
 * per room would make every scrape grow with them. Per-room detail is in `groups.replica_state`.
 */
export class RoomsMetrics {
  readonly appends: Counter;
  readonly appendBatch: Histogram;
  readonly replicated: Counter;
  readonly fencedRefusals: Counter;
  readonly divergences: Counter;
  readonly quarantines: Counter;

  constructor(registry: Registry, lag: () => number) {
    this.appends = new Counter({
      name: "hermes_room_appends_total",
      help: "Events appended to rooms led by this gateway (acknowledged after their group commit)",
      registers: [registry],
    });
    this.appendBatch = new Histogram({
      name: "hermes_room_append_batch_size",
      help: "Appends answered by one group commit (one SQLite transaction, one fsync)",
      buckets: [1, 2, 5, 10, 50, 100, 500, 1000, 5000],
      registers: [registry],
    });
    this.replicated = new Counter({
      name: "hermes_room_replicated_events_total",
      help: "Events applied to replica rooms from their authority's pages",
      registers: [registry],
    });
    this.fencedRefusals = new Counter({
      name: "hermes_room_fenced_refusals_total",
      help: "Sends refused with authority_conflict because a newer authority claim fenced this gateway",
      registers: [registry],
    });
    this.divergences = new Counter({
      name: "hermes_room_divergences_detected_total",
      help: "Split-brain branches detected and preserved in room_divergent_events",
      registers: [registry],
    });
    this.quarantines = new Counter({
      name: "hermes_room_quarantines_total",
      help: "Replica rooms quarantined because a page broke a safety rule",
      registers: [registry],
    });
    new Gauge({
      name: "hermes_room_replica_lag_events",
      help: "Largest number of events a replica room here is behind its authority's latest_seq (from the last page)",
      registers: [registry],
      collect() {
        this.set(lag());
      },
    });
  }
}
