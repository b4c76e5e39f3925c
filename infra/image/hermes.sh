#!/bin/sh
# Entrypoint of the Hermes Mesh images: the `hermes` command (installed as /usr/local/bin/hermes).
# The node flags are DAEMON_NODE_FLAGS (services/common/src/pure/daemon-flags.ts); a test keeps the two equal.
exec node --max-semi-space-size=32 /app/services/cli/bin/hermes.js "$@"
