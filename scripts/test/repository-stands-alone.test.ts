import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The repository stands alone: code, comments, help texts and docs never cite a specification
 * outside it (section numbers (the section sign and a number), the outside design document, a sibling `shared`
 * folder). docs/ (ARCHITECTURE.md, OPERATIONS.md, PROTOCOL.md) and the READMEs next to the code
 * that ARCHITECTURE.md links are the project's own specification: a rule the code relies on is
 * stated there, and comments point to it by page and section name.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const THIS_FILE = relative(ROOT, fileURLToPath(import.meta.url));

/** What a citation of an outside specification looks like, and why each is refused. */
const OUTSIDE_REFERENCES: readonly { pattern: RegExp; what: string }[] = [
  { pattern: /§\s*\d/, what: "a section number of an outside specification" },
  // Spelled in pieces so that this file does not itself cite the folder it looks for.
  { pattern: new RegExp(`\\.\\./${"shared"}\\b`), what: "a path to a folder outside the repository" },
  { pattern: new RegExp(`/work/${"shared"}\\b`), what: "a path to a folder outside the repository" },
  { pattern: /\bDESIGN\.md\b/, what: "the outside design document" },
];

interface Hit {
  file: string;
  line: number;
  text: string;
  what: string;
}

/** Every outside reference in `text`, one hit per line and pattern. */
function outsideReferences(file: string, text: string): Hit[] {
  const hits: Hit[] = [];
  text.split("\n").forEach((line, index) => {
    for (const { pattern, what } of OUTSIDE_REFERENCES) {
      if (pattern.test(line)) hits.push({ file, line: index + 1, text: line.trim().slice(0, 160), what });
    }
  });
  return hits;
}

/** The files git tracks (the index), so build output and local homes are never scanned. */
function trackedFiles(): string[] {
  const out = execFileSync("git", ["ls-files", "-z", "--cached"], { cwd: ROOT, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  return out.split("\0").filter((f) => f !== "");
}

function readText(file: string): string | undefined {
  const path = join(ROOT, file);
  if (!existsSync(path) || !statSync(path).isFile()) return undefined; // deleted in the working tree, or a submodule
  const bytes = readFileSync(path);
  if (bytes.includes(0)) return undefined; // binary
  return bytes.toString("utf8");
}

/** The sibling folder's path, put together here so that this file does not itself cite it. */
const SIBLING = ["..", "shared"].join("/");
describe("the repository stands alone", () => {
  it("recognises each kind of outside reference, and leaves ordinary text alone", () => {
    expect(outsideReferences("a.ts", "// promote (§3.4): refused without confirm").map((h) => h.what)).toEqual([
      "a section number of an outside specification",
    ]);
    expect(outsideReferences("a.md", `see ${SIBLING}/DESIGN.md`).map((h) => h.what)).toEqual([
      "a path to a folder outside the repository",
      "the outside design document",
    ]);
    expect(outsideReferences("a.md", `x\nread /work/${"shared"}/reference/notes.md`).map((h) => h.line)).toEqual([2]);
    expect(outsideReferences("a.ts", "// the shared REASONS table; DESIGN review; § alone; docs/ARCHITECTURE.md")).toEqual([]);
  });

  it("no tracked file cites an outside specification", () => {
    const files = trackedFiles().filter((f) => f !== THIS_FILE);
    expect(files.length).toBeGreaterThan(100);
    const hits = files.flatMap((file) => {
      const text = readText(file);
      return text === undefined ? [] : outsideReferences(file, text);
    });
    const report = hits.map((h) => `${h.file}:${h.line}: ${h.what}: ${h.text}`).join("\n");
    expect(
      report,
      "state the rule in docs/ (ARCHITECTURE.md, OPERATIONS.md, PROTOCOL.md) or the domain's README in the project's own words and point to it by page and section name",
    ).toBe("");
  });
});
