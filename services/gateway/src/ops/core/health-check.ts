import type { MeshStatus } from "./mesh-status.js";

/**
 * `hermes check`: one gateway's health as a monitoring plugin reports it (Nagios exit codes). Each
 * check reads the mesh status or a probe the gateway ran on its own home, and the worst state
 * decides: critical, then warning, then unknown, then ok.
 */

export type CheckState = "ok" | "warning" | "critical" | "unknown";

/** Nagios plugin exit codes. */
export const CHECK_EXIT_CODES: Readonly<Record<CheckState, number>> = { ok: 0, warning: 1, critical: 2, unknown: 3 };

const STATE_ORDER: CheckState[] = ["critical", "warning", "unknown", "ok"];

export function worstState(states: readonly CheckState[]): CheckState {
  for (const s of STATE_ORDER) if (states.includes(s)) return s;
  return "ok";
}

/** What the gateway measured on its own host. */
export interface HealthProbes {
  /** Milliseconds to write and fsync a small file in HERMES_HOME; null with an error when it failed. */
  fsync_ms: number | null;
  fsync_error: string | null;
  disk_free_bytes: number | null;
  disk_total_bytes: number | null;
  disk_error: string | null;
  /** Deliveries that ended failed or expired within the window, newest first. */
  failed_deliveries: { delivery_id: string; target: string; state: string; reason: string | null; ended_at: string | null }[];
  failures_window_seconds: number;
}

/** The limits of each check (the gateway's API validates a caller's own against these bounds). */
export interface CheckThresholds {
  fsync_warning_ms: number;
  fsync_critical_ms: number;
  /** Free space, as a percentage of the file system holding HERMES_HOME. */
  disk_warning_percent: number;
  disk_critical_percent: number;
  /** Events a replica room here may be behind its authority. */
  lag_warning_events: number;
  lag_critical_events: number;
  /** Deliveries that failed within the window. */
  failures_warning: number;
  failures_critical: number;
  failures_window_seconds: number;
}

export const DEFAULT_CHECK_THRESHOLDS: Readonly<CheckThresholds> = {
  fsync_warning_ms: 100,
  fsync_critical_ms: 1000,
  disk_warning_percent: 10,
  disk_critical_percent: 5,
  lag_warning_events: 100,
  lag_critical_events: 10_000,
  failures_warning: 1,
  failures_critical: 20,
  failures_window_seconds: 900,
};

export type CheckName = "fsync" | "disk" | "replica_lag" | "rooms" | "relay" | "deliveries";

export interface CheckResult {
  name: CheckName;
  state: CheckState;
  summary: string;
  /** The measured value (ms, percent free, events, failures), for graphs; null when there is none. */
  value: number | null;
}

export interface CheckReport {
  gateway_id: string;
  checked_at: string;
  state: CheckState;
  checks: CheckResult[];
}

function graded(value: number, warning: number, critical: number, higherIsWorse = true): CheckState {
  const past = (limit: number) => (higherIsWorse ? value >= limit : value <= limit);
  return past(critical) ? "critical" : past(warning) ? "warning" : "ok";
}

function fsyncCheck(p: HealthProbes, t: CheckThresholds): CheckResult {
  if (p.fsync_ms === null) {
    return p.fsync_error
      ? { name: "fsync", state: "critical", summary: `cannot write and fsync in HERMES_HOME: ${p.fsync_error}`, value: null }
      : { name: "fsync", state: "unknown", summary: "the fsync probe did not run", value: null };
  }
  const ms = Math.round(p.fsync_ms * 10) / 10;
  return { name: "fsync", state: graded(ms, t.fsync_warning_ms, t.fsync_critical_ms), summary: `write + fsync took ${ms} ms`, value: ms };
}

function diskCheck(p: HealthProbes, t: CheckThresholds): CheckResult {
  if (p.disk_free_bytes === null || p.disk_total_bytes === null || p.disk_total_bytes <= 0) {
    return { name: "disk", state: "unknown", summary: `free space unknown${p.disk_error ? `: ${p.disk_error}` : ""}`, value: null };
  }
  const percent = Math.round((p.disk_free_bytes / p.disk_total_bytes) * 1000) / 10;
  const mib = Math.round(p.disk_free_bytes / (1024 * 1024));
  return {
    name: "disk",
    state: graded(percent, t.disk_warning_percent, t.disk_critical_percent, false),
    summary: `${percent}% free (${mib} MiB)`,
    value: percent,
  };
}

function lagCheck(status: MeshStatus, t: CheckThresholds): CheckResult {
  const here = status.rooms.flatMap((r) =>
    r.copies.filter((c) => c.gateway_id === status.self && c.role === "replica").map((c) => ({ r, c })),
  );
  if (here.length === 0) return { name: "replica_lag", state: "ok", summary: "no replica rooms here", value: 0 };
  const known = here.filter((x) => x.c.lag !== null);
  if (known.length === 0)
    return { name: "replica_lag", state: "unknown", summary: `lag unknown for ${here.length} replica room(s)`, value: null };
  const worst = known.reduce((a, b) => ((b.c.lag ?? 0) > (a.c.lag ?? 0) ? b : a));
  const lag = worst.c.lag ?? 0;
  return {
    name: "replica_lag",
    state: graded(lag, Math.max(1, t.lag_warning_events), Math.max(1, t.lag_critical_events)),
    summary:
      lag === 0
        ? `${known.length} replica room(s) caught up`
        : `${worst.r.room_id} is ${lag} event(s) behind ${worst.r.authority.gateway_id}`,
    value: lag,
  };
}

function roomsCheck(status: MeshStatus): CheckResult {
  const mine = status.rooms.flatMap((r) => r.copies.filter((c) => c.gateway_id === status.self).map((c) => ({ r, c })));
  const fenced = mine.filter((x) => x.c.safety_status === "fenced" || x.c.safety_status === "quarantined");
  const diverged = mine.filter((x) => x.c.safety_status === "diverged");
  const split = status.rooms.filter((r) => r.safety === "split_brain");
  const list = (xs: { r: { room_id: string }; c: { safety_status: string } }[]) =>
    xs.map((x) => `${x.r.room_id} (${x.c.safety_status})`).join(", ");
  if (fenced.length > 0 || split.length > 0) {
    const parts = [...(fenced.length > 0 ? [list(fenced)] : []), ...split.map((r) => `${r.room_id} (split brain: ${r.safety_detail})`)];
    return { name: "rooms", state: "critical", summary: parts.join(", "), value: fenced.length + split.length };
  }
  if (diverged.length > 0)
    return { name: "rooms", state: "warning", summary: `${list(diverged)}: see hermes groups divergence`, value: diverged.length };
  return { name: "rooms", state: "ok", summary: `${mine.length} room(s), none fenced, quarantined or diverged`, value: 0 };
}

function relayCheck(status: MeshStatus): CheckResult {
  const relay = status.relay;
  if (!relay || relay.state === "disabled") return { name: "relay", state: "ok", summary: "no relay configured", value: null };
  const state: CheckState = relay.state === "connected" ? "ok" : relay.state === "connecting" ? "warning" : "critical";
  return { name: "relay", state, summary: `${relay.url} ${relay.state}`, value: relay.state === "connected" ? 1 : 0 };
}

function deliveriesCheck(p: HealthProbes, t: CheckThresholds): CheckResult {
  const n = p.failed_deliveries.length;
  const minutes = Math.round(p.failures_window_seconds / 60);
  const latest = p.failed_deliveries[0];
  return {
    name: "deliveries",
    state: graded(n, t.failures_warning, t.failures_critical),
    summary:
      n === 0
        ? `no failed deliveries in the last ${minutes} min`
        : `${n} failed in the last ${minutes} min; latest ${latest!.delivery_id} to ${latest!.target}: ${latest!.state}${latest!.reason ? ` [${latest!.reason}]` : ""}`,
    value: n,
  };
}

export function evaluateHealth(status: MeshStatus, probes: HealthProbes, thresholds: CheckThresholds, checkedAt: string): CheckReport {
  const checks = [
    fsyncCheck(probes, thresholds),
    diskCheck(probes, thresholds),
    lagCheck(status, thresholds),
    roomsCheck(status),
    relayCheck(status),
    deliveriesCheck(probes, thresholds),
  ];
  return { gateway_id: status.self, checked_at: checkedAt, state: worstState(checks.map((c) => c.state)), checks };
}

/** The report in the Prometheus text format (`hermes check --prometheus`, for the node exporter's textfile collector). */
export function checkReportPrometheus(report: CheckReport): string {
  const label = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
  const gw = label(report.gateway_id);
  const lines = [
    "# HELP hermes_check_status Check state: 0 ok, 1 warning, 2 critical, 3 unknown.",
    "# TYPE hermes_check_status gauge",
    `hermes_check_status{gateway="${gw}",check="overall"} ${CHECK_EXIT_CODES[report.state]}`,
    ...report.checks.map((c) => `hermes_check_status{gateway="${gw}",check="${c.name}"} ${CHECK_EXIT_CODES[c.state]}`),
    "# HELP hermes_check_value The value a check measured (fsync ms, disk percent free, lag events, failed deliveries).",
    "# TYPE hermes_check_value gauge",
    ...report.checks.filter((c) => c.value !== null).map((c) => `hermes_check_value{gateway="${gw}",check="${c.name}"} ${c.value}`),
  ];
  return `${lines.join("\n")}\n`;
}
