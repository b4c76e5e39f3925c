#!/usr/bin/env bash
# Make sure Debian's `chromium` is there for the console's browser tests (they drive it with
# playwright-core through its executable path; no browser is ever downloaded by npm).
#
#   scripts/ensure-chromium.sh        # idempotent; does nothing when /usr/bin/chromium exists
#
# - chromium present: prints its version.
# - Debian/Ubuntu as root: says so, then installs Debian's chromium (--no-install-recommends).
# - Anywhere else: says what is needed and exits 1.
set -euo pipefail

say() { printf '[ensure-chromium] %s\n' "$*" >&2; }
die() { printf '[ensure-chromium] ERROR: %s\n' "$*" >&2; exit 1; }

bin=/usr/bin/chromium
if [ -x "$bin" ]; then
  say "chromium present: $("$bin" --version 2>/dev/null | head -1) ($bin)"
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  die "no $bin; install Debian's chromium package (apt-get install chromium)"
fi

say "chromium is missing: installing Debian's chromium"
log=$(mktemp /tmp/hermes-chromium-apt.XXXXXX.log)
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >"$log" 2>&1; then
  apt-get update -qq >>"$log" 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >>"$log" 2>&1 ||
    die "apt-get install chromium failed; see $log"
fi
[ -x "$bin" ] || die "chromium installed but no $bin; see $log"
rm -f "$log"
say "installed: $("$bin" --version 2>/dev/null | head -1) ($bin)"
