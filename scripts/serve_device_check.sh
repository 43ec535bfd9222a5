#!/usr/bin/env bash
# On the GPU device (run from a copy of the checkout at .dev/serve, the wheels carried beside it):
# install the carried wheels into /tmp/site, then scripts/serve_device_check.py writes into $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  ../../.whl/*.whl ../serve-wheels/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 TRACER_CACHE_DIR=/tmp/tracer-cache
python3 scripts/serve_device_check.py --out "$OUT" --deadline "${DEADLINE:-100}"
