import type { ErrorReason } from "@hermes/common/pure";
import { type DeliveryReason, isDeliveryReason } from "@hermes/contract";

/**
 * How a failure becomes the delivery reason its receipt carries (the reasons themselves are
 * @hermes/contract's RECEIPT_REASONS): a provider's answer is classified from its status and words
 * (classifyProviderError), a platform error is mapped by its reason (deliveryReasonFor). Every
 * failed attempt, turn or hop is recorded through these two functions and nowhere else.
 */

/**
 * Platform errors that are not provider failures, mapped onto the delivery reasons a calling bot can
 * branch on. Reasons a receipt carries as they are (the twelve delivery reasons, and the refusals
 * `unknown_target` / `idempotency_conflict` a later hop may end a delivery with) need no entry.
 */
const PLATFORM_REASONS: Partial<Record<ErrorReason, DeliveryReason>> = {
  // No warm-agent slot freed up in time: the target is too busy to start the turn (never retried).
  slot_wait_timeout: "target_busy",
  // A config.yaml that does not validate cannot run a turn until someone fixes it.
  invalid_config: "missing_config",
  // The target's gateway (or a peer) was not there to run it.
  unavailable: "runtime_offline",
  // A hop (a peer's Deliver, a relay answer) did not come back in time.
  timeout: "delivery_timeout",
  // A peer that refuses our key: access, not a transient failure.
  unauthenticated: "provider_auth_or_access",
};

/** The delivery reason of an error's reason: itself when a receipt carries it, its platform mapping, else `unknown`. */
export function deliveryReasonFor(reason: ErrorReason): DeliveryReason {
  return isDeliveryReason(reason) ? reason : (PLATFORM_REASONS[reason] ?? "unknown");
}

/** The subset a provider failure can classify to (the platform reasons come from the delivery machinery). */
export type ProviderFailureReason =
  | "provider_auth_or_access"
  | "provider_quota_limit"
  | "provider_rate_limit"
  | "provider_server_error"
  | "context_overflow"
  | "missing_config"
  | "model_unavailable"
  | "unknown";

/** What a provider told us about a failure. Any field may be missing; `message` is the provider's own text. */
export interface ProviderErrorFacts {
  http_status?: number | undefined;
  /** The provider's error code: a string such as "invalid_api_key", or a number some proxies send instead of a status. */
  code?: string | number | null | undefined;
  /** The provider's error type, e.g. "authentication_error", "overloaded_error". */
  type?: string | null | undefined;
  message: string;
}

// A status number only counts when the text says it is one ("error code: 429", "status code 503",
// "HTTP 401", "HTTP/1.1 500", "status=402"), so prose such as "processed 500 items" never matches.
const STATUS = String.raw`(?:error[ _-]?code|status[ _-]?code|http(?:/[\d.]+)?|status)["']?\s*[:=]?\s*`;

function statusIn(codes: string): RegExp {
  return new RegExp(String.raw`\b${STATUS}(?:${codes})\b`, "i");
}

interface Rule {
  reason: ProviderFailureReason;
  statuses: (status: number) => boolean;
  patterns: RegExp[];
}

/**
 * First match wins, in this order (as upstream's bot_failure_reasons): auth > quota > rate limit >
 * server error > context overflow > missing config > model unavailable > unknown. The order matters:
 * OpenAI reports an exhausted quota as HTTP 429 `insufficient_quota`, which must read as quota (never
 * retried), not as a rate limit (retried). Patterns use word boundaries so "author", "quotation" or
 * "rebalance" do not match.
 */
const RULES: readonly Rule[] = [
  {
    reason: "provider_auth_or_access",
    statuses: (s) => s === 401 || s === 403,
    patterns: [
      statusIn("401|403"),
      /\bauthentication[_ ]?(?:error|failed|required)\b/i,
      /\b(?:invalid|incorrect|wrong|expired|revoked)[_ ](?:x-)?api[_ -]?key\b/i,
      /\bapi[_ -]?key\b[^.\n]{0,40}?\b(?:invalid|incorrect|expired|revoked|not valid)\b/i,
      /\bunauthori[sz]ed\b/i,
      /\bpermission[_ ](?:error|denied)\b/i,
      /\baccess[_ ](?:denied|forbidden|terminated)\b/i,
    ],
  },
  {
    reason: "provider_quota_limit",
    statuses: (s) => s === 402,
    patterns: [
      statusIn("402"),
      /\binsufficient[_ ](?:quota|funds|credits?|balance)\b/i,
      /\bquotas?\b/i,
      /\bout of (?:funds|credits?)\b/i,
      /\b(?:credit|account) balance\b/i,
      /\bbalance (?:is )?(?:too low|insufficient|exhausted|depleted)\b/i,
      /\b(?:low|negative|zero|insufficient) balance\b/i,
      /\bpayment[_ ]required\b/i,
      /\bbilling (?:hard )?limit\b/i,
      /\bcheck your plan and billing\b/i,
    ],
  },
  {
    reason: "provider_rate_limit",
    statuses: (s) => s === 429,
    patterns: [statusIn("429"), /\brate[_ -]?limit(?:ed|s|_exceeded)?\b/i, /\btoo many requests\b/i, /\bthrottl(?:ed|ing)\b/i],
  },
  {
    reason: "provider_server_error",
    statuses: (s) => s >= 500 && s <= 599,
    patterns: [
      statusIn("5\\d\\d"),
      /\b(?:internal[_ ])?server[_ ]error\b/i,
      /\boverloaded(?:_error)?\b/i,
      /\bservice[_ ]unavailable\b/i,
      /\bbad gateway\b/i,
      /\bgateway[_ ]time-?out\b/i,
      /\btemporarily unavailable\b/i,
    ],
  },
  {
    reason: "context_overflow",
    statuses: () => false,
    patterns: [
      /\bcontext[_ ]length(?:[_ ]exceeded)?\b/i,
      /\bmaximum context\b/i,
      /\bcontext window\b/i,
      /\bprompt is too long\b/i,
      /\binput is too long\b/i,
      /\breduce the length of the messages\b/i,
      /\bexceeds? the (?:model'?s? )?(?:maximum )?context\b/i,
    ],
  },
  {
    reason: "missing_config",
    statuses: () => false,
    patterns: [
      /\bno (?:llm |model )?provider(?: is)? configured\b/i,
      /\bmissing[_ ]config(?:uration)?\b/i,
      /\bno access token\b/i,
      /\bno api[_ ]key(?: (?:is )?(?:configured|set|provided))?\b/i,
      /\bapi[_ ]key (?:is )?(?:missing|not set|not configured)\b/i,
      /\bmissing api[_ ]key\b/i,
    ],
  },
  {
    reason: "model_unavailable",
    statuses: () => false,
    patterns: [
      /\bmodel[_ ]not[_ ]found\b/i,
      /\bmodel\b[^.\n]{0,100}?\b(?:not found|does not exist|doesn't exist|is not available|not available|is not supported|unavailable)\b/i,
      /\b(?:unknown|invalid|unsupported) model\b/i,
      /\bno such model\b/i,
      /\bno endpoints found for\b/i,
    ],
  },
];

/** A numeric `code` some proxies send in place of the HTTP status (e.g. OpenRouter's `{code: 402}`). */
function statusFromCode(code: ProviderErrorFacts["code"]): number | undefined {
  const n = typeof code === "number" ? code : typeof code === "string" && /^\d{3}$/.test(code.trim()) ? Number(code) : Number.NaN;
  return Number.isInteger(n) && n >= 100 && n <= 599 ? n : undefined;
}

/**
 * Maps a provider failure to its delivery reason. Pure and total: any input (even an empty message) gets a
 * reason, `unknown` when nothing matches. The caller keeps the provider's text next to the reason.
 */
export function classifyProviderError(facts: ProviderErrorFacts): ProviderFailureReason {
  const statuses = [facts.http_status, statusFromCode(facts.code)].filter((s): s is number => typeof s === "number");
  const text = [facts.code, facts.type, facts.message].filter((part) => part !== undefined && part !== null && part !== "").join(" ");
  for (const rule of RULES) {
    if (statuses.some(rule.statuses)) return rule.reason;
    if (rule.patterns.some((pattern) => pattern.test(text))) return rule.reason;
  }
  return "unknown";
}
