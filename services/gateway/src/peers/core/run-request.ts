import { createHash } from "node:crypto";
import { HermesError } from "@hermes/common/pure";
import { assertProfileName, DEFAULT_PROFILE, GATEWAY_ID_RULE, messageLength, PROFILE_NAME_RULE } from "@hermes/contract";
import { z } from "zod";

/** Longest peer message, in characters (code points): a long task description, not a file transfer. */
export const PEER_INPUT_LIMIT_CHARS = 64_000;
/** Explicit idempotency keys: 1–255 characters, no CR, LF or NUL. */
export const IDEMPOTENCY_KEY_MAX_CHARS = 255;
const SENDER_NAME_MAX_CHARS = 200;

/** A validated request to run one turn in a canonical Bot Chat of this gateway. */
export interface RunRequest {
  /** The profile as the peer named it (a name or a former name); `default` when it named none. */
  profile: string;
  input: string;
  sender_profile: string;
  sender_gateway: string;
  sender_name: string;
  idempotency_key: string | null;
}

/** What arrives on the wire (every field a string; empty means "not given"). */
export interface RawRunRequest {
  profile: string;
  input: string;
  sender_profile: string;
  sender_gateway: string;
  sender_name: string;
  idempotency_key: string;
}

/** An explicit idempotency key, or null when none was given (then every call is a new run). */
export function parseIdempotencyKey(raw: string | undefined): string | null {
  if (raw === undefined || raw === "") return null;
  const length = messageLength(raw);
  if (length > IDEMPOTENCY_KEY_MAX_CHARS) {
    throw new HermesError(
      "invalid_params",
      `the idempotency key is ${length} characters; the limit is ${IDEMPOTENCY_KEY_MAX_CHARS}. Use a shorter stable key, e.g. a ticket id`,
      { data: { limit: IDEMPOTENCY_KEY_MAX_CHARS, length } },
    );
  }
  if (/[\r\n\0]/.test(raw)) {
    throw new HermesError("invalid_params", "the idempotency key must not contain CR, LF or NUL characters", {
      data: { field: "idempotency_key" },
    });
  }
  return raw;
}

/** The message of a dm or run: text, not blank, at most PEER_INPUT_LIMIT_CHARS. Never trimmed or interpreted. */
export function assertPeerInput(input: unknown): string {
  if (typeof input !== "string" || input.trim().length === 0) {
    throw new HermesError("invalid_params", "the message is empty: pipe the text in, e.g. hermes peer dm NAME < message.txt");
  }
  const length = messageLength(input);
  if (length > PEER_INPUT_LIMIT_CHARS) {
    throw new HermesError(
      "payload_too_large",
      `the message is ${length.toLocaleString("en-US")} characters; the limit is ${PEER_INPUT_LIMIT_CHARS.toLocaleString("en-US")}. Shorten it or split the task`,
      { data: { limit: PEER_INPUT_LIMIT_CHARS, length } },
    );
  }
  return input;
}

/** The wire shape; names, the message and the key get their own typed checks below. */
const rawRunRequestSchema = z.object({
  profile: z.string(),
  input: z.string(),
  sender_profile: z.string().min(1, "sender_profile is required: which bot sends it (CLI: -p NAME, default `default`)"),
  sender_gateway: z
    .string()
    .regex(new RegExp(GATEWAY_ID_RULE), "the sender gateway id: letters, digits, '.', '_' and '-' (1-64 characters)"),
  sender_name: z.string().refine((v) => messageLength(v) <= SENDER_NAME_MAX_CHARS, `at most ${SENDER_NAME_MAX_CHARS} characters`),
  idempotency_key: z.string(),
});

/** Validates a request at the edge; every refusal is typed (exit 2 at the calling CLI). */
export function parseRunRequest(value: RawRunRequest | unknown): RunRequest {
  const parsed = rawRunRequestSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.map(String).join(".") || "request";
    throw new HermesError("invalid_params", `invalid ${field}: ${issue.message}`, { data: { field } });
  }
  const raw = parsed.data;
  return {
    profile: raw.profile === "" ? DEFAULT_PROFILE : assertProfileName(raw.profile, "target profile"),
    input: assertPeerInput(raw.input),
    sender_profile: assertProfileName(raw.sender_profile, "sender profile"),
    sender_gateway: raw.sender_gateway,
    sender_name: raw.sender_name,
    idempotency_key: parseIdempotencyKey(raw.idempotency_key),
  };
}

/**
 * Whose keys a key lives among: the sender (`<profile>@<gateway>`). Two senders that happen to
 * pick the same key never collide.
 */
export function idempotencyScope(request: Pick<RunRequest, "sender_profile" | "sender_gateway">): string {
  return `${request.sender_profile}@${request.sender_gateway}`;
}

/**
 * "The same input": the target profile (as resolved here, so a former name matches) and the message.
 * The display name is attribution only and left out; so is dm versus run, since the turn is the same.
 */
export function runFingerprint(resolvedProfile: string, input: string): string {
  return createHash("sha256")
    .update(JSON.stringify([resolvedProfile, input]), "utf8")
    .digest("hex");
}

export type IdempotencyDecision = { kind: "create" } | { kind: "replay"; run_id: string };

/**
 * Same key + same input → replay the original run; same key + another input → idempotency_conflict
 * (exit 2 at the caller, nothing runs); unseen key → create.
 */
export function decideIdempotency(
  existing: { run_id: string; fingerprint: string } | undefined,
  fingerprint: string,
  key: string,
): IdempotencyDecision {
  if (!existing) return { kind: "create" };
  if (existing.fingerprint === fingerprint) return { kind: "replay", run_id: existing.run_id };
  throw new HermesError(
    "idempotency_conflict",
    `idempotency key ${JSON.stringify(key)} was already used for run ${existing.run_id} with another message or profile; use a new key for new work`,
    { data: { idempotency_key: key, run_id: existing.run_id } },
  );
}

/** `<peer>` or `<peer>/<profile>` as the CLI takes it; the profile is `default` when omitted. */
export function parsePeerTarget(spec: string): { peer: string; profile: string } {
  const slash = spec.indexOf("/");
  const peer = slash === -1 ? spec : spec.slice(0, slash);
  const profile = slash === -1 ? DEFAULT_PROFILE : spec.slice(slash + 1);
  assertProfileName(peer, "peer name");
  if (slash !== -1 && profile === "") {
    throw new HermesError(
      "invalid_params",
      `nothing after the "/" in ${JSON.stringify(spec)}: write <peer>/<profile>, or <peer> for its default bot`,
      {
        data: { rule: PROFILE_NAME_RULE },
      },
    );
  }
  assertProfileName(profile, "profile name");
  return { peer, profile };
}
