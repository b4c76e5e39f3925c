import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The console renders every string it gets from the gateway as text: its source has no way to
 * parse markup (innerHTML and friends), so a bot, room or message named `<script>` cannot become
 * markup by a later edit either. (The browser test shows the same on real names.)
 */
const WEB = fileURLToPath(new URL("../web/src", import.meta.url));
const MARKUP_SINKS =
  /\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|srcdoc|eval|new Function)\b/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : name.endsWith(".ts") ? [path] : [];
  });
}

describe("the console's source", () => {
  it("has no markup sink: elements come from dom.ts, strings become text nodes", () => {
    const hits = files(WEB).flatMap((file) =>
      readFileSync(file, "utf8")
        .split("\n")
        .map((line, i) => ({ line, at: `${relative(WEB, file)}:${i + 1}` }))
        .filter(({ line }) => MARKUP_SINKS.test(line) && !line.trim().startsWith("*") && !line.trim().startsWith("//")),
    );
    expect(hits.map((h) => `${h.at}: ${h.line.trim()}`)).toEqual([]);
    expect(files(WEB).length).toBeGreaterThan(5);
  });
});
