/**
 * Canonical JSON: object keys sorted by UTF-16 code units (as `Array.prototype.sort`, the same order
 * as RFC 8785), no whitespace, strings and numbers as `JSON.stringify` writes them. Two gateways that
 * hold the same value produce the same bytes, which is what the hash chain relies on.
 *
 * Only JSON values are accepted: a non-finite number, a bigint, a function or a symbol throws, so a
 * value that would not survive the wire can never be hashed. `undefined` object members are
 * dropped (as JSON.stringify does), so `canonicalJson(x) === canonicalJson(JSON.parse(JSON.stringify(x)))`.
 */
export function canonicalJson(value: unknown): string {
  return write(value, "$");
}

export class NotJsonError extends Error {
  override readonly name = "NotJsonError";
}

function write(value: unknown, path: string): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new NotJsonError(`${path} is ${value}, which JSON cannot hold`);
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) {
        return `[${value.map((item, i) => (item === undefined ? "null" : write(item, `${path}[${i}]`))).join(",")}]`;
      }
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record)
        .filter((key) => record[key] !== undefined)
        .sort();
      return `{${keys.map((key) => `${JSON.stringify(key)}:${write(record[key], `${path}.${key}`)}`).join(",")}}`;
    }
    default:
      throw new NotJsonError(`${path} is a ${typeof value}, which JSON cannot hold`);
  }
}

/** Size in UTF-8 bytes, the unit of every byte limit of rooms. */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
