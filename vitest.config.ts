import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

// Tests import workspace packages from source, so a test run never depends on a stale build.
const alias = [
  { find: /^@hermes\/proto\/(.*)$/, replacement: here("./proto/src/gen/$1.ts") },
  { find: /^@hermes\/proto$/, replacement: here("./proto/src/index.ts") },
  { find: /^@hermes\/common\/client$/, replacement: here("./services/common/src/client.ts") },
  { find: /^@hermes\/common\/pure$/, replacement: here("./services/common/src/pure/index.ts") },
  { find: /^@hermes\/common$/, replacement: here("./services/common/src/index.ts") },
  { find: /^@hermes\/coordinator$/, replacement: here("./services/coordinator/src/index.ts") },
  { find: /^@hermes\/gateway\/home$/, replacement: here("./services/gateway/src/store/home.ts") },
  { find: /^@hermes\/gateway\/ops$/, replacement: here("./services/gateway/src/core/ops/index.ts") },
  { find: /^@hermes\/gateway$/, replacement: here("./services/gateway/src/index.ts") },
  { find: /^@hermes\/relay$/, replacement: here("./services/relay/src/index.ts") },
];

export default defineConfig({
  resolve: { alias },
  test: {
    reporters: process.env.CI_REPORT ? ["default", ["json", { outputFile: process.env.CI_REPORT }]] : ["default"],
    projects: [
      {
        resolve: { alias },
        test: {
          name: "unit",
          globalSetup: ["test/support/build-once.ts"],
          include: [
            "proto/test/**/*.test.ts",
            "services/*/src/**/*.test.ts",
            "services/*/test/**/*.test.ts",
            "infra/test/**/*.test.ts",
            "bench/**/*.test.ts",
            "scripts/test/**/*.test.ts",
          ],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          pool: "forks",
        },
      },
      {
        resolve: { alias },
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          // Docker engine, offline images, sweep of leftovers (test/integration/README.md).
          globalSetup: ["test/integration/global-setup.ts"],
          // No Ryuk (it would need a pulled image; the global setup sweeps instead). This VM has
          // /.dockerenv, so testcontainers would otherwise look for the host via a bridge gateway.
          env: { TESTCONTAINERS_RYUK_DISABLED: "true", TESTCONTAINERS_HOST_OVERRIDE: "localhost" },
          testTimeout: 240_000,
          hookTimeout: 240_000,
          pool: "forks",
          fileParallelism: false,
        },
      },
    ],
  },
});
