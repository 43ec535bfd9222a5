"""CUPTI backend: where libcupti and cupti-python are (each traced process records itself:
session.py, started by the bootstrap that launcher.py installs, whose `capture` is the
single-file API); NVTX reaches CUPTI through NVTX_INJECTION64_PATH pointing at libcupti."""
from __future__ import annotations

import glob
import importlib.util
import os
import sys
from pathlib import Path

from tracer.errors import ToolMissingError


def find_libcupti() -> str:
    """libcupti.so from the NVIDIA pip wheels (torch's nvidia/cu13/lib included), then CUDA_HOME."""
    env = os.environ.get("TRACER_LIBCUPTI")
    if env:
        return env
    roots = [Path(p) for p in sys.path if p and Path(p).is_dir()]
    patterns = [str(r / "nvidia" / "*" / "lib" / "libcupti.so*") for r in roots]
    patterns += [str(r / "nvidia" / "cuda_cupti" / "lib" / "libcupti.so*") for r in roots]
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    patterns += [f"{cuda_home}/extras/CUPTI/lib64/libcupti.so*", f"{cuda_home}/lib64/libcupti.so*"]
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    raise ToolMissingError("libcupti.so not found (pip install cupti-python, which brings nvidia-cuda-cupti); "
                           "or set TRACER_LIBCUPTI")


def require_cupti_python() -> None:
    if importlib.util.find_spec("cupti") is None:
        raise ToolMissingError("cupti-python is not installed: pip install cupti-python (matching your CUDA major version)")


def child_env(libcupti: str) -> dict[str, str]:
    """The environment of a single in-process capture (tracer.capture.cupti_child)."""
    env = dict(os.environ)
    env["NVTX_INJECTION64_PATH"] = libcupti
    env["PYTHONUNBUFFERED"] = "1"
    root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
