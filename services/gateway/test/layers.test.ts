import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { importEdges, layerViolations, sliceOf, sqlOutsideStore } from "../../../test/support/source-layers.js";

/**
 * The gateway's layers (docs/ARCHITECTURE.md, "Layers"): the sources are cut by domain
 * (`rooms/`, `delivery/`, …), each domain by layer; arrows point down only, daemon → api → app →
 * store and adapters → core, within a domain and across domains, and every SQL string lives in a
 * store/ folder.
 */
const SRC = fileURLToPath(new URL("../src", import.meta.url));

/** What the pure core may use besides itself: no I/O, no clock (croner only parses cron text here). */
export const CORE_PACKAGES = [
  "@hermes/common",
  "@hermes/common/pure",
  "@hermes/contract",
  "@hermes/contract/envelope",
  "zod",
  "node:crypto",
  "croner",
];

describe("gateway layers", () => {
  it("imports only point down: core ← store ← app ← api ← daemon (adapters beside store)", () => {
    const violations = layerViolations(SRC, {
      layers: {
        core: { imports: [], packages: CORE_PACKAGES },
        store: { imports: ["core"] },
        adapters: { imports: ["core"] },
        app: { imports: ["core", "store", "adapters"] },
        api: { imports: ["core", "store", "adapters", "app"] },
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
    // Of the api layer, only the wire codecs (plain conversions, no transport).
    const transport = (file: string) => sliceOf(file).layer === "api" && !file.endsWith("/wire.ts");
    expect([...reached].filter((file) => sliceOf(file).layer === "daemon" || transport(file))).toEqual([]);
    expect([...packages].filter((name) => ["etcd3", "grammy", "ws", "@hermes/coordinator", "@hermes/console"].includes(name))).toEqual([]);
    expect(reached.size).toBeGreaterThan(20);
  });
});
