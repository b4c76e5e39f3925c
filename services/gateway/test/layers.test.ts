import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { importEdges, layerViolations, sqlOutsideStore } from "../../../test/support/source-layers.js";

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

  it("keeps the CLI's direct entry clear of the daemon and its transports (they are most of a command's start-up)", () => {
    const edges = importEdges(SRC);
    const reached = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string) => {
      if (reached.has(file)) return;
      reached.add(file);
      for (const edge of edges) {
        if (edge.from !== file) continue;
        if (edge.target === undefined) packages.add(edge.specifier);
        else visit(edge.target.replace(/\.js$/, ".ts"));
      }
    };
    visit("direct.ts");
    expect(
      [...reached].filter((file) => file.startsWith("daemon/") || file.startsWith("api/grpc/") || file.startsWith("api/rpc/")),
    ).toEqual([]);
    expect([...packages].filter((name) => ["etcd3", "grammy", "ws", "@hermes/coordinator", "@hermes/console"].includes(name))).toEqual([]);
    expect(reached.size).toBeGreaterThan(20);
  });
});
