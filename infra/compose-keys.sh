#!/usr/bin/env bash
# Create infra/.env for infra/compose.yaml: a random API key (API_SERVER_KEY of every daemon), a
# random mesh key (HERMES_MESH_KEY: gateway-to-gateway calls of the coordinated mesh) and one relay
# connection key per gateway, registered in the relay's volume with
# `hermes relay key add gw-N`. Idempotent: an existing infra/.env is kept (--force replaces it).
set -euo pipefail
cd "$(dirname "$0")"
say() { printf '[compose-keys] %s\n' "$*" >&2; }

if [ -f .env ] && [ "${1:-}" != "--force" ]; then
  say "infra/.env exists; keeping it (--force to create new keys)"
  exit 0
fi

if docker compose version >/dev/null 2>&1; then compose=(docker compose); elif command -v docker-compose >/dev/null; then compose=(docker-compose); else
  say "ERROR: needs Docker Compose (the 'docker compose' plugin or docker-compose)"
  exit 1
fi

umask 077
api_key=$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
tmp=$(mktemp .env.XXXXXX)
trap 'rm -f "$tmp"' EXIT
mesh_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'HERMES_API_KEY=%s\nHERMES_MESH_KEY=%s\n' "$api_key" "$mesh_key" >"$tmp"
for n in 1 2 3; do
  say "relay key add gw-$n"
  # A one-off relay container on the relay's volume; the key is the last word it prints.
  # The gateways' keys do not exist yet; placeholders satisfy the file's ${VAR:?} checks.
  out=$(HERMES_API_KEY=$api_key HERMES_MESH_KEY=- HERMES_RELAY_KEY_GW_1=- HERMES_RELAY_KEY_GW_2=- HERMES_RELAY_KEY_GW_3=- "${compose[@]}" -f compose.yaml run --rm --no-deps -T relay relay key add "gw-$n" --data /data)
  key=$(printf '%s\n' "$out" | awk 'NF {last=$NF} END {print last}')
  [ -n "$key" ] || { say "ERROR: relay key add gw-$n printed no key"; exit 1; }
  printf 'HERMES_RELAY_KEY_GW_%s=%s\n' "$n" "$key" >>"$tmp"
done
mv "$tmp" .env
trap - EXIT
say "wrote infra/.env (mode 0600)"
