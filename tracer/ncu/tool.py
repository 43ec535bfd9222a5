"""Finding ncu, and what `tracer doctor` says about Nsight Compute (ncu and the ncu-report reader)."""
from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import ToolMissingError

ENV = "TRACER_NCU"  # an explicit ncu binary wins over PATH
CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/nsight-compute*/ncu")
GET_NCU = ("install Nsight Compute (the CUDA toolkit's nsight-compute package, or NVIDIA's standalone "
           f"installer) and put ncu on PATH, or set {ENV}=/path/to/ncu")
GET_READER = "pip install ncu-report (or tracer-nsight[ncu]): reads .ncu-rep files on any machine, no GPU needed"


@dataclass(frozen=True)
class ToolStatus:
    """One line of `tracer doctor`: the same fields as its Finding (name, found, version, hint)."""

    name: str
    found: bool
    version: str
    hint: str


def find_ncu() -> str:
    explicit = os.environ.get(ENV)
    if explicit:
        if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
            raise ToolMissingError(f"{ENV}={explicit} is not an executable file")
        return explicit
    found = shutil.which("ncu")
    for pattern in CANDIDATES:
        if found:
            break
        found = next((p for p in sorted(glob.glob(pattern), reverse=True) if os.access(p, os.X_OK)), None)
    if not found:
        raise ToolMissingError(f"ncu (Nsight Compute) not found: {GET_NCU}")
    return found


def ncu_status() -> tuple[ToolStatus, ToolStatus]:
    """(ncu, ncu-report) for `tracer doctor`; never raises."""
    from tracer import proc
    from tracer.ncu.pri import load_module, reader_version

    try:
        binary = find_ncu()
        res = proc.capture([binary, "--version"], timeout=60)
        lines = (res.stdout + res.stderr).strip().splitlines()
        ncu = ToolStatus("ncu (Nsight Compute)", res.returncode == 0, lines[-1].strip() if lines else "",
                         "" if res.returncode == 0 else f"{binary} --version exited {res.returncode}")
    except Exception as exc:  # a missing or broken ncu is a finding, not a crash
        ncu = ToolStatus("ncu (Nsight Compute)", False, "", str(exc).removeprefix("ncu (Nsight Compute) not found: "))
    version = reader_version()
    loads = version is not None and load_module() is not None
    hint = "" if loads else (GET_READER if version is None else f"ncu-report {version} is installed but does not load")
    return ncu, ToolStatus("ncu-report (reads .ncu-rep)", loads, version or "", hint)
