import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";
import { CORE_TESTS, PROCESS_TESTS, TEST_FILES } from "./test/projects.js";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

// Tests import workspace packages from source, so a test run never depends on a stale build.
const alias = [
  { find: /^@hermes\/proto\/(.*)$/, replacement: here("./proto/src/gen/$1.ts") },
  { find: /^@hermes\/proto$/, replacement: here("./proto/src/index.ts") },
  { find: /^@hermes\/common\/client$/, replacement: here("./services/common/src/client.ts") },
  { find: /^@hermes\/common\/pure$/, replacement: here("./services/common/src/pure/index.ts") },
  { find: /^@hermes\/common$/, replacement: here("./services/common/src/index.ts") },
  { find: /^@hermes\/contract\/envelope$/, replacement: here("./services/contract/src/envelope.ts") },
  { find: /^@hermes\/contract$/, replacement: here("./services/contract/src/index.ts") },
  { find: /^@hermes\/coordinator$/, replacement: here("./services/coordinator/src/index.ts") },
  { find: /^@hermes\/gateway\/direct$/, replacement: here("./services/gateway/src/direct.ts") },
  { find: /^@hermes\/gateway\/home$/, replacement: here("./services/gateway/src/home/store/home.ts") },
  { find: /^@hermes\/gateway\/ops$/, replacement: here("./services/gateway/src/ops/core/index.ts") },
  { find: /^@hermes\/gateway$/, replacement: here("./services/gateway/src/index.ts") },
  { find: /^@hermes\/relay$/, replacement: here("./services/relay/src/index.ts") },
];

// The projects and which test file runs where: test/projects.ts (checked by test/projects.test.ts).
// Two files at a time outside the container scenarios: vitest's default is one fewer than the CPUs,
// which on a 2-core machine ran the whole suite one file after another. The scenarios come after
// them (their own group order), one at a time.
const PARALLEL_FILES = 2;

export default defineConfig({
  resolve: { alias },
  test: {
    // One report for the whole run, every project in it (CI reads its totals).
    reporters: process.env.CI_REPORT ? ["default", ["json", { outputFile: process.env.CI_REPORT }]] : ["default"],
    projects: [
      {
        resolve: { alias },
        test: {
          name: "core",
          maxWorkers: PARALLEL_FILES,
          include: CORE_TESTS,
          testTimeout: 60_000,
          pool: "threads",
          isolate: false,
        },
      },
      {
        resolve: { alias },
        test: {
          name: "service",
          maxWorkers: PARALLEL_FILES,
          include: TEST_FILES,
          exclude: [...configDefaults.exclude, ...CORE_TESTS, ...PROCESS_TESTS],
          // Their gateways serve the web console: build it first when its sources changed.
          globalSetup: ["test/support/build-console.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          pool: "forks",
        },
      },
      {
        resolve: { alias },
        test: {
          name: "process",
          maxWorkers: PARALLEL_FILES,
          include: PROCESS_TESTS,
          // These tests run the built code (`hermes` subprocesses): build it once before they start.
          globalSetup: ["test/support/build-once.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          pool: "forks",
        },
      },
      {
        resolve: { alias },
        test: {
          name: "integration",
          sequence: { groupOrder: 1 },
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
