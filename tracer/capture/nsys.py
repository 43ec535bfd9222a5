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
