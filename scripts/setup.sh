#!/usr/bin/env bash
# Install tracer into ./.venv on a fresh machine, GPU box or not.
# A GPU box keeps its CUDA build of torch (the venv sees system site-packages); a machine without
# torch gets the CPU wheel torch==2.13.0 (an unpinned torch would pull a multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "setup: $*" >&2; }  # what is running: the whole set-up takes about a minute or two
step "making .venv"
python3 -m venv --system-site-packages .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -c "import torch" 2>/dev/null || { step "installing torch==2.13.0 (the CPU wheel)"; python -m pip install -q torch==2.13.0; }
extras="test"
if command -v nvidia-smi >/dev/null 2>&1; then extras="test,cupti"; fi
# The distribution was called `tracer` before it became tracer-nsight (`tracer` on the package index
# is another project): drop an old editable install of this checkout under the old name.
if python -m pip show tracer 2>/dev/null | grep -qx "Editable project location: $(pwd)"; then
  python -m pip uninstall -q -y tracer
fi
step "installing tracer from this checkout with extras [$extras]"
python -m pip install -q -e ".[$extras]"
bash scripts/install_chromium.sh || true   # the `tracer serve` browser tests (root + apt only; they skip without it)
bash scripts/install_shells.sh || true   # zsh and fish for the completion tests (root + apt only; they skip without them)
echo "tracer installed in $(pwd)/.venv ($(python -c 'import torch; print("torch", torch.__version__, "cuda" if torch.cuda.is_available() else "cpu")'))"
