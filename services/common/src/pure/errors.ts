/**
 * Every typed failure in Hermes Mesh carries a stable snake_case reason. The reason decides the
 * CLI exit code here, the gRPC status in the gRPC adapter (`../grpc-status.ts`, a table the type
 * checker holds complete), and (for room methods) travels as JSON-RPC `data.reason`. Add new
 * reasons here with their exit code, then give them a status there.
 */
export const REASONS = {
  // generic
  invalid_params: { exit: 2 },
  invalid_config: { exit: 2 },
  invalid_name: { exit: 2 },
  payload_too_large: { exit: 2 },
  not_found: { exit: 1 },
  already_exists: { exit: 2 },
  unauthenticated: { exit: 2 },
  refused: { exit: 2 },
  unavailable: { exit: 1 },
  timeout: { exit: 1 },
  internal: { exit: 1 },
  method_not_found: { exit: 2 },
  // storage
  database_busy: { exit: 1 },
  database_corrupt: { exit: 1 },
  unsupported_schema: { exit: 1 },
  // a write found no space (SQLITE_FULL, ENOSPC, EDQUOT): nothing was written; free space, retry
  disk_full: { exit: 1 },
  // profiles and identity
  profile_deleted: { exit: 1 },
  identity_collision: { exit: 2 },
  default_profile: { exit: 2 },
  // rooms
  authority_conflict: { exit: 2 },
  not_authority: { exit: 2 },
  epoch_regression: { exit: 2 },
  replica_gap: { exit: 2 },
  lineage_mismatch: { exit: 2 },
  hash_mismatch: { exit: 2 },
  latest_seq_regression: { exit: 2 },
  replica_quarantined: { exit: 2 },
  room_retired: { exit: 2 },
  room_disbanded: { exit: 2 },
  idempotency_conflict: { exit: 2 },
  cursor_conflict: { exit: 2 },
  confirm_required: { exit: 2 },
  limit_exceeded: { exit: 2 },
  // an operator stopped a room's discussion: the reason_code of the turn it cancelled
  discussion_stopped: { exit: 1 },
  // delivery: the typed failure reasons a calling bot branches on (docs/PROTOCOL.md "Errors")
  provider_auth_or_access: { exit: 1 },
  provider_quota_limit: { exit: 1 },
  provider_rate_limit: { exit: 1 },
  provider_server_error: { exit: 1 },
  context_overflow: { exit: 1 },
  missing_config: { exit: 1 },
  model_unavailable: { exit: 1 },
  runtime_offline: { exit: 1 },
  queued_expired: { exit: 1 },
  delivery_timeout: { exit: 1 },
  target_busy: { exit: 1 },
  unknown_target: { exit: 2 },
  ambiguous_target: { exit: 2 },
  slot_wait_timeout: { exit: 1 },
  unknown: { exit: 1 },
  // coordinator (etcd): unreachable (exit 2 at start: nothing runs without it), and the two retryable refusals of a leased authority
  coordinator_unavailable: { exit: 2 },
  not_enough_replicas: { exit: 1 },
  lease_lost: { exit: 1 },
} as const satisfies Record<string, { exit: 1 | 2 }>;

export type ErrorReason = keyof typeof REASONS;

export function isErrorReason(value: unknown): value is ErrorReason {
  return typeof value === "string" && Object.hasOwn(REASONS, value);
}

export interface HermesErrorOptions {
  /** Extra machine-readable detail (e.g. `authority`, `teammates`, `limit`). Travels with the error. */
  data?: Record<string, unknown>;
  cause?: unknown;
}

/** The one error type crossing module and process boundaries. */
export class HermesError extends Error {
  override readonly name = "HermesError";
  readonly reason: ErrorReason;
  readonly data: Record<string, unknown>;

  constructor(reason: ErrorReason, message: string, options: HermesErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
    this.data = options.data ?? {};
  }

  /** CLI exit code: 1 runtime/peer/transport failure, 2 usage error or refusal. */
  get exitCode(): 1 | 2 {
    return REASONS[this.reason].exit;
  }

  toJSON(): { reason: ErrorReason; message: string; data: Record<string, unknown> } {
    return { reason: this.reason, message: this.message, data: this.data };
  }
}

function describeThrown(err: unknown): string {
  try {
    return err instanceof Error ? String(err.message) : String(err);
  } catch {
    return "a value that cannot be printed was thrown"; // e.g. Object.create(null)
  }
}

/**
 * Reads a transport's own error type (a grpc-js ServiceError) as the HermesError it carries, or
 * answers undefined for anything else. This module knows no transport: each adapter adds its
 * reader when it is loaded (`../grpc-status.ts`), so a failed call becomes its reason wherever it
 * is caught.
 */
export type ForeignErrorReader = (err: unknown) => HermesError | undefined;
const foreignErrorReaders: ForeignErrorReader[] = [];

export function addForeignErrorReader(reader: ForeignErrorReader): void {
  if (!foreignErrorReaders.includes(reader)) foreignErrorReaders.push(reader);
}

/** Wraps anything thrown into a HermesError, keeping the original as `cause`. */
export function toHermesError(err: unknown): HermesError {
  if (err instanceof HermesError) return err;
  for (const read of foreignErrorReaders) {
    const known = read(err);
    if (known) return known;
  }
  return new HermesError("internal", describeThrown(err), { cause: err });
}

/**
 * Trailers share one HTTP/2 header block, which a client refuses past its size limit (the call
 * then never completes), so error text and data are bounded. A message that echoes a long input
 * keeps its first characters.
 */
export const MAX_ERROR_MESSAGE_CHARS = 2000;
const MAX_ERROR_DATA_BYTES = 4096;
/** Strings in `data` are cut to this length when the whole of it is over MAX_ERROR_DATA_BYTES. */
const SHORTENED_DATA_STRING_CHARS = 200;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `text` cut to `max` characters (saying how many were left out) and made well-formed UTF-16. */
export function boundedText(text: string, max: number): string {
  const cut = text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
  // A lone surrogate (from the cut, or from JSON such as "\ud800") has no UTF-8 form: grpc-js's
  // percent-encoding of `details` would throw on it.
  return cut.replace(LONE_SURROGATE, "\uFFFD");
}

function jsonText(value: unknown, replacer?: (key: string, value: unknown) => unknown): string | undefined {
  try {
    return JSON.stringify(value, replacer);
  } catch {
    return undefined; // a BigInt or a cycle in `data`: not JSON
  }
}

/**
 * `data` as JSON object text of at most MAX_ERROR_DATA_BYTES bytes of UTF-8, or "" when there is
 * none. Too big: long strings are shortened; still too big (or not JSON): a note says it was left out.
 */
export function errorDataJson(data: Record<string, unknown>): string {
  if (Object.keys(data).length === 0) return "";
  const fits = (json: string | undefined): json is string => json !== undefined && Buffer.byteLength(json) <= MAX_ERROR_DATA_BYTES;
  const whole = jsonText(data);
  if (fits(whole)) return whole;
  const shortened = jsonText(data, (_key, value) =>
    typeof value === "string" && value.length > SHORTENED_DATA_STRING_CHARS ? boundedText(value, SHORTENED_DATA_STRING_CHARS) : value,
  );
  if (fits(shortened)) return shortened;
  return JSON.stringify({ data_omitted: `the error's detail was left out: ${whole === undefined ? "not JSON" : "too large"}` });
}

/** The `data` object a JSON text stands for; anything else (absent, not JSON, not an object) is `{}`. */
export function parseErrorData(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const parsed = JSON.parse(text) as unknown;
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** A typed error as plain fields, for frames that carry errors as data (relay frames, tunnel answers). */
export interface WireError {
  reason: string;
  message: string;
  /** JSON object text of `data`; empty when there is none. */
  data_json: string;
}

export function toWireError(err: unknown): WireError {
  const e = toHermesError(err);
  return { reason: e.reason, message: e.message, data_json: errorDataJson(e.data) };
}

/**
 * The HermesError a WireError stands for. A reason this build does not know becomes `fallback`,
 * keeping the text and the reason that was sent (`data.sent_reason`).
 */
export function fromWireError(info: WireError | undefined, fallback: ErrorReason = "unknown"): HermesError {
  const data = parseErrorData(info?.data_json);
  const reason = info && isErrorReason(info.reason) ? info.reason : fallback;
  const message = info?.message || "no error text was sent";
  return new HermesError(reason, message, { data: info && reason !== info.reason ? { ...data, sent_reason: info.reason } : data });
}
