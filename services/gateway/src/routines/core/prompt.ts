import { HermesError } from "@hermes/common/pure";
import { MESSAGE_LIMIT_CHARS, messageLength } from "@hermes/contract";
import { describeType } from "../../botmode/core/labels.js";

/**
 * A routine's prompt is the message of its turn, so it has the message limit (16,000 characters,
 * counted in code points). `--prompt-file` is read once, by `cron add`, and the text is stored with
 * the routine: a run never depends on a file the gateway might not see later.
 */
export const PROMPT_LIMIT_CHARS = MESSAGE_LIMIT_CHARS;
/** A code point is at most 4 bytes of UTF-8, so a longer file cannot fit; the shell reads no more than this (+1). */
export const PROMPT_FILE_MAX_BYTES = 4 * PROMPT_LIMIT_CHARS;

/** Checks prompt text; `source` names where it came from in messages (`prompt`, `prompt file ./p.md`). The text is kept as written. */
export function checkPrompt(text: unknown, source = "prompt"): string {
  if (typeof text !== "string") {
    throw new HermesError("invalid_params", `${source}: must be text (got ${describeType(text)})`, { data: { field: "prompt" } });
  }
  if (text.trim().length === 0) {
    throw new HermesError("invalid_params", `${source}: is empty; write what the bot should do on each run`, { data: { field: "prompt" } });
  }
  const length = messageLength(text);
  if (length > PROMPT_LIMIT_CHARS) {
    throw new HermesError(
      "payload_too_large",
      `${source}: is ${length.toLocaleString("en-US")} characters; the limit is ${PROMPT_LIMIT_CHARS.toLocaleString("en-US")}`,
      { data: { field: "prompt", limit: PROMPT_LIMIT_CHARS, length } },
    );
  }
  return text;
}

/** The prompt in a file's bytes: UTF-8 (a leading byte-order mark is dropped), within the limit. */
export function promptFromFile(path: string, bytes: Uint8Array): string {
  const source = `prompt file ${path}`;
  if (bytes.byteLength > PROMPT_FILE_MAX_BYTES) {
    throw new HermesError(
      "payload_too_large",
      `${source}: is over ${PROMPT_FILE_MAX_BYTES.toLocaleString("en-US")} bytes, more than a ${PROMPT_LIMIT_CHARS.toLocaleString("en-US")}-character prompt can be`,
      { data: { field: "prompt_file", path, limit: PROMPT_LIMIT_CHARS } },
    );
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new HermesError("invalid_params", `${source}: is not UTF-8 text`, { data: { field: "prompt_file", path } });
  }
  return checkPrompt(text, source);
}

/** The typed error for a prompt file that could not be read (`code` is the errno name, e.g. ENOENT). */
export function promptFileError(path: string, code: string | undefined): HermesError {
  const data = { field: "prompt_file", path, code: code ?? null };
  switch (code) {
    case "ENOENT":
    case "ENOTDIR":
      return new HermesError("not_found", `prompt file ${path}: does not exist`, { data });
    case "EISDIR":
      return new HermesError("invalid_params", `prompt file ${path}: is a directory, not a file`, { data });
    case "EACCES":
    case "EPERM":
      return new HermesError("refused", `prompt file ${path}: cannot be read (permission denied)`, { data });
    default:
      return new HermesError("internal", `prompt file ${path}: could not be read (${code ?? "unknown error"})`, { data });
  }
}

/** Exactly one of `--prompt TEXT` and `--prompt-file F`. */
export function promptSource(options: { prompt?: string | undefined; prompt_file?: string | undefined }): "prompt" | "prompt_file" {
  const given = [options.prompt !== undefined, options.prompt_file !== undefined].filter(Boolean).length;
  if (given !== 1) {
    throw new HermesError(
      "invalid_params",
      `give the routine's prompt once: --prompt TEXT or --prompt-file FILE${given === 2 ? ", not both" : ""}`,
      {
        data: { field: "prompt" },
      },
    );
  }
  return options.prompt !== undefined ? "prompt" : "prompt_file";
}
