import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { DeliveryRecord } from "../core/receipt.js";

export type DeliverySide = "outbox" | "ingress";

/** Delivery metrics: deliveries by state and reason, retries, queue depth, time to the end state. */
export class DeliveryMetrics {
  private readonly ended: Counter<"side" | "state" | "reason">;
  private readonly retries: Counter<"side" | "reason">;
  private readonly duration: Histogram<"side" | "state">;
  /**
   * The series of each (side, state, reason) seen, looked up once: finding a series by its labels
   * costs more than the increment.
   */
  private readonly endSeries = new Map<string, { ended: Counter.Internal; duration: Histogram.Internal<"side" | "state"> }>();

  constructor(registry: Registry | undefined, depth: () => Record<DeliverySide, number>) {
    const registers = registry ? [registry] : [];
    this.ended = new Counter({
      name: "hermes_deliveries_total",
      help: "Deliveries that reached an end state, by side (outbox: sent from here, ingress: run here), state and reason",
      labelNames: ["side", "state", "reason"] as const,
      registers,
    });
    this.retries = new Counter({
      name: "hermes_delivery_retries_total",
      help: "Single retries scheduled, by side and the reason of the failed attempt",
      labelNames: ["side", "reason"] as const,
      registers,
    });
    this.duration = new Histogram({
      name: "hermes_delivery_duration_seconds",
      help: "From the envelope's created_at to the end state",
      labelNames: ["side", "state"] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
      registers,
    });
    new Gauge({
      name: "hermes_delivery_queue_depth",
      help: "Deliveries waiting in or running from the lanes of this gateway",
      labelNames: ["side"] as const,
      registers,
      collect() {
        const d = depth();
        this.set({ side: "ingress" }, d.ingress);
        this.set({ side: "outbox" }, d.outbox);
      },
    });
  }

  recordEnd(side: DeliverySide, record: DeliveryRecord, now: number): void {
    const reason = record.reason ?? "none";
    const key = `${side} ${record.state} ${reason}`;
    let series = this.endSeries.get(key);
    if (!series) {
      series = { ended: this.ended.labels(side, record.state, reason), duration: this.duration.labels(side, record.state) };
      this.endSeries.set(key, series);
    }
    series.ended.inc();
    const started = Date.parse(record.created_at);
    if (Number.isFinite(started)) series.duration.observe(Math.max(0, now - started) / 1000);
  }

  recordRetry(side: DeliverySide, reason: string): void {
    this.retries.inc({ side, reason });
  }
}
