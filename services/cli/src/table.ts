/**
 * The CLI's plain tables, padded by the terminal columns a cell takes, so that they line up when a
 * cell holds a display name or a section name with emoji or fullwidth letters. `String.length`
 * counts UTF-16 units: 1 for "ｇ" (2 columns), 2 for "é" written as e + combining accent
 * (1 column), 5 for 👩‍💻 (2 columns).
 */

const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/** An emoji drawn as a picture (two columns): one with emoji presentation, or any pictograph asked for as emoji (U+FE0F). */
const EMOJI_PICTURE = /\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F/u;
const ZERO_WIDTH = /^[\p{Mn}\p{Me}\p{Cf}\p{Cc}]$/u;

/** Code point ranges of the East Asian Wide (W) and Fullwidth (F) characters that terminals draw two columns wide. */
const WIDE_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f], // Hangul Jamo initials
  [0x2e80, 0x303e], // CJK radicals, Kangxi, CJK symbols and punctuation
  [0x3041, 0x33ff], // Hiragana, Katakana, Bopomofo, CJK compatibility
  [0x3400, 0x4dbf], // CJK extension A
  [0x4e00, 0x9fff], // CJK unified ideographs
  [0xa000, 0xa4cf], // Yi
  [0xac00, 0xd7a3], // Hangul syllables
  [0xf900, 0xfaff], // CJK compatibility ideographs
  [0xfe30, 0xfe4f], // CJK compatibility forms
  [0xff00, 0xff60], // Fullwidth forms
  [0xffe0, 0xffe6], // Fullwidth signs
  [0x20000, 0x2fffd], // CJK extensions B and later
  [0x30000, 0x3fffd],
];

function isWide(codePoint: number): boolean {
  return WIDE_RANGES.some(([from, to]) => codePoint >= from && codePoint <= to);
}

function graphemeWidth(grapheme: string): number {
  if (EMOJI_PICTURE.test(grapheme)) return 2;
  const first = String.fromCodePoint(grapheme.codePointAt(0)!);
  if (ZERO_WIDTH.test(first)) return 0;
  return isWide(first.codePointAt(0)!) ? 2 : 1;
}

/** The number of terminal columns `text` takes (one line, no escape sequences). */
export function displayWidth(text: string): number {
  let width = 0;
  for (const { segment } of GRAPHEMES.segment(text)) width += graphemeWidth(segment);
  return width;
}

function padToWidth(text: string, columns: number): string {
  return text + " ".repeat(Math.max(0, columns - displayWidth(text)));
}

/** A plain table: columns padded to their widest cell, in terminal columns (emoji and fullwidth letters take two). */
export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => displayWidth(r[i] ?? ""))));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : padToWidth(c, widths[i]!))).join("  ")).join("\n");
}
