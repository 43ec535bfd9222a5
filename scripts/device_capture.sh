#!/usr/bin/env bash
# The capture work of issues #15/#16 in one call on the GPU machine (under $DEADLINE seconds, default 290):
#   bash scripts/device_capture.sh [steps...]
#   default steps: ddp-killed bench ddp summary (plus ddp-nccl when the machine has 2+ GPUs)
#   steps: ddp-killed (torchrun 2 ranks, rank 1 SIGKILLs itself mid-step after 5 s idle: its partial trace,
#                      rank 0 SIGTERMed by torchrun in its next all-reduce writes its trace; outcomes, exit 7)
#          bench (scripts/bench_memory_capture.py: untraced / CUPTI / --memory and its parts / CSAN, with
#                 where the time goes, from the markers)
#          ddp (scripts/bench_ddp_capture.py: torchrun DDP untraced vs traced, $DDP_REPEATS (3) repeats, medians,
#               per process)
#          compile (tracer's bytecode compiled once, as a wheel install does; before timing start-up)
#          probe (what `trace run`'s GPU check costs before the command: tracer.gpu.probe, timed in-process)
#          ddp-nccl (2 GPUs: one rank per GPU over NCCL, traced: NCCL kernels on their own streams, event edges)
#          jobs (every test program under --memory, CSAN on each, the seed workloads; in parallel)
#          fixtures (the jobs' traces as tests/data/hazards), tests (the GPU tests of this work), summary
# Every step runs with a timeout cut to what is left and never stops the others; at the end everything
# under $OUT is packed into $OUT/capture.tgz, with summary.txt beside it.
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
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
PROGS=$(ls tests/gpu/programs/*.py | xargs -n1 basename | sed 's/\.py$//' | grep -v -e '^ddp_train$')
DDP="$PY -m torch.distributed.run --nproc-per-node 2 tests/gpu/programs/ddp_train.py"

END=$(( $(date +%s) + ${DEADLINE:-290} - 15 ))  # 15 s kept for the summary and the archive
run_step() {  # name limit cmd...: logs to $OUT/logs/name.log, exit code to exits.txt
  local name=$1 limit=$2; shift 2
  local left=$(( END - $(date +%s) ))
  if [ "$left" -lt 10 ]; then echo "$name skipped (deadline)" >> "$OUT/logs/exits.txt"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  echo "$name $?" >> "$OUT/logs/exits.txt"
}
export -f run_step
export OUT R PY END

keep_run() {  # a run directory's small files: command.json, verdict, process markers, traces, logs
  local d=$R/$1; mkdir -p "$OUT/traces/$1"
  cp "$d"/*.json "$d"/procs/*.json "$d"/procs/*.sqlite "$d"/trace.sqlite "$OUT/traces/$1/" 2>/dev/null
  cp -r "$d/logs" "$OUT/traces/$1/" 2>/dev/null
}

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

DEFAULT="ddp-killed bench ddp"
[ "$GPUS" -ge 2 ] && DEFAULT="$DEFAULT ddp-nccl"
echo "gpus $GPUS, steps ${*:-$DEFAULT summary}" > "$OUT/logs/plan.txt"
for step in ${*:-$DEFAULT summary}; do
  echo "=== $step $(date +%T)"
  case $step in
    ddp-killed)
      run_step ddp-killed 90 $PY -m tracer trace run -o $R/ddp-killed --json --timeout 80 -- $DDP --kill-rank 1 --kill-after 5
      keep_run ddp-killed ;;
    bench)
      run_step bench 150 $PY scripts/bench_memory_capture.py --repeats 2 --timeout 60 --json "$OUT/bench_memory_capture.json" ;;
    ddp)
      run_step ddp $(( 40 * ${DDP_REPEATS:-3} )) $PY scripts/bench_ddp_capture.py --repeats ${DDP_REPEATS:-3} --timeout 60 \
        --json "$OUT/bench_ddp_capture.json" ;;
    compile)
      run_step compile 60 $PY -m compileall -q tracer ;;
    probe)
      run_step probe 30 $PY -c "import time; t = time.perf_counter(); from tracer.gpu import probe; p = probe(); \
print(p, f'{time.perf_counter() - t:.3f} s')" ;;
    ddp-nccl)
      run_step ddp-nccl 90 $PY -m tracer trace run -o $R/ddp-nccl --timeout 80 -- $DDP
      keep_run ddp-nccl ;;
    jobs)
      jobs_list | xargs -P 8 -L 1 bash -c 'run_step "$@"' _
      for d in "$R"/*/; do
        n=$(basename "$d")
        [ -f "$d/trace.sqlite" ] && cp "$d/trace.sqlite" "$OUT/traces/$n.sqlite"
        [ -f "$d/command.json" ] && cp "$d/command.json" "$OUT/traces/$n.command.json"
        [ -f "$d/verdict.json" ] && cp "$d/verdict.json" "$OUT/traces/$n.verdict.json"
      done ;;
    fixtures)  # the traces of the jobs step, with their raw verdicts: copy $OUT/hazards to tests/data/hazards
      run_step fixtures 60 $PY scripts/capture_hazard_fixtures.py "$OUT/hazards" --from "$R" ;;
    tests)
      run_step tests 280 $PY -m pytest -q -m gpu tests/gpu/test_hazards_gpu.py tests/gpu/test_multiproc_gpu.py \
        tests/gpu/test_trace_gpu.py -p no:cacheprovider ;;
    summary)
      $PY scripts/device_capture_summary.py "$OUT" > "$OUT/summary.txt" 2>&1; cat "$OUT/summary.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done
tar czf /tmp/capture.tgz -C "$OUT" . && mv /tmp/capture.tgz "$OUT/capture.tgz" && \
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name capture.tgz ! -name summary.txt -exec rm -rf {} + && ls -la "$OUT"
