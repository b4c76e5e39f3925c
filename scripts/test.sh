#!/usr/bin/env bash
# The README's test command (`npm test`): builds, typechecks and lints, makes sure a Docker engine answers for the
# container scenarios, then runs every vitest suite (unit, in-process multi-node, containers). A Docker engine
# this script starts (as root on Debian it may install docker.io and start dockerd) is stopped when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

containers=false
if [ -x scripts/ensure-docker.sh ] && [ -d test/integration ] && ls test/integration/*.test.ts >/dev/null 2>&1; then
  containers=true
  # Said first, before the build: what will happen to this machine's Docker set-up.
  echo "test: container tests need Docker: $(bash scripts/ensure-docker.sh --plan) (an engine started here is stopped when the tests end)"
fi

echo "test: building (tsc -b)"
npm run --silent build
echo "test: typecheck of sources and tests (tsc --noEmit)"
npx tsc -p tsconfig.json
echo "test: lint and format (biome check)"
npx biome check --error-on-warnings .

if [ "$containers" = true ]; then
  started_file=$(mktemp)
  stop_started_engine() {
    bash scripts/ensure-docker.sh --stop "$started_file" || true
    rm -f "$started_file"
  }
  trap stop_started_engine EXIT
  # A signal ends the script through `exit`, so the EXIT trap runs for Ctrl-C and SIGTERM too.
  trap 'exit 130' INT
  trap 'exit 143' TERM
  bash scripts/ensure-docker.sh --started-file "$started_file"
fi

bash scripts/ensure-etcd.sh
bash scripts/ensure-chromium.sh
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=${TESTCONTAINERS_HOST_OVERRIDE:-localhost}
export HERMES_LOG_LEVEL=${HERMES_LOG_LEVEL:-silent}
# Not exec: the EXIT trap above must run after vitest.
npx vitest run "$@"
