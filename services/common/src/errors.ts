import { status as GrpcStatus, Metadata, type ServiceError } from "@grpc/grpc-js";

/**
 * Every typed failure in Hermes Mesh carries a stable snake_case reason. The reason decides the
 * gRPC status, the CLI exit code and (for room methods) travels as JSON-RPC `data.reason`.
 * Add new reasons here, with their status and exit code, so one table answers both.
 */
export const REASONS = {
  // generic
  invalid_params: { status: GrpcStatus.INVALID_ARGUMENT, exit: 2 },
  invalid_config: { status: GrpcStatus.INVALID_ARGUMENT, exit: 2 },
  invalid_name: { status: GrpcStatus.INVALID_ARGUMENT, exit: 2 },
  payload_too_large: { status: GrpcStatus.INVALID_ARGUMENT, exit: 2 },
  not_found: { status: GrpcStatus.NOT_FOUND, exit: 1 },
  already_exists: { status: GrpcStatus.ALREADY_EXISTS, exit: 2 },
  unauthenticated: { status: GrpcStatus.UNAUTHENTICATED, exit: 2 },
  refused: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  unavailable: { status: GrpcStatus.UNAVAILABLE, exit: 1 },
  timeout: { status: GrpcStatus.DEADLINE_EXCEEDED, exit: 1 },
  internal: { status: GrpcStatus.INTERNAL, exit: 1 },
  method_not_found: { status: GrpcStatus.UNIMPLEMENTED, exit: 2 },
  // storage
  database_busy: { status: GrpcStatus.UNAVAILABLE, exit: 1 },
  database_corrupt: { status: GrpcStatus.DATA_LOSS, exit: 1 },
  unsupported_schema: { status: GrpcStatus.FAILED_PRECONDITION, exit: 1 },
  // a write found no space (SQLITE_FULL, ENOSPC, EDQUOT): nothing was written; free space, retry
  disk_full: { status: GrpcStatus.RESOURCE_EXHAUSTED, exit: 1 },
  // profiles and identity
  profile_deleted: { status: GrpcStatus.NOT_FOUND, exit: 1 },
  identity_collision: { status: GrpcStatus.ALREADY_EXISTS, exit: 2 },
  default_profile: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  // rooms
  authority_conflict: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  not_authority: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  epoch_regression: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  replica_gap: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  lineage_mismatch: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  hash_mismatch: { status: GrpcStatus.DATA_LOSS, exit: 2 },
  latest_seq_regression: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  replica_quarantined: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  room_retired: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  room_disbanded: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  idempotency_conflict: { status: GrpcStatus.ALREADY_EXISTS, exit: 2 },
  cursor_conflict: { status: GrpcStatus.ABORTED, exit: 2 },
  confirm_required: { status: GrpcStatus.FAILED_PRECONDITION, exit: 2 },
  limit_exceeded: { status: GrpcStatus.RESOURCE_EXHAUSTED, exit: 2 },
  // an operator stopped a room's discussion: the reason_code of the turn it cancelled
  discussion_stopped: { status: GrpcStatus.CANCELLED, exit: 1 },
  // delivery: the typed failure reasons a calling bot branches on (docs/PROTOCOL.md "Errors")
  provider_auth_or_access: { status: GrpcStatus.PERMISSION_DENIED, exit: 1 },
  provider_quota_limit: { status: GrpcStatus.RESOURCE_EXHAUSTED, exit: 1 },
  provider_rate_limit: { status: GrpcStatus.RESOURCE_EXHAUSTED, exit: 1 },
  provider_server_error: { status: GrpcStatus.UNAVAILABLE, exit: 1 },
  context_overflow: { status: GrpcStatus.OUT_OF_RANGE, exit: 1 },
  missing_config: { status: GrpcStatus.FAILED_PRECONDITION, exit: 1 },
  model_unavailable: { status: GrpcStatus.NOT_FOUND, exit: 1 },
  runtime_offline: { status: GrpcStatus.UNAVAILABLE, exit: 1 },
  queued_expired: { status: GrpcStatus.DEADLINE_EXCEEDED, exit: 1 },
  delivery_timeout: { status: GrpcStatus.DEADLINE_EXCEEDED, exit: 1 },
  target_busy: { status: GrpcStatus.RESOURCE_EXHAUSTED, exit: 1 },
  unknown_target: { status: GrpcStatus.NOT_FOUND, exit: 2 },
  ambiguous_target: { status: GrpcStatus.INVALID_ARGUMENT, exit: 2 },
  slot_wait_timeout: { status: GrpcStatus.RESOURCE_EXHAUSTED, exit: 1 },
  unknown: { status: GrpcStatus.UNKNOWN, exit: 1 },
  // coordinator (etcd): unreachable (exit 2 at start: nothing runs without it), and the two retryable refusals of a leased authority
  coordinator_unavailable: { status: GrpcStatus.UNAVAILABLE, exit: 2 },
  not_enough_replicas: { status: GrpcStatus.UNAVAILABLE, exit: 1 },
  lease_lost: { status: GrpcStatus.UNAVAILABLE, exit: 1 },
} as const satisfies Record<string, { status: GrpcStatus; exit: 1 | 2 }>;

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

  get grpcStatus(): GrpcStatus {
    return REASONS[this.reason].status;
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

/** Wraps anything thrown into a HermesError, keeping the original as `cause`. */
export function toHermesError(err: unknown): HermesError {
  if (err instanceof HermesError) return err;
  const serviceError = err as Partial<ServiceError>;
  if (serviceError && typeof serviceError.code === "number" && serviceError.metadata instanceof Metadata) {
    return fromServiceError(serviceError as ServiceError);
  }
  return new HermesError("internal", describeThrown(err), { cause: err });
}

export const REASON_METADATA_KEY = "hermes-reason";
/**
 * `data` as UTF-8 JSON in a binary (`-bin`, base64 on the wire) trailer: text trailers may only
 * hold printable ASCII, and a name such as `josé` echoed into `data` must survive.
 */
export const DATA_METADATA_KEY = "hermes-error-data-bin";
/** The ASCII text trailer earlier builds sent `data` in; still read from older peers. */
const LEGACY_DATA_METADATA_KEY = "hermes-error-data";

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
function boundedText(text: string, max: number): string {
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
function errorDataJson(data: Record<string, unknown>): string {
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
function parseErrorData(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const parsed = JSON.parse(text) as unknown;
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * HermesError → grpc-js ServiceError: status from the reason table, reason and data in trailers.
 * Total: whatever was thrown, the answer can be sent (an error that cannot be encoded becomes a
 * plain `internal` one), so building an error answer never throws inside a handler.
 */
export function toServiceError(err: unknown): Partial<ServiceError> {
  try {
    const e = toHermesError(err);
    const metadata = new Metadata();
    metadata.set(REASON_METADATA_KEY, e.reason);
    const data = errorDataJson(e.data);
    if (data) metadata.set(DATA_METADATA_KEY, Buffer.from(data, "utf8"));
    return { code: e.grpcStatus, details: boundedText(e.message, MAX_ERROR_MESSAGE_CHARS), metadata };
  } catch {
    const metadata = new Metadata();
    metadata.set(REASON_METADATA_KEY, "internal");
    return { code: GrpcStatus.INTERNAL, details: "the server failed and its error could not be encoded", metadata };
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

const TRANSPORT_STATUSES = new Set<number>([GrpcStatus.UNAVAILABLE, GrpcStatus.DEADLINE_EXCEEDED, GrpcStatus.CANCELLED]);

function trailerText(value: string | Buffer | undefined): string | undefined {
  return Buffer.isBuffer(value) ? value.toString("utf8") : value;
}

/** grpc-js ServiceError → HermesError, restoring reason and data sent by a Hermes server. */
export function fromServiceError(err: ServiceError): HermesError {
  const reason = err.metadata?.get(REASON_METADATA_KEY)[0];
  const data = parseErrorData(trailerText(err.metadata?.get(DATA_METADATA_KEY)[0] ?? err.metadata?.get(LEGACY_DATA_METADATA_KEY)[0]));
  if (isErrorReason(reason)) return new HermesError(reason, err.details || err.message, { data, cause: err });
  if (err.code === GrpcStatus.UNAUTHENTICATED) return new HermesError("unauthenticated", err.details || err.message, { cause: err });
  if (err.code === GrpcStatus.UNIMPLEMENTED) return new HermesError("method_not_found", err.details || err.message, { cause: err });
  if (err.code === GrpcStatus.DEADLINE_EXCEEDED) return new HermesError("timeout", err.details || err.message, { cause: err });
  if (TRANSPORT_STATUSES.has(err.code)) return new HermesError("unavailable", err.details || err.message, { cause: err });
  return new HermesError("internal", err.details || err.message, { cause: err });
}
