#!/usr/bin/env bash
# Make sure the `etcd` binary is there for the coordinator tests (they start their own etcd
# processes on random loopback ports; nothing here starts one).
#
#   scripts/ensure-etcd.sh            # idempotent; does nothing when etcd is on PATH or at /usr/bin/etcd
#
# - etcd present: prints its version.
# - Debian/Ubuntu as root: says so, then installs Debian's etcd-server (--no-install-recommends)
#   without starting the system service it ships (policy-rc.d refuses service starts during the
#   install, and any etcd service that was started anyway is stopped).
# - Anywhere else: says what is needed and exits 1.
set -euo pipefail

say() { printf '[ensure-etcd] %s\n' "$*" >&2; }
die() { printf '[ensure-etcd] ERROR: %s\n' "$*" >&2; exit 1; }

etcd_bin() { command -v etcd 2>/dev/null || { [ -x /usr/bin/etcd ] && echo /usr/bin/etcd; } || true; }

bin=$(etcd_bin)
if [ -n "$bin" ]; then
  say "etcd present: $("$bin" --version 2>/dev/null | head -1) ($bin)"
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  die "no etcd binary; install Debian's etcd-server package (apt-get install etcd-server) or put etcd v3.4+ on PATH"
fi

say "etcd is missing: installing Debian's etcd-server (its service is not started)"
log=$(mktemp /tmp/hermes-etcd-apt.XXXXXX.log)
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  made_policy=1
fi
cleanup() { if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >"$log" 2>&1; then
  apt-get update -qq >>"$log" 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >>"$log" 2>&1 ||
    die "apt-get install etcd-server failed; see $log"
fi
# Belt and braces: no system etcd is left running by the package.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then systemctl stop etcd || true; fi
if [ -x /etc/init.d/etcd ]; then /etc/init.d/etcd stop >/dev/null 2>&1 || true; fi

bin=$(etcd_bin)
[ -n "$bin" ] || die "etcd-server installed but no etcd binary found; see $log"
rm -f "$log"
say "installed: $("$bin" --version 2>/dev/null | head -1) ($bin)"
