import { readFileSync, writeFileSync } from "node:fs";

/**
 * Data-driven scenario files in the style of etcd raft's `testdata/*.txt`:
 *
 *     # comment
 *     <command> <positional…> key=value key="quoted value"
 *     ----
 *     <expected output, zero or more lines, ending at a blank line>
 *
 * A world (the part that knows the commands) runs each directive; `checkScenarioFile` compares every
 * output with its block and returns the differences. REWRITE=1 writes the actual outputs back instead
 * (review the diff before keeping it).
 */

export interface ScenarioCase {
  /** 1-based line of the directive. */
  line: number;
  directive: string;
  expected: string;
  /** Line range [start, end) of the expected block, for rewriting. */
  expectedLines: [number, number];
}

export interface ScenarioDirective {
  command: string;
  positional: string[];
  named: Map<string, string>;
}

export function parseScenario(text: string): ScenarioCase[] {
  const lines = text.split("\n");
  const cases: ScenarioCase[] = [];
  for (let i = 0; i < lines.length; ) {
    const line = lines[i]!;
    if (line.trim() === "" || line.startsWith("#")) {
      i++;
      continue;
    }
    if (lines[i + 1] !== "----") throw new Error(`line ${i + 1}: "----" must follow the directive ${JSON.stringify(line)}`);
    const start = i + 2;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== "") end++;
    cases.push({ line: i + 1, directive: line, expected: lines.slice(start, end).join("\n"), expectedLines: [start, end] });
    i = end;
  }
  return cases;
}

/** `cmd a b key=v key="x y"` → command, positionals, named arguments. */
export function splitDirective(directive: string): ScenarioDirective {
  const tokens = [...directive.matchAll(/(\S+?=)"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) =>
    m[1] !== undefined ? m[1] + JSON.parse(`"${m[2]}"`) : m[3]!,
  );
  const [command = "", ...rest] = tokens;
  const positional: string[] = [];
  const named = new Map<string, string>();
  for (const token of rest) {
    const eq = token.indexOf("=");
    if (eq > 0 && /^[a-z_-]+$/.test(token.slice(0, eq))) named.set(token.slice(0, eq), token.slice(eq + 1));
    else positional.push(token);
  }
  return { command, positional, named };
}

function lineDiff(expected: string, actual: string): string {
  const want = expected.split("\n");
  const got = actual.split("\n");
  const out: string[] = [];
  for (let i = 0; i < Math.max(want.length, got.length); i++) {
    if (want[i] === got[i]) out.push(`  ${want[i]}`);
    else {
      if (want[i] !== undefined) out.push(`- ${want[i]}`);
      if (got[i] !== undefined) out.push(`+ ${got[i]}`);
    }
  }
  return out.join("\n");
}

/** One file's run: each case's output is compared as it comes; `finish` rewrites (REWRITE=1) or returns the mismatches. */
class ScenarioFileRun {
  readonly text: string;
  readonly cases: ScenarioCase[];
  private readonly actual: string[] = [];
  private readonly failures: string[] = [];

  constructor(private readonly path: string) {
    this.text = readFileSync(path, "utf8");
    this.cases = parseScenario(this.text);
  }

  /** Records a case's output; false when broken invariants stop the run. */
  record(scenarioCase: ScenarioCase, output: string, broken: string[]): boolean {
    this.actual.push(output);
    if (broken.length > 0) {
      this.failures.push(
        `${this.path}:${scenarioCase.line}: invariants broken after "${scenarioCase.directive}":\n  ${broken.join("\n  ")}`,
      );
      return false;
    }
    if (output !== scenarioCase.expected)
      this.failures.push(`${this.path}:${scenarioCase.line}: ${scenarioCase.directive}\n${lineDiff(scenarioCase.expected, output)}`);
    return true;
  }

  finish(): string[] {
    const { cases, actual } = this;
    if (process.env.REWRITE === "1" && actual.length === cases.length) {
      const lines = this.text.split("\n");
      for (let k = cases.length - 1; k >= 0; k--) {
        const [start, end] = cases[k]!.expectedLines;
        lines.splice(start, end - start, ...(actual[k] === "" ? [] : actual[k]!.split("\n")));
      }
      writeFileSync(this.path, lines.join("\n"));
      return [];
    }
    return this.failures;
  }
}

const errorOutput = (err: unknown) => `error: ${err instanceof Error ? err.message : String(err)}`;

/**
 * Runs every directive of the file through `run` (a thrown error prints as `error: …`) and returns
 * one message per mismatch; `check` (optional) returns broken invariants after each step, which stop
 * the run. With REWRITE=1 the file is rewritten with the actual outputs and no mismatch is returned.
 */
export function checkScenarioFile(path: string, run: (directive: ScenarioDirective) => string, check: () => string[] = () => []): string[] {
  const file = new ScenarioFileRun(path);
  for (const scenarioCase of file.cases) {
    let output: string;
    try {
      output = run(splitDirective(scenarioCase.directive));
    } catch (err) {
      output = errorOutput(err);
    }
    if (!file.record(scenarioCase, output, check())) break;
  }
  return file.finish();
}

/** `checkScenarioFile` for a world whose directives complete asynchronously (real I/O, timers, commits). */
export async function checkScenarioFileAsync(
  path: string,
  run: (directive: ScenarioDirective) => Promise<string>,
  check: () => string[] = () => [],
): Promise<string[]> {
  const file = new ScenarioFileRun(path);
  for (const scenarioCase of file.cases) {
    let output: string;
    try {
      output = await run(splitDirective(scenarioCase.directive));
    } catch (err) {
      output = errorOutput(err);
    }
    if (!file.record(scenarioCase, output, check())) break;
  }
  return file.finish();
}
