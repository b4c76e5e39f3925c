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
