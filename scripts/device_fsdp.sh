#!/usr/bin/env bash
# Issue #26's third round on the GPU machine, in one call (under $DEADLINE seconds, default 240):
#   bash scripts/device_fsdp.sh
#   - the GPU tests of FSDP (NCCL, world size 1), gloo across two ranks sharing the GPU (torchrun) and
#     the NVTX window of every API (tests/gpu/test_fsdp_gloo_gpu.py), and the --memory-steps window
#     test, with their run directories kept (pytest --basetemp);
#   - alongside (CSAN=1, the default), PyTorch's CUDA stream sanitizer (CSAN) on each program;
#   (TESTS: a pytest -k expression to run fewer of them)
#   - per trace: the META counters (NVTX calls seen through CUPTI), collectives, copies, windows.
# Everything lands under $OUT (default /tmp/out), packed into $OUT/fsdp.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
R=/tmp/fsdp-runs
rm -rf "$R"
mkdir -p "$OUT/logs" "$OUT/traces" "$R"
source scripts/device_common.sh  # environment, carried wheels, run_one
PY=${PY:-python3}
END=$(( $(date +%s) + ${DEADLINE:-240} - 15 ))
P=tests/gpu/programs
TR="$PY -m torch.distributed.run --standalone --nproc-per-node 2"

export -f run_one
export OUT PY END
{ nvidia-smi --query-gpu=name,driver_version --format=csv; $PY -c "import torch; print(torch.__version__)"; which gcc nvcc;
  ls -d /usr/local/cuda*/include/nvtx3 2>&1; } > "$OUT/logs/env.txt" 2>&1
uptime > "$OUT/logs/load.txt"

[ "${CSAN:-1}" = 1 ] && {
  echo "csan-fsdp 90 env TORCH_CUDA_SANITIZER=1 $PY $P/fsdp_train.py"
  echo "csan-fsdp-planted 90 env TORCH_CUDA_SANITIZER=1 $PY $P/fsdp_train.py --planted"
  echo "csan-gloo 90 env TORCH_CUDA_SANITIZER=1 $TR $P/gloo_ddp.py"
  echo "csan-gloo-planted 90 env TORCH_CUDA_SANITIZER=1 $TR $P/gloo_ddp.py --planted"
  echo "csan-nvtx 90 env TORCH_CUDA_SANITIZER=1 $PY $P/nvtx_apis_window.py"
} | xargs -P 2 -L 1 bash -c 'run_one "$@"' _ &
CSAN_PID=$!
run_one gpu-tests 200 $PY -m pytest -q -p no:cacheprovider --basetemp "$R" -rA tests/gpu/test_fsdp_gloo_gpu.py \
  tests/gpu/test_memory_window_gpu.py ${TESTS:+-k "$TESTS"}
wait $CSAN_PID
for d in "$R"/*/run; do
  n=$(basename "$(dirname "$d")"); mkdir -p "$OUT/traces/$n"
  cp "$d"/verdict.json "$d"/command.json "$OUT/traces/$n/" 2>/dev/null
  cp -r "$d"/logs "$OUT/traces/$n/" 2>/dev/null
  for db in "$d"/trace.sqlite "$d"/procs/*.sqlite; do
    [ -f "$db" ] || continue
    [ "$(stat -c %s "$db")" -lt 8000000 ] && cp "$db" "$OUT/traces/$n/"
    $PY - "$db" >> "$OUT/traces/$n/raw.txt" 2>&1 <<'PYEOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
def q(sql):
    try:
        return con.execute(sql).fetchall()
    except sqlite3.Error as exc:
        return f"error: {exc}"
print("==", sys.argv[1])
print("kernels", q("SELECT s.value, k.streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName GROUP BY 1, 2")[:40])
print("memcpy", q("SELECT copyKind, streamId, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2"))
print("ops", q("SELECT s.value, o.kind, count(*) FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId WHERE s.value LIKE 'c10d%' GROUP BY 1, 2"))
print("unknown", q("SELECT * FROM TRACER_LAUNCH_UNKNOWN")[:20])
print("windows", q("SELECT * FROM TRACER_MEMORY_WINDOWS"))
print("markers", q("SELECT text, domainId, eventType, count(*) FROM NVTX_EVENTS GROUP BY 1, 2, 3")[:60])
print("meta", q("SELECT name, value FROM META_DATA_EXPORT WHERE name LIKE 'TRACER_MEMORY%' OR name LIKE 'TRACER_RECORD%'"))
PYEOF
  done
  $PY -m tracer trace analyze "$d" > "$OUT/traces/$n/analyze.txt" 2>&1
done
uptime >> "$OUT/logs/load.txt"
tar -czf "$OUT/fsdp.tgz" -C "$OUT" logs traces 2>/dev/null
rm -rf "$OUT/logs" "$OUT/traces"
ls -la "$OUT"
