import { describe, expect, it } from "vitest";
import { thrownHermesError } from "../../../test/support/hermes-errors.js";
import { checkPrompt, PROMPT_FILE_MAX_BYTES, PROMPT_LIMIT_CHARS, promptFileError, promptFromFile, promptSource } from "./prompt.js";

describe("prompts", () => {
  it("keeps the text exactly as written", () => {
    const text = '  Summarize `$(inbox)` and "quotes"\n';
    expect(checkPrompt(text)).toBe(text);
  });

  it("counts the limit in code points", () => {
    expect(checkPrompt("🤖".repeat(PROMPT_LIMIT_CHARS))).toHaveLength(2 * PROMPT_LIMIT_CHARS);
    const err = thrownHermesError(() => checkPrompt("x".repeat(PROMPT_LIMIT_CHARS + 1)));
    expect(err.reason).toBe("payload_too_large");
    expect(err.message).toBe("prompt: is 16,001 characters; the limit is 16,000");
    expect(err.data).toMatchObject({ limit: 16_000, length: 16_001 });
  });

  it.each([
    ["", "prompt: is empty"],
    [" \n ", "prompt: is empty"],
    [null, "prompt: must be text (got null)"],
  ])("refuses the prompt %j", (text, message) => {
    expect(thrownHermesError(() => checkPrompt(text)).message).toContain(message);
  });

  it("reads a UTF-8 file, dropping a byte-order mark", () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode("Résumé the inbox")]);
    expect(promptFromFile("p.md", bytes)).toBe("Résumé the inbox");
  });

  it.each([
    [
      "over the limit",
      new TextEncoder().encode("y".repeat(PROMPT_LIMIT_CHARS + 1)),
      "payload_too_large",
      "prompt file p.md: is 16,001 characters",
    ],
    [
      "larger than any prompt can be",
      new Uint8Array(PROMPT_FILE_MAX_BYTES + 1).fill(0x61),
      "payload_too_large",
      "prompt file p.md: is over 64,000 bytes",
    ],
    ["not UTF-8", new Uint8Array([0x66, 0xff, 0xfe]), "invalid_params", "prompt file p.md: is not UTF-8 text"],
    ["empty", new Uint8Array(), "invalid_params", "prompt file p.md: is empty"],
  ])("refuses a file %s", (_what, bytes, reason, message) => {
    const err = thrownHermesError(() => promptFromFile("p.md", bytes));
    expect(err.reason).toBe(reason);
    expect(err.message).toContain(message);
  });

  it.each([
    ["ENOENT", "not_found", "prompt file ./p.md: does not exist"],
    ["EISDIR", "invalid_params", "is a directory"],
    ["EACCES", "refused", "permission denied"],
    [undefined, "internal", "could not be read (unknown error)"],
  ])("a file that cannot be read (%s) is a clear error", (code, reason, message) => {
    const err = promptFileError("./p.md", code);
    expect(err.reason).toBe(reason);
    expect(err.message).toContain(message);
    expect(err.data).toMatchObject({ field: "prompt_file", path: "./p.md" });
  });

  it("takes exactly one of --prompt and --prompt-file", () => {
    expect(promptSource({ prompt: "hi" })).toBe("prompt");
    expect(promptSource({ prompt_file: "p.md" })).toBe("prompt_file");
    expect(thrownHermesError(() => promptSource({})).message).toContain("--prompt TEXT or --prompt-file FILE");
    expect(thrownHermesError(() => promptSource({ prompt: "a", prompt_file: "b" })).message).toContain("not both");
  });
});
