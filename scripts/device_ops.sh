#!/usr/bin/env bash
# Issue #26 on the GPU machine, in one call (under $DEADLINE seconds, default 280):
#   bash scripts/device_ops.sh [capture] [tests] [bench]
#   capture: every tests/gpu/programs/ops_*.py (and the older hazard programs named in $ALSO) under
#            `tracer trace run --memory`, PyTorch's CUDA stream sanitizer (CSAN) on each, and what the
#            capture recorded of copies, memsets and graphs (raw table counts), 3 at a time
#   tests:   the GPU tests of this work (tests/gpu/test_ops_gpu.py)
#   bench:   scripts/bench_trace.py cases ops (1M kernels + 500k copies and memsets, 8 streams) and hazards
#            (the same without copies), each beside the checkout two levels up (the main tree) on the same
#            file, analyses pinned to 2 cores
# Everything lands under $OUT (default /tmp/out) and is packed into $OUT/ops.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
R=/tmp/ops-runs
rm -rf "$R"
mkdir -p "$OUT/logs" "$OUT/traces" "$R"
source scripts/device_common.sh  # environment, carried wheels, run_one
PY=${PY:-python3}
STEPS=${*:-capture}
END=$(( $(date +%s) + ${DEADLINE:-280} - 15 ))
ALSO=${ALSO:-raw_no_wait event_ordered graph_no_wait}

export -f run_one
export OUT R PY END

raw_counts() {  # what one capture recorded of copies, memsets and graphs
  "$PY" - "$1" <<'PYEOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
def q(sql):
    try:
        return con.execute(sql).fetchall()
    except sqlite3.Error as exc:
        return f"error: {exc}"
print("memcpy", q("SELECT copyKind, count(*), sum(graphNodeId > 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"))
print("memset", q("SELECT count(*), sum(graphNodeId > 0) FROM CUPTI_ACTIVITY_KIND_MEMSET"))
print("ops by kind", q("SELECT kind, count(*) FROM TRACER_OPS GROUP BY 1"))
print("copy-arg ops", q("SELECT s.value, a.address, a.bytes, a.mode, a.exact, a.allocationId FROM TRACER_OPS o "
                        "JOIN StringIds s ON s.id = o.nameId JOIN TRACER_MEMORY_ACCESS a ON a.opId = o.id WHERE o.kind = 4"))
print("graph launches", q("SELECT * FROM TRACER_GRAPH_LAUNCHES") if "TRACER_GRAPH_LAUNCHES" in tables else "none")
print("graph edges", q("SELECT * FROM TRACER_GRAPH_EDGES") if "TRACER_GRAPH_EDGES" in tables else "none")
print("graph nodes", q("SELECT * FROM TRACER_GRAPH_NODES") if "TRACER_GRAPH_NODES" in tables else "none")
print("graph kernels", q("SELECT streamId, correlationId, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId > 0"))
print("meta", q("SELECT name, value FROM META_DATA_EXPORT WHERE name LIKE 'TRACER_MEMORY%' OR name LIKE 'TRACER_RECORD%'"))
PYEOF
}

if [[ " $STEPS " == *" capture "* ]]; then
  progs=$(ls tests/gpu/programs/ops_*.py | xargs -n1 basename | sed 's/\.py$//')
  {
    for p in $progs $ALSO; do
      echo "trace-$p 150 $PY -m tracer trace run --memory -o $R/$p --json -- $PY tests/gpu/programs/$p.py"
      echo "csan-$p 90 env TORCH_CUDA_SANITIZER=1 $PY tests/gpu/programs/$p.py"
    done
    echo "trace-planted_cross_stream 150 $PY -m tracer trace run --memory -o $R/planted_cross_stream --json -- $PY -m tracer run planted_cross_stream --shape 1024x1024x1024 --steps 2 --no-fail-on-check"
    echo "trace-event_ordered_dgrad 150 $PY -m tracer trace run --memory -o $R/event_ordered_dgrad --json -- $PY -m tracer run event_ordered_dgrad --shape 1024x1024x1024 --steps 2 --no-fail-on-check"
  } | xargs -P 3 -L 1 bash -c 'run_one "$@"' _
  for d in "$R"/*/; do
    n=$(basename "$d"); mkdir -p "$OUT/traces/$n"
    cp "$d"/trace.sqlite "$d"/verdict.json "$d"/command.json "$OUT/traces/$n/" 2>/dev/null
    cp "$d"/logs/stderr.log "$OUT/traces/$n/" 2>/dev/null
    [ -f "$d/trace.sqlite" ] && raw_counts "$d/trace.sqlite" > "$OUT/traces/$n/raw.txt" 2>&1
    $PY -m tracer trace analyze "$d/trace.sqlite" > "$OUT/traces/$n/analyze.txt" 2>&1
  done
fi
if [[ " $STEPS " == *" tests "* ]]; then
  run_one gpu-tests 200 $PY -m pytest -q -x -p no:cacheprovider tests/gpu/test_ops_gpu.py
fi
if [[ " $STEPS " == *" bench "* ]]; then
  run_one bench 260 $PY scripts/bench_trace.py --cases ops,hazards --baseline ../.. --json "$OUT/logs/bench.json"
fi
tar -czf "$OUT/ops.tgz" -C "$OUT" logs traces 2>/dev/null
rm -rf "$OUT/logs" "$OUT/traces"
ls -la "$OUT"
