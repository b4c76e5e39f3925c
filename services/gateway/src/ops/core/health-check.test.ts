import { describe, expect, it } from "vitest";
import {
  CHECK_EXIT_CODES,
  checkReportPrometheus,
  DEFAULT_CHECK_THRESHOLDS,
  evaluateHealth,
  type HealthProbes,
  worstState,
} from "./health-check.js";
import type { MeshStatus } from "./mesh-status.js";

const healthy: HealthProbes = {
  fsync_ms: 2,
  fsync_error: null,
  disk_free_bytes: 50,
  disk_total_bytes: 100,
  disk_error: null,
  failed_deliveries: [],
  failures_window_seconds: 900,
};

function status(over: Partial<MeshStatus> = {}): MeshStatus {
  return { observed_at: "", self: "gw-1", gateways: [], relay: null, coordinator: null, rooms: [], ...over };
}

const copy = (over: Record<string, unknown>) => ({
  gateway_id: "gw-1",
  role: "replica",
  epoch: 1,
  stored_seq: 5,
  lag: 0,
  safety_status: "passive",
  safety_reason: null,
  fenced_by: null,
  demoted: false,
  following: "following",
  ...over,
});

function room(copyOver: Record<string, unknown>) {
  return {
    room_id: "lobby",
    name: "Lobby",
    authority: { gateway_id: "gw-2", epoch: 1 },
    authority_observed: true,
    latest_seq: 5,
    safety: "ok" as const,
    safety_detail: null,
    members: [],
    copies: [copy(copyOver)],
  };
}

const run = (s: MeshStatus, p: HealthProbes = healthy) => evaluateHealth(s, p, DEFAULT_CHECK_THRESHOLDS, "2026-01-01T00:00:00.000Z");
const stateOf = (s: MeshStatus, name: string, p?: HealthProbes) => run(s, p).checks.find((c) => c.name === name)!.state;

describe("evaluateHealth", () => {
  it("a quiet gateway is ok (exit 0)", () => {
    const report = run(status());
    expect(report.state).toBe("ok");
    expect(CHECK_EXIT_CODES[report.state]).toBe(0);
  });

  it("grades each probe", () => {
    expect(stateOf(status(), "fsync", { ...healthy, fsync_ms: 150 })).toBe("warning");
    expect(stateOf(status(), "fsync", { ...healthy, fsync_ms: 2000 })).toBe("critical");
    expect(stateOf(status(), "fsync", { ...healthy, fsync_ms: null, fsync_error: "EROFS" })).toBe("critical");
    expect(stateOf(status(), "disk", { ...healthy, disk_free_bytes: 8 })).toBe("warning");
    expect(stateOf(status(), "disk", { ...healthy, disk_free_bytes: 4 })).toBe("critical");
    expect(stateOf(status(), "disk", { ...healthy, disk_total_bytes: null })).toBe("unknown");
    const failed = { delivery_id: "d1", target: "bob", state: "failed", reason: "missing_config", ended_at: null };
    expect(stateOf(status(), "deliveries", { ...healthy, failed_deliveries: [failed] })).toBe("warning");
    expect(stateOf(status(), "deliveries", { ...healthy, failed_deliveries: Array(20).fill(failed) })).toBe("critical");
  });

  it("grades this gateway's rooms: lag, fencing, divergence, and the relay link", () => {
    expect(stateOf(status({ rooms: [room({ lag: 150 })] }), "replica_lag")).toBe("warning");
    expect(stateOf(status({ rooms: [room({ lag: 20_000 })] }), "replica_lag")).toBe("critical");
    expect(stateOf(status({ rooms: [room({ lag: null })] }), "replica_lag")).toBe("unknown");
    expect(stateOf(status({ rooms: [room({ gateway_id: "gw-3", lag: 20_000 })] }), "replica_lag")).toBe("ok");
    expect(stateOf(status({ rooms: [room({ safety_status: "fenced" })] }), "rooms")).toBe("critical");
    expect(stateOf(status({ rooms: [room({ safety_status: "diverged" })] }), "rooms")).toBe("warning");
    const relay = (state: string) => status({ relay: { url: "grpc://r", connection: "gw-1", state, roster_epoch: 1 } });
    expect(stateOf(relay("connected"), "relay")).toBe("ok");
    expect(stateOf(relay("connecting"), "relay")).toBe("warning");
    expect(stateOf(relay("backoff"), "relay")).toBe("critical");
  });

  it("the worst state wins: critical, then warning, then unknown", () => {
    expect(worstState(["ok", "unknown", "warning"])).toBe("warning");
    expect(worstState(["ok", "unknown"])).toBe("unknown");
    expect(worstState(["warning", "critical"])).toBe("critical");
  });

  it("speaks the Prometheus text format", () => {
    const text = checkReportPrometheus(run(status({ self: 'gw"1' })));
    expect(text).toContain('hermes_check_status{gateway="gw\\"1",check="overall"} 0');
    expect(text).toContain('hermes_check_value{gateway="gw\\"1",check="fsync"} 2');
  });
});
