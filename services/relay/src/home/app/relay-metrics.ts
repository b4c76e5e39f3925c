import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export interface QueueDepth {
  queued: number;
  in_flight: number;
}

/** The relay's counters: envelopes, deliveries by outcome, forwards, refusals, tunnel calls. */
export class RelayMetrics {
  readonly accepted: Counter<never>;
  readonly deliveries: Counter<"outcome">;
  readonly forwards: Counter<never>;
  readonly refused: Counter<"frame" | "reason">;
  readonly tunnelCalls: Counter<"result">;
  readonly deliverySeconds: Histogram<"outcome">;

  constructor(registry: Registry) {
    this.accepted = new Counter({
      name: "hermes_relay_envelopes_accepted_total",
      help: "Envelopes committed to the relay queue and acked queued",
      registers: [registry],
    });
    this.deliveries = new Counter({
      name: "hermes_relay_deliveries_total",
      help: "Deliveries ended at the relay, by outcome (target receipt state, queued_expired, or error reason such as runtime_offline)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    });
    this.forwards = new Counter({
      name: "hermes_relay_forwards_total",
      help: "Envelopes forwarded down a target gateway's stream (a re-forward after a restart counts again)",
      registers: [registry],
    });
    this.refused = new Counter({
      name: "hermes_relay_frames_refused_total",
      help: "Frames and streams refused with a typed error, by frame kind and reason",
      labelNames: ["frame", "reason"] as const,
      registers: [registry],
    });
    this.tunnelCalls = new Counter({
      name: "hermes_relay_tunnel_calls_total",
      help: "Tunnelled calls by result (ok or the error reason)",
      labelNames: ["result"] as const,
      registers: [registry],
    });
    this.deliverySeconds = new Histogram({
      name: "hermes_relay_delivery_duration_seconds",
      help: "From acceptance at the relay to the outcome, by outcome",
      labelNames: ["outcome"] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
      registers: [registry],
    });
  }
}

/** The relay's gauges, read at each scrape from what they measure: queue depth, connections, roster epoch. */
export function registerRelayGauges(
  registry: Registry,
  sources: { depth: () => QueueDepth; connections: () => number; epoch: () => number },
): void {
  new Gauge({
    name: "hermes_relay_queue_depth",
    help: "Envelopes at the relay not ended yet: queued (waiting for their target) and in_flight (forwarded, not answered)",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      const d = sources.depth();
      this.set({ state: "queued" }, d.queued);
      this.set({ state: "in_flight" }, d.in_flight);
    },
  });
  new Gauge({
    name: "hermes_relay_connections",
    help: "Gateways connected now",
    registers: [registry],
    collect() {
      this.set(sources.connections());
    },
  });
  new Gauge({
    name: "hermes_relay_roster_epoch",
    help: "The capability epoch of the roster (rises on every change)",
    registers: [registry],
    collect() {
      this.set(sources.epoch());
    },
  });
}
