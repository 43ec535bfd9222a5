#!/usr/bin/env bash
# Issue #26's second round on the GPU machine, in one call (under $DEADLINE seconds, default 330):
#   bash scripts/device_memory.sh [capture] [tests] [bench] [profile]
#   capture: the new programs (3D copies, a CUDA-array copy, collectives with NCCL at one rank, the
#            capture window) under `tracer trace run --memory` (window_steps with --memory-steps 1:3),
#            and PyTorch's CUDA stream sanitizer (CSAN) on each, 3 at a time
#   tests:   their GPU tests (tests/gpu/test_memory_window_gpu.py, and test_ops_gpu.py's new programs)
#   bench:   scripts/bench_memory_capture.py --per-step on linear_backward and on GPT-2 ($REPEATS, default 1)
#   profile: cProfile of GPT-2's steps under --memory (what the per-step overhead is made of)
# Everything lands under $OUT (default /tmp/out), packed into $OUT/memory.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
R=/tmp/memory-runs
rm -rf "$R"
mkdir -p "$OUT/logs" "$OUT/traces" "$R"
source scripts/device_common.sh  # environment, carried wheels, run_one
PY=${PY:-python3}
STEPS=${*:-capture tests bench profile}
END=$(( $(date +%s) + ${DEADLINE:-330} - 15 ))
REPEATS=${REPEATS:-1}
PROGS=${PROGS:-"ops_copy3d array_copy collective_no_wait collective_ddp window_steps"}

export -f run_one
export OUT R PY END
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/logs/gpu.txt" 2>&1
uptime > "$OUT/logs/load.txt"

if [[ " $STEPS " == *" capture "* ]]; then
  {
    for p in $PROGS; do
      window=""; [ "$p" = window_steps ] && window="--memory-steps 1:3"
      echo "trace-$p 120 $PY -m tracer trace run --memory $window -o $R/$p --json -- $PY tests/gpu/programs/$p.py"
      echo "csan-$p 90 env TORCH_CUDA_SANITIZER=1 $PY tests/gpu/programs/$p.py"
    done
  } | xargs -P 3 -L 1 bash -c 'run_one "$@"' _
  for d in "$R"/*/; do
    n=$(basename "$d"); mkdir -p "$OUT/traces/$n"
    cp "$d"/trace.sqlite "$d"/verdict.json "$d"/command.json "$OUT/traces/$n/" 2>/dev/null
    cp "$d"/logs/stderr.log "$OUT/traces/$n/" 2>/dev/null
    $PY -m tracer trace analyze "$d/trace.sqlite" > "$OUT/traces/$n/analyze.txt" 2>&1
    $PY - "$d/trace.sqlite" > "$OUT/traces/$n/raw.txt" 2>&1 <<'PYEOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
def q(sql):
    try:
        return con.execute(sql).fetchall()
    except sqlite3.Error as exc:
        return f"error: {exc}"
print("kernels", q("SELECT s.value, k.streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName GROUP BY 1, 2"))
print("memcpy", q("SELECT copyKind, streamId, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2"))
print("ops", q("SELECT s.value, o.kind, count(*) FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId WHERE s.value LIKE 'c10d%' OR o.kind = 4 GROUP BY 1, 2"))
print("unknown", q("SELECT * FROM TRACER_LAUNCH_UNKNOWN"))
print("windows", q("SELECT * FROM TRACER_MEMORY_WINDOWS"))
print("meta", q("SELECT name, value FROM META_DATA_EXPORT WHERE name LIKE 'TRACER_MEMORY%' OR name LIKE 'TRACER_RECORD%' OR name LIKE 'TRACER_FAST%'"))
PYEOF
  done
fi
if [[ " $STEPS " == *" tests "* ]]; then
  run_one gpu-tests 150 $PY -m pytest -q -p no:cacheprovider tests/gpu/test_memory_window_gpu.py tests/gpu/test_ops_gpu.py -k "${TESTS:-window or collective or copy3d or ddp or array}"
fi
if [[ " $STEPS " == *" profile "* ]]; then
  run_one profile-gpt2 90 $PY -m tracer trace run --memory -o $R/prof --no-hazards -- $PY scripts/step_workload.py gpt2 --steps 6 --profile $OUT/logs/gpt2-memory.prof
  $PY -c "import pstats; s = pstats.Stats('$OUT/logs/gpt2-memory.prof'); s.sort_stats('tottime').print_stats(35); s.sort_stats('cumtime').print_stats(25)" > "$OUT/logs/profile.txt" 2>&1
fi
if [[ " $STEPS " == *" bench "* ]]; then
  run_one bench-gpt2 200 $PY scripts/bench_memory_capture.py --per-step gpt2 --steps ${BENCH_STEPS:-10} --window 3 --repeats "$REPEATS" --json "$OUT/logs/bench-gpt2.json"
  run_one bench-linear 200 $PY scripts/bench_memory_capture.py --per-step linear_backward --steps ${BENCH_STEPS:-10} --window 3 --repeats "$REPEATS" --json "$OUT/logs/bench-linear.json"
fi
uptime >> "$OUT/logs/load.txt"
tar -czf "$OUT/memory.tgz" -C "$OUT" logs traces 2>/dev/null
rm -rf "$OUT/logs" "$OUT/traces"
ls -la "$OUT"
