#!/usr/bin/env bash
# One call on the GPU machine: install carried wheels, run the GPU tests, the benchmarks and the
# fixture captures, and pack everything into $OUT/results.tar.gz.
#   bash scripts/device_session.sh [steps...]   steps: info tests bench sanitize traces tracebench
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
steps=${*:-info bench sanitize_bg tests traces wait}
for step in $steps; do
  echo "=== $step $(date +%T)"
  case $step in
    info)
      nvidia-smi > $R/nvidia-smi.txt 2>&1
      compute-sanitizer --version > $R/sanitizer-version.txt 2>&1
      compute-sanitizer --help > $R/sanitizer-help.txt 2>&1
      python3 -m tracer doctor > $R/doctor.txt 2>&1; cat $R/doctor.txt ;;
    tests)
      timeout 420 python3 -m pytest -q -m gpu tests/gpu -x -p no:cacheprovider --junitxml=$R/gpu-junit.xml 2>&1 | tee $R/gpu-tests.log | tail -25 ;;
    bench)
      timeout 200 python3 scripts/bench_cast_transpose.py --json $R/bench_cast_transpose.json 2>&1 | tee $R/bench_cast_transpose.txt ;;
    sanitize)
      timeout 500 python3 scripts/capture_sanitizer.py $R/sanitizer --jobs 12 --timeout 420 2>&1 | tee $R/capture_sanitizer.txt | tail -30 ;;
    sanitize_bg)
      (timeout 500 python3 scripts/capture_sanitizer.py $R/sanitizer --jobs 12 --timeout 420 > $R/capture_sanitizer.txt 2>&1) &
      SAN_PID=$! ;;
    wait)
      [ -n "${SAN_PID:-}" ] && wait $SAN_PID; tail -30 $R/capture_sanitizer.txt ;;
    traces)
      timeout 400 python3 scripts/capture_traces.py $R/traces 2>&1 | tee $R/capture_traces.txt | tail -20 ;;
    tracebench)
      timeout 300 python3 scripts/bench_trace.py --gpu --json $R/bench_trace.json 2>&1 | tee $R/bench_trace.txt | tail -20 ;;
    *) echo "unknown step $step" ;;
  esac
done
