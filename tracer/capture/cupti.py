"""CUPTI backend: run a Python target in a child process under cupti-python activity tracing;
NVTX reaches CUPTI through NVTX_INJECTION64_PATH pointing at libcupti."""
from __future__ import annotations

import glob
import importlib.util
import os
import sys
from pathlib import Path

from tracer import proc
from tracer.errors import ToolMissingError, UsageError


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


def python_target(command: list[str]) -> list[str]:
    """The target as a Python argv for runpy: `python X...` loses the interpreter, a .py script
    or `-m`/`-c` is kept; anything else is not Python and needs the nsys backend."""
    if not command:
        raise UsageError("no command given after --")
    first = Path(command[0]).name
    if first.startswith("python"):
        rest = command[1:]
        if not rest:
            raise UsageError("`python` with no script, -m or -c cannot be traced")
        return rest
    if command[0] in ("-m", "-c") or command[0].endswith(".py"):
        return command
    raise UsageError(f"{command[0]!r} is not a Python command: the CUPTI backend traces Python targets only; "
                     "use --backend nsys for other binaries")


def child_env(libcupti: str) -> dict[str, str]:
    env = dict(os.environ)
    env["NVTX_INJECTION64_PATH"] = libcupti
    env["PYTHONUNBUFFERED"] = "1"
    root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def capture(command: list[str], out: Path, logs: Path, timeout: float) -> proc.ProcResult:
    """Trace `command` into out (nsys-schema SQLite); stdout/stderr go to logs/."""
    require_cupti_python()
    target = python_target(command)
    argv = [sys.executable, "-m", "tracer.capture.cupti_child", str(out), "--", *target]
    return proc.run(argv, timeout=timeout, stdout_path=logs / "stdout.log", stderr_path=logs / "stderr.log",
                    env=child_env(find_libcupti()))
