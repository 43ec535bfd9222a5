#!/usr/bin/env bash
# Static checks, as CI runs them (.ci/run): ruff (rules in pyproject.toml), mypy (strict on the
# on-disk formats, the use cases and the analysis packages; pyproject.toml) and the layering rules
# of the import graph. Every check runs; the exit status is 1 when any failed.
#   bash scripts/check.sh            # from the repo root or anywhere
#   PYTHON=/path/to/python bash scripts/check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
failed=()
step() {
  local name=$1; shift
  echo "== $name: $*"
  "$@" || failed+=("$name")
}
step ruff "$PYTHON" -m ruff check tracer scripts tests
step mypy "$PYTHON" -m mypy tracer
step layering "$PYTHON" scripts/import_graph.py --check
if ((${#failed[@]})); then
  echo "static checks failed: ${failed[*]}" >&2
  exit 1
fi
echo "static checks passed: ruff, mypy, layering"
