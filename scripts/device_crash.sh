#!/usr/bin/env bash
# Issue #32 on the GPU machine in one call: the GPU tests of every ending (tests/gpu/test_crash_gpu.py,
# in two pytest processes side by side) and then, alone on the machine, the flush-interval bench
# (scripts/bench_flush.py). Everything lands in $OUT/crash.tgz (logs, junit XML, bench JSON).
#   [NOBENCH=1] bash scripts/device_crash.sh [pytest -k expression | demo]
#   demo: the bench alone ($REPEATS repeats, default 3) and the text `trace run` prints for a hung
#         two-rank gloo job and a segfault (docs/crash-and-hang.md quotes them)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
W=/tmp/crash-out
rm -rf "$W" && mkdir -p "$W"
export PYTHONUNBUFFERED=1 TRACER_CACHE_DIR=/tmp/tracer-cache TRACER_GPU_PRECOMPILE=0
if ls ../../.whl/*.whl >/dev/null 2>&1; then WHL=../../.whl; else WHL=.whl; fi
if ls $WHL/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/*.whl 2>&1 | tail -2
  export PYTHONPATH=$PWD:/tmp/site
else
  export PYTHONPATH=$PWD
fi
K=${1:-}
T=tests/gpu/test_crash_gpu.py
date +%s > "$W/t0"
if [ "$K" = demo ]; then
  timeout 150 python3 scripts/bench_flush.py --steps 3000 --repeats "${REPEATS:-3}" --json "$W/bench_flush.json" > "$W/bench_flush.txt" 2>&1
  echo "bench rc=$?" >> "$W/exits.txt"
  timeout 80 python3 -m tracer trace run --backend cupti --timeout 40 -o /tmp/demo-gloo -- python3 -m torch.distributed.run \
    --nproc-per-node 2 tests/gpu/programs/gloo_hang.py > "$W/gloo.out" 2> "$W/gloo.err"
  echo "gloo rc=$?" >> "$W/exits.txt"
  timeout 60 python3 -m tracer trace run --backend cupti -o /tmp/demo-segv -- python3 tests/gpu/programs/crash_ends.py segv \
    > "$W/segv.out" 2> "$W/segv.err"
  echo "segv rc=$?" >> "$W/exits.txt"
  cp /tmp/demo-gloo/verdict.json "$W/gloo-verdict.json" 2>/dev/null
  tail -n 3 "$W/exits.txt" "$W/bench_flush.txt"
  tar -C /tmp -czf "$OUT/crash.tgz" crash-out
  exit 0
fi
if [ -n "$K" ]; then
  timeout 400 python3 -m pytest -q -rA -p no:cacheprovider "$T" -k "$K" --junitxml "$W/tests.xml" > "$W/tests.log" 2>&1
  echo "tests rc=$?" >> "$W/exits.txt"
else
  timeout 210 python3 -m pytest -q -rA -p no:cacheprovider "$T" -k "every_ending" --junitxml "$W/tests-a.xml" > "$W/tests-a.log" 2>&1 &
  A=$!
  timeout 210 python3 -m pytest -q -rA -p no:cacheprovider "$T" -k "not every_ending" --junitxml "$W/tests-b.xml" > "$W/tests-b.log" 2>&1 &
  B=$!
  wait $A; echo "tests-a rc=$?" >> "$W/exits.txt"
  wait $B; echo "tests-b rc=$?" >> "$W/exits.txt"
fi
echo "tests took $(( $(date +%s) - $(cat $W/t0) )) s" >> "$W/exits.txt"
if { [ -z "$K" ] && [ "${NOBENCH:-0}" != 1 ]; } || [ "${BENCH:-0}" = 1 ]; then
  timeout 100 python3 scripts/bench_flush.py --steps 3000 --repeats 2 --json "$W/bench_flush.json" > "$W/bench_flush.txt" 2>&1
  echo "bench rc=$?" >> "$W/exits.txt"
fi
nvidia-smi -L > "$W/gpu.txt" 2>&1; python3 -c "import torch; print(torch.__version__)" >> "$W/gpu.txt" 2>&1
tail -n 3 "$W"/tests*.log "$W/exits.txt" "$W/bench_flush.txt" 2>/dev/null
tar -C /tmp -czf "$OUT/crash.tgz" crash-out
