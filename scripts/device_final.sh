#!/usr/bin/env bash
# The GPU suite in one call: single-GPU tests in two halves at once (on two GPUs when there are two),
# then the multi-process tests (torchrun jobs, two ranks sharing a GPU). Logs under $OUT/gpu/ (packed into $OUT/gpu.tgz).
#   OUT=/tmp/out bash scripts/device_final.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; L=$OUT/gpu; mkdir -p "$L"
# carried wheels: .whl (nvtx, cupti-python, defusedxml, ncu-report), .dwh/.jswheels (jsonschema: the
# tests validate JSON against the schemas), .nsysw (drgn: nsys writes reports with it)
WHEELS=$(ls .whl/*.whl .dwh/.jswheels/*.whl .nsysw/*.whl 2>/dev/null)
if [ -n "$WHEELS" ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site $WHEELS >/dev/null 2>&1
  export PYTHONPATH=$PWD:/tmp/site
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 TRACER_CACHE_DIR=/tmp/tracer-cache
T=${T:-400}
B=$(( $(nvidia-smi -L 2>/dev/null | grep -c "^GPU") > 1 ? 1 : 0 ))  # one GPU: both halves share it
PT="python3 -m pytest -q -m gpu -p no:cacheprovider -rs"
CUDA_VISIBLE_DEVICES=0 timeout "$T" $PT tests/gpu --ignore=tests/gpu/test_multiproc_gpu.py \
  --ignore=tests/gpu/test_hazards_gpu.py --ignore=tests/gpu/test_nontorch_gpu.py --ignore=tests/gpu/test_fsdp_gloo_gpu.py \
  --ignore=tests/gpu/test_ops_gpu.py > "$L/a.log" 2>&1 &
CUDA_VISIBLE_DEVICES=$B timeout "$T" $PT tests/gpu/test_hazards_gpu.py tests/gpu/test_nontorch_gpu.py \
  tests/gpu/test_ops_gpu.py > "$L/b.log" 2>&1 &
wait
timeout 170 $PT tests/gpu/test_multiproc_gpu.py tests/gpu/test_fsdp_gloo_gpu.py > "$L/c.log" 2>&1
for f in a b c; do echo "== $f"; tail -3 "$L/$f.log"; grep -E "^(FAILED|ERROR)" "$L/$f.log" | head -20; done
tar czf "$OUT/gpu.tgz" -C "$OUT" gpu && rm -rf "$L"
