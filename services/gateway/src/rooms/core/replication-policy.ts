import { isValidGatewayId } from "@hermes/contract";
import { type Refusal, refusal } from "./refusal.js";
import type { Checked } from "./validation.js";

/**
 * A room's replication policy, chosen at creation:
 * - `local` (null here): acknowledged once durable on the authority; replicas pull when told to;
 * - `quorum`: acknowledged once durable on the authority and on every in-sync replica, the
 *   authority leased from the coordinator. `replicas` is the whole set (the creator included),
 *   sorted; `min_insync` of them (the authority counts) must be in sync for sends to be accepted.
 */
export interface QuorumPolicy {
  mode: "quorum";
  replicas: string[];
  min_insync: number;
}

/** The most gateways a quorum room lists (the coordinator's record holds at most 16). */
export const MAX_QUORUM_REPLICAS = 16;

/** A majority of the replica set: 2 of 3, 3 of 4 or 5. */
export function defaultMinInsync(replicas: number): number {
  return Math.floor(replicas / 2) + 1;
}

function invalid(field: string, message: string, extra: Record<string, unknown> = {}): { ok: false; refusal: Refusal } {
  return { ok: false, refusal: refusal("invalid_params", message, { field, ...extra }) };
}

/**
 * `replication` of `groups.create`: absent or `{mode: "local"}` → null (a local room);
 * `{mode: "quorum", replicas, min_insync?}` → the policy with the creator added. `coordinated`
 * says whether this gateway has a coordinator (quorum needs one: `data.code: coordinator_required`).
 */
export function checkReplicationParams(raw: unknown, self: string, coordinated: boolean): Checked<QuorumPolicy | null> {
  if (raw === undefined || raw === null) return { ok: true, value: null };
  if (typeof raw !== "object" || Array.isArray(raw))
    return invalid("replication", "replication must be an object {mode, replicas, min_insync}");
  const { mode, replicas, min_insync, ...rest } = raw as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) return invalid(`replication.${unknown[0]}`, `replication has no field ${unknown[0]}`);
  if (mode === undefined || mode === "" || mode === "local") {
    if ((Array.isArray(replicas) && replicas.length > 0) || (min_insync !== undefined && min_insync !== 0)) {
      return invalid("replication.mode", 'replicas and min_insync need mode "quorum"');
    }
    return { ok: true, value: null };
  }
  if (mode !== "quorum") return invalid("replication.mode", `replication.mode must be "local" or "quorum", got ${JSON.stringify(mode)}`);
  if (!coordinated) {
    return invalid(
      "replication.mode",
      "quorum replication needs a coordinator: start this gateway with --coordinator etcd://host:2379 (coordinator.etcd in config.yaml), or create a local room",
      { code: "coordinator_required" },
    );
  }
  if (!Array.isArray(replicas) || replicas.length === 0) {
    return invalid("replication.replicas", "a quorum room lists at least one other gateway in replication.replicas");
  }
  const bad = replicas.find((id) => !isValidGatewayId(id));
  if (bad !== undefined) return invalid("replication.replicas", `${JSON.stringify(bad)} is not a gateway id`);
  const set = [...new Set([self, ...(replicas as string[])])].sort();
  if (set.length !== replicas.length + (replicas.includes(self) ? 0 : 1))
    return invalid("replication.replicas", "replication.replicas lists a gateway twice");
  if (set.length < 2) return invalid("replication.replicas", "a quorum room lists at least one gateway besides this one");
  if (set.length > MAX_QUORUM_REPLICAS)
    return invalid("replication.replicas", `a quorum room has at most ${MAX_QUORUM_REPLICAS} replicas, this one's creator included`);
  const minimum = min_insync === undefined || min_insync === 0 ? defaultMinInsync(set.length) : min_insync;
  if (typeof minimum !== "number" || !Number.isSafeInteger(minimum) || minimum < 1 || minimum > set.length) {
    return invalid(
      "replication.min_insync",
      `replication.min_insync must be a whole number from 1 to ${set.length} (the replicas, this gateway included)`,
    );
  }
  return { ok: true, value: { mode: "quorum", replicas: set, min_insync: minimum } };
}
