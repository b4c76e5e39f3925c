import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { layerViolations, sqlOutsideStore } from "../../../test/support/source-layers.js";

/** The relay's layers (docs/ARCHITECTURE.md, "Layers"): by domain, then daemon → api → app → store → core. */
const SRC = fileURLToPath(new URL("../src", import.meta.url));

describe("relay layers", () => {
  it("imports only point down: core ← store ← app ← api ← daemon", () => {
    const violations = layerViolations(SRC, {
      layers: {
        core: {
          imports: [],
          packages: ["@hermes/common", "@hermes/common/pure", "@hermes/contract", "@hermes/contract/envelope", "zod", "node:crypto"],
        },
        store: { imports: ["core"] },
        app: { imports: ["core", "store"] },
        api: { imports: ["core", "store", "app"] },
        daemon: { imports: "any" },
        "": { imports: "any" },
      },
    });
    expect(violations).toEqual([]);
  });

  it("writes SQL only in store/", () => {
    expect(sqlOutsideStore(SRC)).toEqual([]);
  });
});
