import { readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { checkScenarioFileAsync } from "../../../../test/support/scenario-script.js";
import { DeliveryScenario } from "../support/delivery-scenario.js";

/**
 * Every testdata/deliveries/*.txt script over the production delivery service and a real state.db
 * (support/delivery-scenario.ts has the commands). REWRITE=1 rewrites the expected blocks.
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
      const world = new DeliveryScenario();
      try {
        const failures = await checkScenarioFileAsync(join(TESTDATA, file), (d) => world.run(d));
        if (failures.length > 0) expect.fail(`\n${failures.join("\n\n")}`);
      } finally {
        world.destroy();
      }
    });
  }
});
