import { HermesError } from "@hermes/common/pure";

/**
 * A Buffer with Node's own string writers (what `Buffer#write` calls for each encoding), used
 * without `Buffer#write`'s argument handling, which costs more than copying the short strings the
 * hash input and a tuple are written from, piece by piece, for every append.
 */
export type TextBuffer = Buffer & {
  utf8Write(text: string, offset: number): number;
  latin1Write(text: string, offset: number): number;
};

export function textBuffer(size: number): TextBuffer {
  return Buffer.allocUnsafe(size) as TextBuffer;
}

/** Strings longer than this go to Node's writer at once: its call costs less than the loop then. */
const SHORT_TEXT_UNITS = 32;

/**
 * Writes `text` as UTF-8 at `at`; returns the end. A short ASCII text (an event id, the usual
 * case) is copied unit by unit here: a call into Node's writer costs about three times as much
 * as that loop for an id. Anything else is written by Node's writer.
 */
export function writeShortText(buffer: TextBuffer, at: number, text: string): number {
  if (text.length > SHORT_TEXT_UNITS) return at + buffer.utf8Write(text, at);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // Not ASCII: rewritten from the start by the writer.
    if (unit >= 0x80) return at + buffer.utf8Write(text, at);
    buffer[at + i] = unit;
  }
  return at + text.length;
}

/** Copies `bytes` to `at`; returns the end. */
export function copyBytes(buffer: Uint8Array, at: number, bytes: Uint8Array): number {
  buffer.set(bytes, at);
  return at + bytes.length;
}

/** Most bytes writeSafeInteger writes. */
export const SAFE_INTEGER_MAX_BYTES = 17;

/** Writes `n` (a safe integer) in decimal, as JSON.stringify prints it, at `at`; returns the end. */
export function writeSafeInteger(buffer: Buffer, at: number, n: number): number {
  if (!Number.isSafeInteger(n)) throw new HermesError("internal", `${n} is not a safe integer`);
  if (n < 0) {
    buffer[at++] = 0x2d; // -
    n = -n;
  }
  let digits = 1;
  for (let rest = n; rest >= 10; rest = Math.floor(rest / 10)) digits++;
  let end = at + digits;
  for (let rest = n; end > at; rest = Math.floor(rest / 10)) buffer[--end] = 0x30 + (rest % 10);
  return at + digits;
}
