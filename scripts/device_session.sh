#!/usr/bin/env bash
# One call on the GPU machine: install carried wheels, run benchmarks, fixture captures and the GPU
# tests, and pack everything into $OUT/results.tar.gz.
#   bash scripts/device_session.sh [steps...]
#   steps: info bench ab sanitize_bg traces tracebench campbench sanbench(_bg) tests wait
#   (ab: scripts/bench_kernel_ab.py with $AB_ARGS, e.g. --edit acq_rel=scripts/ab/acq_rel_fence.yaml)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
R=/tmp/results; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1 TRACER_RESULTS=$R TRACER_CACHE_DIR=/tmp/tracer-cache
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=$PWD:/tmp/site
else
  export PYTHONPATH=$PWD
fi
pack() { tar -czf $OUT/results.tar.gz -C /tmp results; ls -la $OUT; }
trap pack EXIT
steps=${*:-info bench sanitize_bg traces tracebench tests wait}
for step in $steps; do
  echo "=== $step $(date +%T)"
  case $step in
    info)
      nvidia-smi > $R/nvidia-smi.txt 2>&1
      compute-sanitizer --version > $R/sanitizer-version.txt 2>&1
      python3 -m tracer doctor > $R/doctor.txt 2>&1; cat $R/doctor.txt ;;
    bench)
      timeout 150 python3 scripts/bench_cast_transpose.py --sweep ${BENCH_ARGS:-} --json $R/bench_cast_transpose.json 2>&1 | tee $R/bench_cast_transpose.txt ;;
    ab)
      timeout 240 python3 scripts/bench_kernel_ab.py ${AB_ARGS:-} --json $R/bench_kernel_ab.json 2>&1 | tee $R/bench_kernel_ab.txt ;;
    sanitize_bg)
      (timeout 400 python3 scripts/capture_sanitizer.py $R/sanitizer --jobs 8 --timeout 300 > $R/capture_sanitizer.txt 2>&1) &
      SAN_PID=$! ;;
    traces)
      timeout 200 python3 scripts/capture_traces.py $R/traces 2>&1 | tee $R/capture_traces.txt | tail -8 ;;
    tracebench)
      timeout 200 python3 scripts/bench_trace.py --gpu --no-cpu --repeats 3 --json $R/bench_trace.json 2>&1 | tee $R/bench_trace.txt ;;
    campbench)
      timeout 200 python3 scripts/bench_campaign.py ${CAMP_ARGS:-} --json $R/bench_campaign.json 2>&1 | tee $R/bench_campaign.txt | tail -45 ;;
    sanbench_bg)
      (timeout 420 python3 scripts/bench_sanitize.py --json $R/bench_sanitize.json > $R/bench_sanitize.txt 2>&1) &
      SANB_PID=$! ;;
    sanbench)
      timeout 400 python3 scripts/bench_sanitize.py --json $R/bench_sanitize.json 2>&1 | tail -3 | tee $R/bench_sanitize.txt ;;
    tests)
      timeout ${TEST_TIMEOUT:-330} python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider --junitxml=$R/gpu-junit.xml 2>&1 | tee $R/gpu-tests.log | tail -25 ;;
    wait)
      [ -n "${SAN_PID:-}" ] && wait $SAN_PID && tail -32 $R/capture_sanitizer.txt
      [ -n "${SANB_PID:-}" ] && wait $SANB_PID && tail -3 $R/bench_sanitize.txt ;;
    *) echo "unknown step $step" ;;
  esac
done
