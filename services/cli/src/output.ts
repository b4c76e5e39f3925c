import { HermesError, toHermesError } from "@hermes/common/client";

/** Prints data: JSON with --json, else the human rendering. */
export function emit(json: boolean, data: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(data, null, 2)}\n` : ensureNewline(human()));
}

function ensureNewline(text: string): string {
  return text.length === 0 || text.endsWith("\n") ? text : `${text}\n`;
}

/** A plain table: columns padded to their widest cell. */
export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")).join("\n");
}

/** Reports an error on stderr (JSON with --json) and returns the exit code it means. */
export function reportError(err: unknown, json: boolean): number {
  const e = err instanceof HermesError ? err : toHermesError(err);
  if (json) process.stderr.write(`${JSON.stringify({ error: e.toJSON() })}\n`);
  else process.stderr.write(`hermes: ${e.message}\n`);
  return e.exitCode;
}

export function warn(text: string): void {
  process.stderr.write(`⚠ ${text.replace(/\n/g, "\n  ")}\n`);
}
