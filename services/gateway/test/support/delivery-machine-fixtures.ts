import { newEnvelope } from "../../src/delivery/core/envelope.js";
import type { IngressEffect } from "../../src/delivery/core/ingress-machine.js";
import type { OutboxEffect } from "../../src/delivery/core/outbox-machine.js";
import { type IngressRow, newIngressRow, newOutboxRow, type OutboxRow } from "../../src/delivery/core/rows.js";
import type { Route } from "../../src/delivery/core/targets.js";

/** Builders and a one-line-per-effect summary for the delivery machines' tests (table and scenario). */

export const T0 = Date.UTC(2026, 0, 1);

export function localRoute(profile: string): Route {
  return { kind: "local", profile, target: profile };
}

export function peerRoute(peer: string, profile: string): Route {
  return { kind: "peer", peer, profile, target: `${peer}/${profile}` };
}

/** An outbox row `id` from `from` along `route`, sent at `now` (TTL `ttl` seconds). */
export function outboxRow(id: string, from: string, route: Route, now = T0, ttl = 900, message = "hello"): OutboxRow {
  const envelope = newEnvelope(
    { from_profile: from, from_gateway: "gw1", target: route.target, message, ttl_seconds: ttl, delivery_id: id },
    { now, newId: () => id },
  );
  return newOutboxRow(envelope, route, now);
}

/** An ingress row `id` for `target`, from `from` on gateway `gw` (TTL `ttl` seconds). */
export function ingressRow(id: string, from: string, target: string, now = T0, ttl = 900, message = "hello"): IngressRow {
  const envelope = newEnvelope(
    { from_profile: from, from_gateway: "gw1", target, message, ttl_seconds: ttl, delivery_id: id },
    { now, newId: () => id },
  );
  return newIngressRow(envelope, { target_profile: target, source: "local" }, now);
}

/** One line per effect: its kind, the delivery it is about, and the state or detail that matters. */
export function describeEffect(effect: OutboxEffect | IngressEffect): string {
  switch (effect.kind) {
    case "insert_outbox":
    case "insert_ingress":
    case "admit_local":
    case "transmit":
      return `${effect.kind} ${effect.row.delivery_id}`;
    case "save_outbox":
    case "save_ingress": {
      const r = effect.record;
      return `${effect.kind} ${r.delivery_id} ${r.state}${r.reason ? `/${r.reason}` : ""} attempts=${r.attempts}`;
    }
    case "ended":
      return `ended ${effect.row.delivery_id} ${effect.row.state}${"restart" in effect && effect.restart ? " (restart)" : ""}`;
    case "notify":
      return `notify ${effect.row.delivery_id} ${effect.row.state}${effect.recovering ? " (recovering)" : ""}`;
    case "progress":
    case "answer":
      return `${effect.kind} ${effect.receipt.delivery_id} ${effect.receipt.state}`;
    case "retrying":
      return `retrying ${effect.id} ${effect.reason}`;
    case "retry_timer":
      return `retry_timer ${effect.id} ${effect.ms}ms`;
    case "run_turn":
      return `run_turn ${effect.id} in ${effect.session_id} attempt=${effect.attempt}${effect.compact ? " compact" : ""}`;
    case "open_session":
      return `open_session ${effect.id} ${effect.session_key}`;
    case "touch_session":
      return `touch_session ${effect.session_id}`;
    case "mark_notified":
    case "release_session":
      return `${effect.kind} ${effect.id}`;
    case "abort_turn":
      return `abort_turn ${effect.id} ${effect.error.reason}`;
    case "abandon_waiters":
      return `abandon_waiters ${effect.error.reason}`;
  }
}

export function describeEffects(effects: readonly (OutboxEffect | IngressEffect)[]): string[] {
  return effects.map(describeEffect);
}
