import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { layerViolations, sqlOutsideStore } from "../../../test/support/source-layers.js";

/**
 * The gateway's layers (docs/ARCHITECTURE.md, "Layers inside a service"): arrows point down only,
 * daemon → api → app → store → core, and every SQL string lives in store/.
 */
const SRC = fileURLToPath(new URL("../src", import.meta.url));

/** What the pure core may use besides itself: no I/O, no clock (croner only parses cron text here). */
export const CORE_PACKAGES = ["@hermes/common", "@hermes/common/pure", "zod", "node:crypto", "croner"];

describe("gateway layers", () => {
  it("imports only point down: core ← store ← app ← api ← daemon (adapters beside store)", () => {
    const violations = layerViolations(SRC, {
      layers: {
        core: { imports: [], packages: CORE_PACKAGES },
        store: { imports: ["core"] },
        providers: { imports: ["core"] },
        platforms: { imports: ["core", "providers"] },
        app: { imports: ["core", "store", "providers", "platforms"] },
        api: { imports: ["core", "store", "providers", "platforms", "app"] },
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
