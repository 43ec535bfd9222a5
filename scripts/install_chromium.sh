#!/usr/bin/env bash
# A headless browser for the `tracer serve` browser tests: Debian's Chromium (/usr/bin/chromium),
# installed with apt when missing. Needs root (CI runs as root on a fresh machine); elsewhere it says
# what to run and exits 0 unless --required, so the browser tests skip with a reason.
set -euo pipefail
required=0
[ "${1:-}" = "--required" ] && required=1
if [ -x /usr/bin/chromium ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  echo "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
  exit 0
fi
echo "chromium: not installed (as root: apt-get update && apt-get install -y chromium); the browser tests will skip" >&2
exit $required
