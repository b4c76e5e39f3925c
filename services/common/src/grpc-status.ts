import { status as GrpcStatus, Metadata, type ServiceError } from "@grpc/grpc-js";
import {
  addForeignErrorReader,
  boundedText,
  type ErrorReason,
  errorDataJson,
  HermesError,
  isErrorReason,
  MAX_ERROR_MESSAGE_CHARS,
  parseErrorData,
  toHermesError,
} from "./pure/errors.js";

/**
 * The gRPC status each reason is answered with. The reasons themselves (and their exit codes) are
 * transport-neutral and live in `pure/errors.ts`; `satisfies` makes a reason without a status a
 * type error here.
 */
export const GRPC_STATUS_OF_REASON = {
  // generic
  invalid_params: GrpcStatus.INVALID_ARGUMENT,
  invalid_config: GrpcStatus.INVALID_ARGUMENT,
  invalid_name: GrpcStatus.INVALID_ARGUMENT,
  payload_too_large: GrpcStatus.INVALID_ARGUMENT,
  not_found: GrpcStatus.NOT_FOUND,
  already_exists: GrpcStatus.ALREADY_EXISTS,
  unauthenticated: GrpcStatus.UNAUTHENTICATED,
  refused: GrpcStatus.FAILED_PRECONDITION,
  unavailable: GrpcStatus.UNAVAILABLE,
  timeout: GrpcStatus.DEADLINE_EXCEEDED,
  internal: GrpcStatus.INTERNAL,
  method_not_found: GrpcStatus.UNIMPLEMENTED,
  // storage
  database_busy: GrpcStatus.UNAVAILABLE,
  database_corrupt: GrpcStatus.DATA_LOSS,
  unsupported_schema: GrpcStatus.FAILED_PRECONDITION,
  // a write found no space
  disk_full: GrpcStatus.RESOURCE_EXHAUSTED,
  // profiles and identity
  profile_deleted: GrpcStatus.NOT_FOUND,
  identity_collision: GrpcStatus.ALREADY_EXISTS,
  default_profile: GrpcStatus.FAILED_PRECONDITION,
  // rooms
  authority_conflict: GrpcStatus.FAILED_PRECONDITION,
  not_authority: GrpcStatus.FAILED_PRECONDITION,
  epoch_regression: GrpcStatus.FAILED_PRECONDITION,
  replica_gap: GrpcStatus.FAILED_PRECONDITION,
  lineage_mismatch: GrpcStatus.FAILED_PRECONDITION,
  hash_mismatch: GrpcStatus.DATA_LOSS,
  latest_seq_regression: GrpcStatus.FAILED_PRECONDITION,
  replica_quarantined: GrpcStatus.FAILED_PRECONDITION,
  room_retired: GrpcStatus.FAILED_PRECONDITION,
  room_disbanded: GrpcStatus.FAILED_PRECONDITION,
  idempotency_conflict: GrpcStatus.ALREADY_EXISTS,
  cursor_conflict: GrpcStatus.ABORTED,
  confirm_required: GrpcStatus.FAILED_PRECONDITION,
  limit_exceeded: GrpcStatus.RESOURCE_EXHAUSTED,
  // an operator stopped a room's discussion
  discussion_stopped: GrpcStatus.CANCELLED,
  // delivery
  provider_auth_or_access: GrpcStatus.PERMISSION_DENIED,
  provider_quota_limit: GrpcStatus.RESOURCE_EXHAUSTED,
  provider_rate_limit: GrpcStatus.RESOURCE_EXHAUSTED,
  provider_server_error: GrpcStatus.UNAVAILABLE,
  context_overflow: GrpcStatus.OUT_OF_RANGE,
  missing_config: GrpcStatus.FAILED_PRECONDITION,
  model_unavailable: GrpcStatus.NOT_FOUND,
  runtime_offline: GrpcStatus.UNAVAILABLE,
  queued_expired: GrpcStatus.DEADLINE_EXCEEDED,
  delivery_timeout: GrpcStatus.DEADLINE_EXCEEDED,
  target_busy: GrpcStatus.RESOURCE_EXHAUSTED,
  unknown_target: GrpcStatus.NOT_FOUND,
  ambiguous_target: GrpcStatus.INVALID_ARGUMENT,
  slot_wait_timeout: GrpcStatus.RESOURCE_EXHAUSTED,
  unknown: GrpcStatus.UNKNOWN,
  // coordinator
  coordinator_unavailable: GrpcStatus.UNAVAILABLE,
  not_enough_replicas: GrpcStatus.UNAVAILABLE,
  lease_lost: GrpcStatus.UNAVAILABLE,
} as const satisfies Record<ErrorReason, GrpcStatus>;

export const REASON_METADATA_KEY = "hermes-reason";
/**
 * `data` as UTF-8 JSON in a binary (`-bin`, base64 on the wire) trailer: text trailers may only
 * hold printable ASCII, and a name such as `josé` echoed into `data` must survive.
 */
export const DATA_METADATA_KEY = "hermes-error-data-bin";
/** The ASCII text trailer earlier builds sent `data` in; still read from older peers. */
const LEGACY_DATA_METADATA_KEY = "hermes-error-data";

/**
 * HermesError → grpc-js ServiceError: status from GRPC_STATUS_OF_REASON, reason and data in trailers.
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
    return { code: GRPC_STATUS_OF_REASON[e.reason], details: boundedText(e.message, MAX_ERROR_MESSAGE_CHARS), metadata };
  } catch {
    const metadata = new Metadata();
    metadata.set(REASON_METADATA_KEY, "internal");
    return { code: GrpcStatus.INTERNAL, details: "the server failed and its error could not be encoded", metadata };
  }
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

function isServiceError(err: unknown): err is ServiceError {
  const candidate = err as Partial<ServiceError> | null | undefined;
  return !!candidate && typeof candidate.code === "number" && candidate.metadata instanceof Metadata;
}

// A ServiceError caught anywhere (a stream's `error` event, a failed call) becomes the reason its
// server sent when it is passed to toHermesError or toWireError.
addForeignErrorReader((err) => (isServiceError(err) ? fromServiceError(err) : undefined));
