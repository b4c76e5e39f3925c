import { HermesError, plainTransportText, toHermesError } from "@hermes/common/client";

/** Prints data: JSON with --json, else the human rendering. */
export function emit(json: boolean, data: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(data, null, 2)}\n` : ensureNewline(human()));
}

function ensureNewline(text: string): string {
  return text.length === 0 || text.endsWith("\n") ? text : `${text}\n`;
}

export { table } from "./table.js";

/**
 * The exit code of a failure (0/1/2 as `hermes --help` states): the reason's, except that a peer
 * refusing the key we hold for it (`unauthenticated` naming the peer in `data.peer`) is a peer
 * failure, 1, like a missing key: the command was right, the stored key is not. The same reason
 * from the gateway being commanded (no or a wrong --key) stays a refusal, 2.
 */
function exitCodeOf(e: HermesError): 1 | 2 {
  return e.reason === "unauthenticated" && typeof e.data["peer"] === "string" ? 1 : e.exitCode;
}

/** Reports an error on stderr in one line (JSON with --json), without grpc-js's transport wording, and returns its exit code. */
export function reportError(err: unknown, json: boolean): number {
  const e = err instanceof HermesError ? err : toHermesError(err);
  const message = plainTransportText(e.message);
  if (json) process.stderr.write(`${JSON.stringify({ error: { ...e.toJSON(), message } })}\n`);
  else process.stderr.write(`hermes: ${message}\n`);
  return exitCodeOf(e);
}

export function warn(text: string): void {
  process.stderr.write(`⚠ ${text.replace(/\n/g, "\n  ")}\n`);
}
