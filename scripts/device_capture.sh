#!/usr/bin/env bash
# The capture work of issues #15/#16 in one call on the GPU machine (about 5 minutes):
#   bash scripts/device_capture.sh [steps...]     (default: all of them, in this order)
#   steps: jobs (every test program under `trace run --memory`, CSAN on each, the seed workloads;
#          in parallel), ddp (torchrun 2 ranks: untraced, traced, one rank SIGKILLed), bench
#          (scripts/bench_memory_capture.py, alone on the GPU), fixtures (the jobs' traces as
#          tests/data/hazards), tests (the two GPU test files; not in the default), summary
# Every step runs in its own subprocess with a timeout and never stops the others; logs, small
# traces and JSON land under $OUT. The whole call keeps within $DEADLINE seconds (default 570):
# each step's timeout is cut to what is left, and the summary always runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
R=/tmp/capture-runs
rm -rf "$R"
mkdir -p "$OUT/logs" "$OUT/traces" "$R"
export PYTHONUNBUFFERED=1 TRACER_CACHE_DIR=/tmp/tracer-cache
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | tail -2
  export PYTHONPATH=$PWD:/tmp/site
else
  export PYTHONPATH=$PWD
fi
PY=${PY:-python3}
PROGS=$(ls tests/gpu/programs/*.py | xargs -n1 basename | sed 's/\.py$//' | grep -v -e '^ddp_train$')

END=$(( $(date +%s) + ${DEADLINE:-570} - 20 ))  # 20 s kept for the summary
run_step() {  # name limit cmd...: logs to $OUT/logs/name.log, exit code to exits.txt
  local name=$1 limit=$2; shift 2
  local left=$(( END - $(date +%s) ))
  if [ "$left" -lt 15 ]; then echo "$name skipped (deadline)" >> "$OUT/logs/exits.txt"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  echo "$name $?" >> "$OUT/logs/exits.txt"
}
export -f run_step
export OUT R PY END

jobs_list() {
  for p in $PROGS; do
    echo "trace-$p 240 $PY -m tracer trace run --memory -o $R/$p --json -- $PY tests/gpu/programs/$p.py"
    [ "$p" != gpt2_train ] && echo "csan-$p 120 env TORCH_CUDA_SANITIZER=1 $PY tests/gpu/programs/$p.py"
  done
  for w in "planted_cross_stream --shape 1024x1024x1024 --steps 2" "event_ordered_dgrad --shape 1024x1024x1024 --steps 2" \
           "linear_backward_planted" "linear_backward --steps 2"; do
    set -- $w
    echo "trace-seed-$1 240 $PY -m tracer trace run $w --memory -o $R/seed-$1 --json"
  done
}

for step in ${*:-jobs fixtures bench ddp summary}; do
  echo "=== $step $(date +%T)"
  case $step in
    jobs)
      jobs_list | xargs -P 8 -L 1 bash -c 'run_step "$@"' _
      for d in "$R"/*/; do
        n=$(basename "$d")
        [ -f "$d/trace.sqlite" ] && cp "$d/trace.sqlite" "$OUT/traces/$n.sqlite"
        [ -f "$d/command.json" ] && cp "$d/command.json" "$OUT/traces/$n.command.json"
        [ -f "$d/verdict.json" ] && cp "$d/verdict.json" "$OUT/traces/$n.verdict.json"
      done ;;
    ddp)
      DDP="$PY -m torch.distributed.run --nproc-per-node 2 tests/gpu/programs/ddp_train.py"
      run_step ddp-untraced 120 bash -c "TIMEFORMAT='wall %R s'; time $DDP"
      run_step ddp-traced 150 bash -c "TIMEFORMAT='wall %R s'; time $PY -m tracer trace run -o $R/ddp -- $DDP"
      run_step ddp-killed 170 $PY -m tracer trace run -o $R/ddp-killed --json --timeout 150 -- $DDP --kill-rank 1
      for d in ddp ddp-killed; do
        mkdir -p "$OUT/traces/$d"
        cp "$R/$d"/command.json "$R/$d"/procs/*.json "$OUT/traces/$d/" 2>/dev/null
        cp "$R/$d"/procs/*.sqlite "$R/$d"/trace.sqlite "$OUT/traces/$d/" 2>/dev/null
      done ;;
    bench)
      run_step bench 300 $PY scripts/bench_memory_capture.py --repeats 2 --timeout 120 --json "$OUT/bench_memory_capture.json" ;;
    fixtures)  # the traces of the jobs step, with their raw verdicts: copy $OUT/hazards to tests/data/hazards
      run_step fixtures 60 $PY scripts/capture_hazard_fixtures.py "$OUT/hazards" --from "$R" ;;
    tests)
      run_step tests 500 $PY -m pytest -q -m gpu tests/gpu/test_hazards_gpu.py tests/gpu/test_multiproc_gpu.py -p no:cacheprovider ;;
    summary)
      $PY scripts/device_capture_summary.py "$OUT" 2>&1 | tee "$OUT/summary.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done
du -sh "$OUT" 2>/dev/null
