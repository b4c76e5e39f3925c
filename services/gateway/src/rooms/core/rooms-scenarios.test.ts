import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseScenario, rewriteScenario, ScenarioWorld } from "../../../test/support/rooms/scenario-script.js";

/**
 * Runs every testdata/*.txt script (etcd-raft style). Each directive's output must equal the block
 * under its "----"; every room invariant is checked after every step. REWRITE=1 rewrites the
 * expected blocks with the actual output (review the diff before keeping it).
 */
const TESTDATA = fileURLToPath(new URL("./testdata", import.meta.url));
const files = readdirSync(TESTDATA)
  .filter((name) => name.endsWith(".txt"))
  .sort();

function diffLines(expected: string, actual: string): string {
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

describe("room scenarios (testdata/*.txt)", () => {
  it("has scenario files", () => {
    expect(files.length).toBeGreaterThan(0);
  });

  for (const file of files) {
    it(file, () => {
      const path = join(TESTDATA, file);
      const text = readFileSync(path, "utf8");
      const cases = parseScenario(text);
      const world = new ScenarioWorld();
      const actual: string[] = [];
      const failures: string[] = [];
      for (const scenarioCase of cases) {
        let output: string;
        try {
          output = world.run(scenarioCase.directive);
        } catch (err) {
          output = `error: ${err instanceof Error ? err.message : String(err)}`;
        }
        actual.push(output);
        const broken = world.violations();
        if (broken.length > 0) {
          failures.push(`${file}:${scenarioCase.line}: invariants broken after "${scenarioCase.directive}":\n  ${broken.join("\n  ")}`);
          break;
        }
        if (output !== scenarioCase.expected) {
          failures.push(`${file}:${scenarioCase.line}: ${scenarioCase.directive}\n${diffLines(scenarioCase.expected, output)}`);
        }
      }
      if (process.env.REWRITE === "1" && actual.length === cases.length) {
        writeFileSync(path, rewriteScenario(text, cases, actual));
        return;
      }
      if (failures.length > 0) expect.fail(`\n${failures.join("\n\n")}`);
    });
  }
});
