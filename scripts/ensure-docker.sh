#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info`.
#
#   scripts/ensure-docker.sh                    # idempotent; ~50 ms when the engine is already up
#   scripts/ensure-docker.sh --plan             # one line saying what the above would do; changes nothing
#   scripts/ensure-docker.sh --started-file F   # as the first form; if it starts dockerd, writes its pid to F
#   scripts/ensure-docker.sh --stop F           # stops the dockerd whose pid F holds (one started with
#                                               # --started-file F) and waits for it to exit; no-op if F is empty
#
# - Engine up: does nothing (prints one line).
# - Debian/Ubuntu as root: installs docker.io if dockerd is missing (--no-install-recommends,
#   about 5 s), starts dockerd in the background, waits until `docker info` answers.
# - Anywhere else: says what is needed and exits 1.
#
# An engine this script did not start (systemd's, Docker Desktop, one already starting) is never stopped.
#
# Environment:
#   HERMES_DOCKERD_RUN_DIR  where the pid file and logs go (default /tmp/hermes-dockerd)
#   HERMES_DOCKERD_LOG      dockerd log file (default $HERMES_DOCKERD_RUN_DIR/dockerd.log)
#   HERMES_DOCKER_WAIT_S    seconds to wait for the engine to start or stop (default 60)
#
# Why the API-version dance: /usr/local/bin/docker may be a 28.x client (API 1.50) while Debian's
# dockerd 20.10 speaks API 1.41. The 28 client negotiates down by itself; an older pinned
# DOCKER_API_VERSION above what the daemon supports would break it, so we check and say so.
set -euo pipefail

say() { printf '[ensure-docker] %s\n' "$*" >&2; }
die() { printf '[ensure-docker] ERROR: %s\n' "$*" >&2; exit 1; }

mode=ensure
started_file=
case "${1:-}" in
  "") ;;
  --plan) mode=plan ;;
  --started-file) started_file=${2:?--started-file needs a file} ;;
  --stop) mode=stop; started_file=${2:?--stop needs the file given to --started-file} ;;
  *) die "unknown argument $1 (see the comment at the top of $0)" ;;
esac

run_dir=${HERMES_DOCKERD_RUN_DIR:-/tmp/hermes-dockerd}
log_file=${HERMES_DOCKERD_LOG:-$run_dir/dockerd.log}
apt_log=$run_dir/apt.log
pid_file=$run_dir/dockerd.pid
wait_s=${HERMES_DOCKER_WAIT_S:-60}

# A pid file can outlive its dockerd (a machine restored from a snapshot keeps /tmp), and the pid is
# then reused by some other process: only a live process named dockerd counts.
is_dockerd() { [ -n "${1:-}" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null || true)" = dockerd ]; }
our_pid() { cat "$pid_file" 2>/dev/null || true; }

if [ "$mode" = stop ]; then
  pid=$(cat "$started_file" 2>/dev/null || true)
  [ -n "$pid" ] || exit 0
  if is_dockerd "$pid"; then
    say "stopping the dockerd this run started (pid $pid)"
    kill -TERM "$pid"
    deadline=$((SECONDS + wait_s))
    while is_dockerd "$pid"; do
      [ "$SECONDS" -lt "$deadline" ] || die "dockerd (pid $pid) did not exit within ${wait_s}s of SIGTERM; log: $log_file"
      sleep 0.25
    done
    say "dockerd stopped"
  fi
  if [ "$(cat "$pid_file" 2>/dev/null || true)" = "$pid" ]; then rm -f "$pid_file"; fi
  : >"$started_file"
  exit 0
fi

docker_answers() { docker info >/dev/null 2>&1; }

if ! command -v docker >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then
  PATH="/usr/bin:$PATH"
fi

# What to do, decided once: the plan prints it, the ensure mode carries it out.
is_debian=false
if [ -r /etc/os-release ] && grep -qiE '^(ID|ID_LIKE)=.*(debian|ubuntu)' /etc/os-release && command -v apt-get >/dev/null 2>&1; then
  is_debian=true
fi
if command -v docker >/dev/null 2>&1 && docker_answers; then
  action=none
elif [ -n "${DOCKER_API_VERSION:-}" ] && command -v docker >/dev/null 2>&1 && (unset DOCKER_API_VERSION; docker info >/dev/null 2>&1); then
  # A pinned DOCKER_API_VERSION newer than the daemon's makes `docker info` fail although the engine is up.
  action=api-version
elif [ -n "${DOCKER_HOST:-}" ]; then
  action=docker-host
elif [ "$(id -u)" != 0 ] || [ "$is_debian" != true ]; then
  action=unsupported
elif is_dockerd "$(our_pid)"; then
  action=wait-ours
elif pgrep -x dockerd >/dev/null 2>&1; then
  action=wait-other
elif ! command -v dockerd >/dev/null 2>&1; then
  action=install-and-start
else
  action=start
fi

if [ "$mode" = plan ]; then
  case $action in
    none) echo "a Docker engine answers; nothing to install or start" ;;
    install-and-start) echo "no Docker engine answers: will install docker.io (apt-get, about 5 s) and start dockerd in the background" ;;
    start) echo "no Docker engine answers: will start dockerd in the background" ;;
    wait-ours | wait-other) echo "a dockerd is starting; will wait for it (it is not ours to stop)" ;;
    *) echo "no usable Docker engine; the container tests cannot run (details when it is checked)" ;;
  esac
  exit 0
fi

case $action in
  none)
    say "engine already answers ($(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null || echo up))"
    exit 0
    ;;
  api-version) die "the engine is up but DOCKER_API_VERSION=$DOCKER_API_VERSION is not accepted by it; unset it (the client negotiates) or set it to the server's API version" ;;
  docker-host) die "DOCKER_HOST=$DOCKER_HOST is set but no engine answers there; start that engine or unset DOCKER_HOST" ;;
  unsupported) die "no Docker engine answers. Needed: a running Docker engine (Docker Desktop, or dockerd: 'sudo apt-get install docker.io && sudo systemctl start docker' on Debian/Ubuntu), and a user that may use /var/run/docker.sock. This script only installs and starts dockerd itself when run as root on Debian/Ubuntu." ;;
esac

mkdir -p "$run_dir" "$(dirname "$log_file")"
if [ "$action" = install-and-start ]; then
  say "dockerd missing: apt-get install -y --no-install-recommends docker.io (log: $apt_log)"
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

case $action in
  wait-ours) say "dockerd (pid $(our_pid)) is starting; waiting for it" ;;
  wait-other) say "a dockerd process exists but does not answer yet; waiting for it" ;;
  *)
    say "starting dockerd in the background (log: $log_file)"
    # setsid: the daemon gets its own session, so a Ctrl-C meant for the tests does not reach it;
    # whoever passed --started-file stops it (scripts/test.sh does, when the tests end).
    setsid nohup dockerd >>"$log_file" 2>&1 </dev/null &
    echo $! >"$pid_file"
    if [ -n "$started_file" ]; then echo $! >"$started_file"; fi
    ;;
esac

deadline=$((SECONDS + wait_s))
until docker_answers; do
  # kill -0, not is_dockerd: the process we just started may not have exec'd dockerd yet.
  if ! pgrep -x dockerd >/dev/null 2>&1 && ! kill -0 "$(our_pid)" 2>/dev/null; then
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
