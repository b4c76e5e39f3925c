import { type ErrorReason, HermesError, isErrorReason } from "@hermes/contract";

/**
 * The typed error, its reasons and their exit codes are defined in @hermes/contract (they cross
 * every process boundary). They are exported here too, beside what this module adds (reading a
 * transport's errors, the wire codec), because every module of the daemons takes its errors from
 * @hermes/common: one definition, and no module needs a second import for them.
 */
export { type ErrorReason, HermesError, type HermesErrorOptions, isErrorReason, REASONS } from "@hermes/contract";

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
