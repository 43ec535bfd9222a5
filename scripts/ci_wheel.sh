#!/usr/bin/env bash
# CI: what a user gets from `pip install`. Build the wheel, install it (not editable) into a fresh
# venv that sees no system packages, and run a few commands from an unrelated directory, so the
# kernel sources, profiles, suppressions and demo data must come from the installed wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tracer-ci-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
step() { echo "ci_wheel: [$((SECONDS - start)) s] $*"; }

step "fresh venv (no system site-packages), then the wheel built as \`pip wheel .\` does (isolated)"
python3 -m venv "$work/venv"
py=$work/venv/bin/python
wheel=$("$py" scripts/build_wheel.py --isolated "$work/dist")
step "installing torch==2.13.0 (CPU wheel) and $(basename "$wheel")"
"$py" -m pip install -q --disable-pip-version-check torch==2.13.0 "$wheel[serve]"
tracer=$work/venv/bin/tracer
mkdir "$work/elsewhere"
cd "$work/elsewhere"
check='import sys, tracer.resources as r; sys.exit(r.is_checkout() or not r.import_root().is_relative_to(sys.prefix))'
"$py" -c "$check" || { echo "ci_wheel: tracer is not imported from the installed wheel" >&2; exit 1; }

step "tracer kernels ptx none"
"$tracer" kernels ptx none > ptx.txt
grep -q '.entry cast_transpose(' ptx.txt
step "tracer run torch_composite --device cpu"
"$tracer" run torch_composite --device cpu --shape 64x64 --steps 1 | tee run.txt
grep -q '^verdict: PASS' run.txt
step "tracer sanitize import (default suppressions from the wheel)"
"$tracer" sanitize import "$repo/tests/data/sanitizer/unfiltered-1024/memcheck-clean.xml" | tee sanitize.txt
grep -q 'suppressed by cuda-bindings-getprocaddress-probe' sanitize.txt
step "tracer campaign run cpu_smoke"
"$tracer" campaign run cpu_smoke -o "$work/cpu_smoke.campaign.sqlite" --no-progress
step "tracer demo"
"$tracer" demo -o "$work/demo" > demo.txt
for f in timeline.png verdicts.png ablation.png report.html; do [ -s "$work/demo/$f" ]; done
step "tracer serve (static files from the wheel), stopped by SIGTERM"
mkdir "$work/runs"
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tracer" serve --runs "$work/runs" --port "$port" --gpus none > serve.txt 2>&1 &
served=$!
for _ in $(seq 100); do "$py" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/static/timeline.js')" 2>/dev/null && break; sleep 0.2; done
"$py" -c "import urllib.request as u; assert b'class Timeline' in u.urlopen('http://127.0.0.1:$port/static/timeline.js').read()"
kill -TERM "$served"; wait "$served"
step "tracer doctor"
"$tracer" doctor
step "passed"
