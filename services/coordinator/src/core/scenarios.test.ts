import { readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { checkScenarioFile } from "../../../../test/support/scenario-script.js";
import { CoordinationWorld } from "../../test/support/world.js";

/** Every testdata/*.txt script (etcd-raft style); the world's invariants are checked after each step. REWRITE=1 rewrites the expected blocks. */
const TESTDATA = fileURLToPath(new URL("./testdata", import.meta.url));
const files = readdirSync(TESTDATA)
  .filter((name) => name.endsWith(".txt"))
  .sort();

describe("coordinator scenarios (testdata/*.txt)", () => {
  it("has scenario files", () => {
    expect(files.length).toBeGreaterThan(0);
  });

  for (const file of files) {
    it(file, () => {
      const world = new CoordinationWorld();
      const failures = checkScenarioFile(
        join(TESTDATA, file),
        (d) => world.run(d),
        () => world.violations(),
      );
      if (failures.length > 0) expect.fail(`\n${failures.join("\n\n")}`);
    });
  }
});
