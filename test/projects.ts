/**
 * Which vitest project each test file runs in (vitest.config.ts builds the projects from these
 * lists; test/projects.test.ts checks that every file sits where what it does puts it):
 *
 * - `core`: pure tests, in seconds: no server, no database, no process of our own.
 * - `service`: real servers in the test's own process (gRPC, HTTP, WebSocket on loopback), real
 *   SQLite files, a real etcd. Every test file not listed in `core` or `process` lands here.
 * - `process`: tests that start `hermes` or other node processes (CLI runs, daemons, kill -9): they
 *   run the built code, so only this project builds first.
 * - `integration`: containers (test/integration, configured apart).
 */

/** Where test files live (the integration project's files are not among them). */
export const TEST_FILES = [
  "proto/test/**/*.test.ts",
  "services/*/src/**/*.test.ts",
  "services/*/test/**/*.test.ts",
  "infra/test/**/*.test.ts",
  "bench/**/*.test.ts",
  "scripts/test/**/*.test.ts",
  "test/*.test.ts",
];

export const CORE_TESTS = [
  "services/*/src/core/**/*.test.ts",
  "services/*/src/*/core/**/*.test.ts",
  "services/gateway/src/platforms/*/core/**/*.test.ts",
  "services/common/src/pure/**/*.test.ts",
  "services/contract/src/**/*.test.ts",
  "services/cli/src/up/demo-plan.test.ts",
  "services/gateway/src/agents/app/linked-signal.test.ts",
  "services/cli/src/table.test.ts",
  "services/console/test/text-only.test.ts",
  "services/*/test/layers.test.ts",
  "proto/test/generated-current.test.ts",
  "infra/test/k8s-manifests.test.ts",
  "infra/test/image-entrypoint.test.ts",
  "scripts/test/repository-stands-alone.test.ts",
  "test/projects.test.ts",
];

/**
 * Core tests that run one short tool to its end and read its output (no server, nothing of ours
 * built): the only core tests allowed to use node:child_process.
 */
export const CORE_TOOL_RUNS: Record<string, string> = {
  "proto/test/generated-current.test.ts": "runs the proto generator once (--check)",
  "scripts/test/repository-stands-alone.test.ts": "runs `git ls-files` once",
};

export const PROCESS_TESTS = [
  "services/cli/test/*.test.ts",
  "services/common/test/core-purity.test.ts",
  "services/common/test/wal-checkpointer-crash.test.ts",
  "services/coordinator/test/coordinator-etcd.test.ts",
  "services/gateway/test/delivery/delivery-restart.test.ts",
  "services/gateway/test/rooms/discussion-restart.test.ts",
  "services/gateway/test/api/grpc-fuzz.test.ts",
  "services/gateway/test/api/memory-bounds.test.ts",
  "services/gateway/test/peers/peers-restart.test.ts",
  "services/gateway/test/a2a/a2a-serve.test.ts",
  "services/gateway/test/a2a/a2a-peers.test.ts",
  "services/gateway/test/rooms/quorum-failover.test.ts",
  "services/gateway/test/relay-link/relay-crash.test.ts",
  "services/gateway/test/rooms/rooms-migration-crash.test.ts",
  "services/gateway/test/identity/profile-ids-migration-crash.test.ts",
  "services/gateway/test/rooms/rooms-crash.test.ts",
  "services/gateway/test/platforms/telegram-singleton.test.ts",
  "services/gateway/test/routines/routines-crash.test.ts",
  "services/relay/test/relay-cli.test.ts",
  "services/relay/test/relay-grpc-fuzz.test.ts",
  "scripts/test/docker-engine.test.ts",
];

/**
 * Test-side modules that start a process which is no process of ours and needs no build: a test
 * reaching only these (and no other process start) is a `service` test.
 */
export const SERVICE_PROCESS_HELPERS: Record<string, string> = {
  "test/support/etcd.ts": "real etcd servers, a dependency like SQLite",
  "services/gateway/test/ops/disk-full.test.ts": "mounts and unmounts a small tmpfs around an in-process gateway",
};
