#!/usr/bin/env bash
# One device session for the nsys backend (issue #31): find nsys, let it write reports
# (`tracer doctor --fix-nsys`), the side-by-side bench, the fixtures, the GPU tests.
# Usage (repository root, tracer and drgn importable):  bash scripts/device_nsys.sh OUT [DRGN_WHEEL]
# Brings back OUT/nsys-fixtures.tgz (the .sqlite fixtures) and OUT/nsys-results.tgz (the rest, no traces).
set -u
OUT=$1
WHEEL=${2:-}
W=$OUT/work
mkdir -p "$W"
echo "== discovery"
ls -d /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys /usr/local/cuda/bin/nsys 2>/dev/null
NSYS=$(python -c 'from tracer.capture.nsys import find_nsys; print(find_nsys())')
echo "nsys: $NSYS"; "$NSYS" --version
"$NSYS" profile --help | grep -E -A2 -- "--cuda-event-trace|--capture-range[^-]|--nvtx-capture" | head -30
python -m tracer doctor | grep -i nsys
echo "== fix"
python -m tracer doctor --fix-nsys 2>&1 | grep -v "^ok\|^--"
if ! python -m tracer doctor | grep -q "^ok  nsys can write"; then
  echo "installed drgn did not do: --from $WHEEL"; python -m tracer doctor --fix-nsys --from "$WHEEL" 2>&1 | grep -v "^ok\|^--"
fi
python -m tracer doctor | grep -i nsys
echo "== bench"
timeout 190 python scripts/bench_nsys_vs_cupti.py "$W/bench" --timeout 60
echo "== fixtures"
timeout 80 python scripts/capture_nsys_fixtures.py "$W/fixtures" --runs "$W/bench" --timeout 60
ls -la "$W/fixtures"
echo "== gpu tests"
timeout 90 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_nsys_gpu.py 2>&1 | tail -30
cd "$W" && tar czf "$OUT/nsys-fixtures.tgz" fixtures/*.sqlite fixtures/captures.json 2>/dev/null
tar czf "$OUT/nsys-results.tgz" --exclude='*.sqlite' --exclude='*.nsys-rep' --exclude='*.qdstrm' . 2>/dev/null
ls -la "$OUT"
