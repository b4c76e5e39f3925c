#!/bin/sh
# Entrypoint of the Hermes Mesh images: the `hermes` command (installed as /usr/local/bin/hermes).
exec node /app/services/cli/bin/hermes.js "$@"
