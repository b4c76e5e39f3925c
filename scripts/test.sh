#!/usr/bin/env bash
# The README's test command (`npm test`): builds, typechecks and lints, makes sure a Docker engine answers for the
# container scenarios, then runs every vitest suite (unit, in-process multi-node, containers).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "test: building (tsc -b)"
npm run --silent build
echo "test: typecheck of sources and tests (tsc --noEmit)"
npx tsc -p tsconfig.json
echo "test: lint and format (biome check)"
npx biome check --error-on-warnings .

if [ -x scripts/ensure-docker.sh ] && [ -d test/integration ] && ls test/integration/*.test.ts >/dev/null 2>&1; then
  bash scripts/ensure-docker.sh
fi

bash scripts/ensure-etcd.sh
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=${TESTCONTAINERS_HOST_OVERRIDE:-localhost}
export HERMES_LOG_LEVEL=${HERMES_LOG_LEVEL:-silent}
exec npx vitest run "$@"
