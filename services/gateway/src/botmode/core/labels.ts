import { HermesError } from "@hermes/common/pure";
import { messageLength } from "@hermes/contract";

/**
 * One rule for the short names people give things in Bot Mode (a display name, a section name, a
 * routine name): Unicode text, NFC-normalized, trimmed, 1–max code points, on one line with no
 * control characters (a name must not be able to fake a second line in a terminal listing) and no
 * text-direction marks, overrides or isolates (they make a listing show other text than is stored).
 * Joiners and variation selectors stay: emoji are built from them.
 */
export function checkLabel(value: unknown, field: string, max: number): string {
  const valid = `text of 1-${max} characters on one line, without control characters`;
  if (typeof value !== "string") {
    throw new HermesError("invalid_params", `${field}: must be ${valid} (got ${describeType(value)})`, { data: { field, valid } });
  }
  const text = value.normalize("NFC").trim();
  if (text.length === 0) {
    throw new HermesError("invalid_params", `${field}: is empty; it must be ${valid}`, { data: { field, valid } });
  }
  const length = messageLength(text);
  if (length > max) {
    throw new HermesError("invalid_params", `${field}: is ${length} characters; it must be ${valid}`, {
      data: { field, valid, limit: max, length },
    });
  }
  if (/[\p{Cc}\p{Zl}\p{Zp}\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u.test(text)) {
    throw new HermesError(
      "invalid_params",
      `${field}: contains a line break, a control character or a text-direction mark; it must be ${valid}`,
      {
        data: { field, valid },
      },
    );
  }
  return text;
}

/** What two names are compared as when they must be unique: case and Unicode form do not count. */
export function labelKey(label: string): string {
  return label.normalize("NFC").trim().toLowerCase();
}

/** `null`, `array` or the `typeof`, for messages about a value of the wrong type. */
export function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "an object";
  return typeof value === "string"
    ? `text ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`
    : `${typeof value} ${String(value)}`;
}
