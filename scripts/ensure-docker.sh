#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info`.
#
#   scripts/ensure-docker.sh            # idempotent; ~50 ms when the engine is already up
#
# - Engine up: does nothing (prints one line).
# - Debian/Ubuntu as root: installs docker.io if dockerd is missing (--no-install-recommends,
#   about 5 s), starts dockerd in the background, waits until `docker info` answers.
# - Anywhere else: says what is needed and exits 1.
#
# Environment:
#   HERMES_DOCKERD_LOG      dockerd log file (default /tmp/hermes-dockerd/dockerd.log)
#   HERMES_DOCKER_WAIT_S    seconds to wait for the engine (default 60)
#
# Why the API-version dance: /usr/local/bin/docker may be a 28.x client (API 1.50) while Debian's
# dockerd 20.10 speaks API 1.41. The 28 client negotiates down by itself; an older pinned
# DOCKER_API_VERSION above what the daemon supports would break it, so we check and say so.
set -euo pipefail

say() { printf '[ensure-docker] %s\n' "$*" >&2; }
die() { printf '[ensure-docker] ERROR: %s\n' "$*" >&2; exit 1; }

run_dir=/tmp/hermes-dockerd
log_file=${HERMES_DOCKERD_LOG:-$run_dir/dockerd.log}
apt_log=$run_dir/apt.log
wait_s=${HERMES_DOCKER_WAIT_S:-60}

docker_answers() { docker info >/dev/null 2>&1; }

if ! command -v docker >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then
  PATH="/usr/bin:$PATH"
fi

if command -v docker >/dev/null 2>&1 && docker_answers; then
  say "engine already answers ($(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null || echo up))"
  exit 0
fi

# A pinned DOCKER_API_VERSION newer than the daemon's makes `docker info` fail although the engine is up.
if [ -n "${DOCKER_API_VERSION:-}" ] && command -v docker >/dev/null 2>&1; then
  if (unset DOCKER_API_VERSION; docker info >/dev/null 2>&1); then
    die "the engine is up but DOCKER_API_VERSION=$DOCKER_API_VERSION is not accepted by it; unset it (the client negotiates) or set it to the server's API version"
  fi
fi

if [ -n "${DOCKER_HOST:-}" ]; then
  die "DOCKER_HOST=$DOCKER_HOST is set but no engine answers there; start that engine or unset DOCKER_HOST"
fi

is_debian=false
if [ -r /etc/os-release ] && grep -qiE '^(ID|ID_LIKE)=.*(debian|ubuntu)' /etc/os-release && command -v apt-get >/dev/null 2>&1; then
  is_debian=true
fi
if [ "$(id -u)" != 0 ] || [ "$is_debian" != true ]; then
  die "no Docker engine answers. Needed: a running Docker engine (Docker Desktop, or dockerd: 'sudo apt-get install docker.io && sudo systemctl start docker' on Debian/Ubuntu), and a user that may use /var/run/docker.sock. This script only installs and starts dockerd itself when run as root on Debian/Ubuntu."
fi

if ! command -v dockerd >/dev/null 2>&1; then
  say "dockerd missing: apt-get install -y --no-install-recommends docker.io (log: $apt_log)"
  mkdir -p "$run_dir"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends docker.io >"$apt_log" 2>&1; then
    say "install failed; refreshing package lists (apt-get update) and retrying"
    apt-get update >>"$apt_log" 2>&1 || die "apt-get update failed, see $apt_log"
    apt-get install -y --no-install-recommends docker.io >>"$apt_log" 2>&1 ||
      die "apt-get install docker.io failed, see $apt_log"
  fi
  command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd is not on PATH"
  if ! command -v docker >/dev/null 2>&1; then PATH="/usr/bin:$PATH"; fi
fi

mkdir -p "$(dirname "$log_file")"
pid_file=$run_dir/dockerd.pid
if [ -S /var/run/docker.sock ] && [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
  say "dockerd (pid $(cat "$pid_file")) is starting; waiting for it"
elif pgrep -x dockerd >/dev/null 2>&1; then
  say "a dockerd process exists but does not answer yet; waiting for it"
else
  say "starting dockerd in the background (log: $log_file)"
  # setsid: the daemon must outlive the shell (and the test run) that started it.
  setsid nohup dockerd >>"$log_file" 2>&1 </dev/null &
  echo $! >"$pid_file"
fi

deadline=$((SECONDS + wait_s))
until docker_answers; do
  if [ -f "$pid_file" ] && ! kill -0 "$(cat "$pid_file")" 2>/dev/null && ! pgrep -x dockerd >/dev/null 2>&1; then
    tail -n 20 "$log_file" >&2 || true
    die "dockerd exited during start-up; last log lines above (full log: $log_file)"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    tail -n 20 "$log_file" >&2 || true
    die "dockerd did not answer within ${wait_s}s (log: $log_file); raise HERMES_DOCKER_WAIT_S or read the log"
  fi
  sleep 0.25
done
say "engine up ($(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null || echo ok))"
