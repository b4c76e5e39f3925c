import { collectDefaultMetrics, Histogram, Registry } from "prom-client";

/** One Prometheus registry per daemon, with process metrics and the shared RPC latency histogram. */
export interface Metrics {
  registry: Registry;
  rpcDuration: Histogram<"method" | "code" | "transport">;
}

export function createMetrics(defaultLabels: Record<string, string> = {}): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels(defaultLabels);
  collectDefaultMetrics({ register: registry, prefix: "hermes_" });
  const rpcDuration = new Histogram({
    name: "hermes_rpc_duration_seconds",
    help: "Latency of handled RPCs by method and result code",
    labelNames: ["method", "code", "transport"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  return { registry, rpcDuration };
}
