#!/usr/bin/env bash
# On the GPU device (run from a copy of the checkout at .dev/serve, the project's wheels carried at
# ../../.whl, the service's at .serve-wheels: scripts/serve_device_wheels.sh fetches them): install
# both into /tmp/site, then scripts/serve_device_check.py writes its report and runs into $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls .serve-wheels/*.whl >/dev/null 2>&1; then
  echo "serve_device_check: no .serve-wheels/*.whl in $(pwd): run scripts/serve_device_wheels.sh before copying the tree" >&2
  exit 2
fi
SITE=${SERVE_SITE:-/tmp/site}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  ../../.whl/*.whl .serve-wheels/*.whl
export PYTHONPATH=$PWD:$SITE PYTHONUNBUFFERED=1 TRACER_CACHE_DIR=/tmp/tracer-cache
python3 scripts/serve_device_check.py --out "$OUT" --deadline "${DEADLINE:-150}"
