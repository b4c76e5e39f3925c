import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { diffLines, parseScenario, rewriteScenario } from "../src/core/rooms/testing/scenario-script.js";
import { DeliveryScenario } from "./support/delivery-scenario.js";

/**
 * Runs every testdata/deliveries/*.txt script over the production delivery service and a real
 * state.db (support/delivery-scenario.ts has the commands). Each directive's output must equal the
 * block under its "----"; REWRITE=1 rewrites the blocks with the actual output (review the diff).
 */
const TESTDATA = fileURLToPath(new URL("./testdata/deliveries", import.meta.url));
const files = readdirSync(TESTDATA)
  .filter((name) => name.endsWith(".txt"))
  .sort();

describe("delivery scenarios (testdata/deliveries/*.txt)", () => {
  it("has scenario files", () => {
    expect(files.length).toBeGreaterThan(0);
  });

  for (const file of files) {
    it(file, async () => {
      const path = join(TESTDATA, file);
      const text = readFileSync(path, "utf8");
      const cases = parseScenario(text);
      const world = new DeliveryScenario();
      const actual: string[] = [];
      const failures: string[] = [];
      try {
        for (const scenarioCase of cases) {
          const output = await world.run(scenarioCase.directive);
          actual.push(output);
          if (output !== scenarioCase.expected) {
            failures.push(`${file}:${scenarioCase.line}: ${scenarioCase.directive}\n${diffLines(scenarioCase.expected, output)}`);
          }
        }
      } finally {
        world.destroy();
      }
      if (process.env.REWRITE === "1") {
        writeFileSync(path, rewriteScenario(text, cases, actual));
        return;
      }
      if (failures.length > 0) expect.fail(`\n${failures.join("\n\n")}`);
    });
  }
});
