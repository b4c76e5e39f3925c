/**
 * Every typed failure in Hermes Mesh carries a stable snake_case reason. The reason decides the
 * CLI exit code here, the gRPC status in the gRPC adapter (`services/common/src/grpc-status.ts`, a
 * table the type checker holds complete), and travels with the error on every wire (gRPC trailers,
 * relay frames, JSON-RPC `data.reason`). Add new reasons here with their exit code, then give them
 * a status there.
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

/**
 * The one error type crossing module and process boundaries. Its wire form is `{reason, message,
 * data}` (`toJSON`); reading a transport's errors back and the size-bounded wire codec are in
 * `@hermes/common/pure`.
 */
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
