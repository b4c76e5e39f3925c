import { isValidGatewayId } from "./keys.js";

/**
 * The authority record of a coordinated room, kept in etcd at `<prefix>/rooms/<room_id>/authority`:
 *
 *     {"format":1,"gateway_id":"gw-a","epoch":3,"isr":["gw-a","gw-c"],"replicas":["gw-a","gw-b","gw-c"],
 *      "min_insync":2,"lease":"7587869214237040902"}
 *
 * - `gateway_id`, `epoch`: the authority and its epoch (epochs only grow);
 * - `isr`: the in-sync replicas, the authority first; every acknowledged send is durable on each of them;
 * - `replicas`: every gateway that holds the room, the authority included (fixed at creation; the
 *   gateways listed find the rooms they follow here), sorted; `isr` is a subset of it;
 * - `min_insync`: how many of them (the authority counts) must be in sync for sends to be accepted;
 * - `lease`: the etcd lease (decimal id) the authority holds it by; null once it released the room.
 *
 * The key itself carries no lease, so the epoch and the ISR survive the authority's death; whether the
 * record still binds is whether its lease is alive. It is changed only by compare-and-swap on its
 * `mod_revision`. Anything else found under the key (hand edits, a newer format) is refused, never adopted.
 */
export const AUTHORITY_RECORD_FORMAT = 1;

export interface AuthorityRecord {
  gateway_id: string;
  epoch: number;
  isr: string[];
  replicas: string[];
  min_insync: number;
  lease: string | null;
}

/** The most a record may list in its ISR (a room has a handful of replicas). */
export const MAX_ISR = 16;
const LEASE_ID_RE = /^[1-9][0-9]{0,18}$/;

export function encodeAuthorityRecord(record: AuthorityRecord): string {
  return JSON.stringify({
    format: AUTHORITY_RECORD_FORMAT,
    gateway_id: record.gateway_id,
    epoch: record.epoch,
    isr: record.isr,
    replicas: record.replicas,
    min_insync: record.min_insync,
    lease: record.lease,
  });
}

export type RecordParse = { ok: true; record: AuthorityRecord } | { ok: false; problem: string };

const FIELDS = new Set(["format", "gateway_id", "epoch", "isr", "replicas", "min_insync", "lease"]);

export function parseAuthorityRecord(text: string): RecordParse {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, problem: "not JSON" };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return { ok: false, problem: "not a JSON object" };
  const raw = value as Record<string, unknown>;
  const unknown = Object.keys(raw).filter((k) => !FIELDS.has(k));
  if (unknown.length > 0) return { ok: false, problem: `unknown field(s) ${unknown.join(", ")}` };
  if (raw.format !== AUTHORITY_RECORD_FORMAT)
    return { ok: false, problem: `format ${JSON.stringify(raw.format)}, this build reads ${AUTHORITY_RECORD_FORMAT}` };
  if (!isValidGatewayId(raw.gateway_id)) return { ok: false, problem: `gateway_id ${JSON.stringify(raw.gateway_id)} is not a gateway id` };
  if (!Number.isSafeInteger(raw.epoch) || (raw.epoch as number) < 1)
    return { ok: false, problem: `epoch ${JSON.stringify(raw.epoch)} is not a positive integer` };
  if (!Array.isArray(raw.isr) || raw.isr.length === 0 || raw.isr.length > MAX_ISR)
    return { ok: false, problem: `isr must list 1 to ${MAX_ISR} gateway ids` };
  if (!raw.isr.every(isValidGatewayId)) return { ok: false, problem: "isr lists something that is not a gateway id" };
  const isr = raw.isr as string[];
  if (new Set(isr).size !== isr.length) return { ok: false, problem: "isr lists a gateway twice" };
  if (isr[0] !== raw.gateway_id) return { ok: false, problem: "isr must start with the authority" };
  if (!Array.isArray(raw.replicas) || raw.replicas.length === 0 || raw.replicas.length > MAX_ISR || !raw.replicas.every(isValidGatewayId))
    return { ok: false, problem: `replicas must list 1 to ${MAX_ISR} gateway ids` };
  const replicas = raw.replicas as string[];
  if (new Set(replicas).size !== replicas.length) return { ok: false, problem: "replicas lists a gateway twice" };
  if (!isr.every((g) => replicas.includes(g))) return { ok: false, problem: "isr lists a gateway that is not one of the replicas" };
  if (!Number.isSafeInteger(raw.min_insync) || (raw.min_insync as number) < 1 || (raw.min_insync as number) > replicas.length)
    return { ok: false, problem: `min_insync ${JSON.stringify(raw.min_insync)} is not from 1 to the number of replicas` };
  if (raw.lease !== null && !(typeof raw.lease === "string" && LEASE_ID_RE.test(raw.lease))) {
    return { ok: false, problem: `lease ${JSON.stringify(raw.lease)} is neither null nor a decimal lease id` };
  }
  return {
    ok: true,
    record: {
      gateway_id: raw.gateway_id,
      epoch: raw.epoch as number,
      isr: [...isr],
      replicas: [...replicas],
      min_insync: raw.min_insync as number,
      lease: raw.lease as string | null,
    },
  };
}

/** The newest authority this gateway already knows for the room (from its own durable state or an earlier record). */
export interface KnownAuthority {
  gateway_id: string;
  epoch: number;
}

export type RecordAssessment =
  | { kind: "adopt"; record: AuthorityRecord }
  /** No record and none known: the room is not coordinated (yet). */
  | { kind: "absent" }
  | { kind: "refuse"; problem: "malformed" | "epoch_regression" | "epoch_conflict" | "deleted"; message: string };

/**
 * Whether a record read from etcd (`text`, or null when the key is missing) may be adopted, given what
 * this gateway knows. A record that is not well formed, carries a lower epoch than known, names another
 * gateway for a known epoch, or has vanished (records are never deleted by Hermes) is refused: the caller
 * logs it and keeps what it knows.
 */
export function assessAuthorityRecord(known: KnownAuthority | null, text: string | null): RecordAssessment {
  if (text === null) {
    if (known === null) return { kind: "absent" };
    return {
      kind: "refuse",
      problem: "deleted",
      message: `the authority record is missing, but ${known.gateway_id}@${known.epoch} is known; keeping it`,
    };
  }
  const parsed = parseAuthorityRecord(text);
  if (!parsed.ok)
    return {
      kind: "refuse",
      problem: "malformed",
      message: `the authority record is not valid (${parsed.problem}); keeping what is known`,
    };
  const { record } = parsed;
  if (known !== null && record.epoch < known.epoch) {
    return {
      kind: "refuse",
      problem: "epoch_regression",
      message: `the authority record names epoch ${record.epoch}, below the known ${known.gateway_id}@${known.epoch}; epochs only grow`,
    };
  }
  if (known !== null && record.epoch === known.epoch && record.gateway_id !== known.gateway_id) {
    return {
      kind: "refuse",
      problem: "epoch_conflict",
      message: `the authority record names ${record.gateway_id} for epoch ${record.epoch}, which ${known.gateway_id} holds`,
    };
  }
  return { kind: "adopt", record };
}
