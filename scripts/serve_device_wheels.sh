#!/usr/bin/env bash
# Before the device check: the wheels `tracer serve` needs that the GPU image lacks (Starlette,
# uvicorn and theirs; httptools and uvloop, which uvicorn uses when present), for CPython 3.12 on
# x86-64 Linux, into .serve-wheels/ of this checkout (git-ignored; it travels with the copy of the
# tree the device gets). scripts/serve_device_check.sh installs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# SERVE_WHEELS_PY: another CPython version (a dry run of the device check on a machine without 3.12)
"$PY" -m pip download -q --only-binary=:all: --python-version "${SERVE_WHEELS_PY:-3.12}" --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d .serve-wheels starlette uvicorn httptools uvloop
ls .serve-wheels
