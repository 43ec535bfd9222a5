#!/usr/bin/env bash
# zsh and fish for the shell-completion tests (tests/test_completion_shells.py; bash is always there),
# installed with apt when missing. Needs root (CI runs as root on a fresh machine); elsewhere it says
# what to run and exits 0 unless --required, so those tests skip with a reason.
set -euo pipefail
required=0
[ "${1:-}" = "--required" ] && required=1
missing=()
for shell in zsh fish; do command -v "$shell" >/dev/null 2>&1 || missing+=("$shell"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "shells: $(zsh --version), $(fish --version)"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "shells installed: $(zsh --version), $(fish --version)"
  exit 0
fi
echo "shells: ${missing[*]} not installed (as root: apt-get update && apt-get install -y ${missing[*]}); their completion tests will skip" >&2
exit $required
