#!/usr/bin/env bash
# Issue #26, the per-op cost of --memory on launch-bound steps, on the GPU machine in one call.
# Run from this tree's copy, with main's tree (or any other) beside it as $BASE (default ../perop-main):
#   bash scripts/device_perop.sh
#   bench:  scripts/bench_memory_capture.py --per-step gpt2 --steps 8 (untraced, plain CUPTI, --memory) with
#           $BASE's tracer, then with this tree's (the same bench script and workload for both: only the
#           tracer under test differs)
#   modes:  GPT-2's steps untraced under a pass-through dispatch mode and under tracer's recording mode
#           with no CUPTI (scripts/step_workload.py --mode): the dispatch mode's own share
#   tests:  the GPU tests of the memory and ops family on this tree, in 4 shards at once
# Everything lands under $OUT, packed into $OUT/perop.tgz. Stops starting work $DEADLINE seconds in (330).
set -uo pipefail
cd "$(dirname "$0")/.."
HERE=$PWD
BASE=$(cd "${BASE:-../perop-main}" && pwd)
OUT=${OUT:-/tmp/out}
L=$OUT/logs
mkdir -p "$L"
export PYTHONUNBUFFERED=1 TRACER_CACHE_DIR=/tmp/tracer-cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  ../../.whl/*.whl ../../.dwh/.jswheels/*.whl > "$L/pip.log" 2>&1
END=$(( $(date +%s) + ${DEADLINE:-330} ))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$L/gpu.txt" 2>&1
{ echo "start $(uptime)"; nproc; } > "$L/load.txt"

bench() {  # name tree
  local t=$(( $(left) - 10 ))
  [ "$t" -lt 30 ] && { echo "bench-$1 skipped" >> "$L/exits.txt"; return; }
  (cd "$2" && PYTHONPATH=$2:/tmp/site timeout "$t" python3 "$HERE/scripts/bench_memory_capture.py" --per-step gpt2 \
     --steps 8 --window 3 --repeats 1 --step-modes untraced,cupti,memory --json "$L/bench-$1.json") > "$L/bench-$1.log" 2>&1
  echo "bench-$1 $?" >> "$L/exits.txt"
}
bench main "$BASE"
bench perop "$HERE"
echo "after bench $(uptime)" >> "$L/load.txt"

for mode in passthrough recording; do
  t=$(( $(left) - 10 ))
  [ "$t" -lt 20 ] && break
  PYTHONPATH=$HERE:/tmp/site timeout "$t" python3 scripts/step_workload.py gpt2 --steps 8 --mode $mode > "$L/mode-$mode.log" 2>&1
  echo "mode-$mode $?" >> "$L/exits.txt"
done

export PYTHONPATH=$HERE:/tmp/site
FILES="tests/gpu/test_ops_gpu.py tests/gpu/test_memory_window_gpu.py tests/gpu/test_hazards_gpu.py"
python3 -m pytest -q -p no:cacheprovider --co $FILES 2>/dev/null | grep '::' > "$L/test-ids.txt"
t=$(( $(left) - 5 ))
if [ "$t" -gt 30 ]; then
  for s in 0 1 2 3; do
    awk -v s=$s 'NR % 4 == s' "$L/test-ids.txt" > "/tmp/shard$s.txt"
    (timeout "$t" python3 -m pytest -q -p no:cacheprovider -rfEs $(cat /tmp/shard$s.txt) > "$L/tests-$s.log" 2>&1;
     echo "tests-$s $?" >> "$L/exits.txt") &
  done
  wait
fi
echo "end $(uptime)" >> "$L/load.txt"
tar -czf "$OUT/perop.tgz" -C "$OUT" logs
rm -rf "$L"
ls -la "$OUT"
