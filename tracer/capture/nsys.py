"""Nsight Systems backend: `nsys profile` then `nsys export --type sqlite`.

Where nsys cannot import its own capture (the nsys shipped inside Nsight Compute has no
QdstrmImporter: "Unable to retrieve the importer version"), it says so and points at the CUPTI
backend instead of producing an empty trace.
"""
from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

IMPORTER_MISSING = "Unable to retrieve the importer version"
SEARCH_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)


def find_nsys() -> str | None:
    """$TRACER_NSYS, then PATH, then the usual install folders (full Nsight Systems first)."""
    env = os.environ.get("TRACER_NSYS")
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in SEARCH_GLOBS:
        hits = sorted(glob.glob(pattern), reverse=True)
        if hits:
            return hits[0]
    return None


def find_importer(nsys: str) -> Path | None:
    real = Path(os.path.realpath(nsys))
    for folder in (real.parent, *real.parent.parent.glob("host-linux-*"), *real.parent.parent.parent.glob("host-linux-*")):
        cand = folder / "QdstrmImporter"
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def importer_status() -> tuple[bool, str]:
    """(can nsys write reports, what was found or why not)."""
    nsys = find_nsys()
    if nsys is None:
        return False, "nsys not found (install Nsight Systems, or set TRACER_NSYS); use --backend cupti"
    importer = find_importer(nsys)
    if importer is None:
        return False, (f"{nsys} has no QdstrmImporter beside it, so it cannot write reports "
                       f"(\"{IMPORTER_MISSING}\"); use --backend cupti")
    return True, f"{nsys} with {importer}"


def profile_argv(nsys: str, output_base: Path, command: list[str], *, cuda_event_trace: bool = False,
                 capture_range: str | None = None) -> list[str]:
    """`nsys profile` with CUDA + NVTX + OS runtime tracing, sampling off, exported to SQLite."""
    argv = [nsys, "profile", "--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none",
            "--force-overwrite=true", "--export=sqlite", "--output", str(output_base)]
    if cuda_event_trace:
        argv.append("--cuda-event-trace=true")
    if capture_range:
        argv += ["--capture-range=nvtx", f"--nvtx-capture={capture_range}", "--capture-range-end=stop"]
    return argv + list(command)


def require_importer() -> str:
    from tracer.errors import ToolMissingError

    ok, detail = importer_status()
    if not ok:
        raise ToolMissingError(detail)
    nsys = find_nsys()
    assert nsys is not None
    return nsys


def capture(command: list[str], out: Path, logs: Path, timeout: float, *, cuda_event_trace: bool = False,
            capture_range: str | None = None):
    """Profile `command` with nsys; the SQLite export lands at `out`."""
    from tracer import proc
    from tracer.errors import ToolMissingError

    nsys = require_importer()
    base = out.with_suffix("")
    argv = profile_argv(nsys, base, command, cuda_event_trace=cuda_event_trace, capture_range=capture_range)
    res = proc.run(argv, timeout=timeout, stdout_path=logs / "stdout.log", stderr_path=logs / "stderr.log")
    text = res.stdout() + res.stderr()
    if IMPORTER_MISSING in text:
        raise ToolMissingError(f"nsys could not import its capture (\"{IMPORTER_MISSING}\"); use --backend cupti")
    produced = base.with_suffix(".sqlite")
    if produced.is_file() and produced != out:
        produced.replace(out)
    return res


def export_sqlite(rep: Path) -> Path:
    """`nsys export --type sqlite` of an .nsys-rep, next to it (reused when already there)."""
    from tracer import proc
    from tracer.errors import ToolMissingError, TraceFormatError

    out = rep.with_suffix(".sqlite")
    if out.is_file() and out.stat().st_mtime >= rep.stat().st_mtime:
        return out
    nsys = find_nsys()
    if nsys is None:
        raise ToolMissingError(f"{rep}: reading .nsys-rep needs nsys (install Nsight Systems) to export it to SQLite")
    res = proc.capture([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(rep)],
                       timeout=600)
    if res.returncode != 0 or not out.is_file():
        raise TraceFormatError(f"{rep}: nsys export failed (exit {res.returncode}): {res.stderr.strip()[:300]}")
    return out
