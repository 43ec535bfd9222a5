"""Nsight Systems backend: `nsys profile` then `nsys export --type sqlite`.

nsys records into a `.qdstrm` and its QdstrmImporter turns that into the report; without a
working importer it writes no report at all (a `.qdstrm` of up to gigabytes and "Unable to
retrieve the importer version"). `find_writer` therefore proves that the importer loads (`ldd`)
before any capture: a full Nsight Systems install has everything; the nsys inside Nsight Compute's
folder lacks elfutils (`libdw.so.1`), which tracer supplies from a folder it prepares
(tracer.capture.nsys_libs) on LD_LIBRARY_PATH of the nsys child only. Anything else stops with
the reason and points at the CUPTI backend.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracer.capture import nsys_libs
from tracer.errors import ToolMissingError

if TYPE_CHECKING:
    from tracer.proc import ProcResult

IMPORTER_MISSING = "Unable to retrieve the importer version"
SEARCH_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)
IMPORTER_FOLDERS = ("host-linux-*", "linux-desktop-*")  # beside nsys's target-linux-x64 folder
NOT_FOUND = re.compile(r"^\s*(\S+) => not found", re.M)
TRACE = "--trace=cuda,nvtx"
# nsys matches an NVTX capture range only against registered strings unless told otherwise;
# torch and the nvtx package push plain ones.
CHILD_ENV = {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}


@dataclass(frozen=True)
class NsysWriter:
    """An nsys that can write reports, and what it needs to: `libs` goes on LD_LIBRARY_PATH."""

    nsys: str
    importer: Path
    libs: nsys_libs.Prepared | None  # None: the importer loads as installed
    prepared_now: bool = False  # tracer copied the libraries in this call

    def env(self) -> dict[str, str]:
        """tracer's environment for the nsys child, with CHILD_ENV and the library folder."""
        env = dict(os.environ) | CHILD_ENV
        if self.libs is not None:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(self.libs.folder), env.get("LD_LIBRARY_PATH", "")) if p)
        return env

    def describe(self) -> str:
        how = (f"; QdstrmImporter loads with {self.libs.describe()} on LD_LIBRARY_PATH of nsys only"
               if self.libs is not None else "")
        return f"{self.nsys} with {self.importer}{how}"


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
    folders = [real.parent]
    for up in (real.parent.parent, real.parent.parent.parent):
        folders += [f for pattern in IMPORTER_FOLDERS for f in sorted(up.glob(pattern))]
    for folder in folders:
        cand = folder / "QdstrmImporter"
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def missing_libraries(importer: Path, libs: Path | None = None) -> list[str]:
    """The shared libraries the importer cannot load (`ldd`), with `libs` on LD_LIBRARY_PATH."""
    from tracer import proc

    ldd = shutil.which("ldd")
    if ldd is None:
        return []  # nothing to probe with: the capture's own check (no report) still fails closed
    env_libs = os.pathsep.join(p for p in (str(libs) if libs else "", os.environ.get("LD_LIBRARY_PATH", "")) if p)
    argv = ["env", f"LD_LIBRARY_PATH={env_libs}", ldd, str(importer)]
    res = proc.capture(argv, timeout=60)
    return sorted(set(NOT_FOUND.findall(res.stdout + res.stderr)))


def find_writer(prepare: bool = False, source: Path | None = None) -> NsysWriter:
    """An nsys whose importer loads, or ToolMissingError saying why not. `prepare`: copy the
    elfutils libraries (from `source`, else the installed drgn) when the importer lacks only them."""
    nsys = find_nsys()
    if nsys is None:
        raise ToolMissingError("nsys not found (install Nsight Systems, or set TRACER_NSYS); use --backend cupti")
    importer = find_importer(nsys)
    if importer is None:
        raise ToolMissingError(f"{nsys} has no QdstrmImporter beside it, so it cannot write reports "
                               f"(\"{IMPORTER_MISSING}\"); use --backend cupti")
    missing = missing_libraries(importer)
    if not missing:
        return NsysWriter(nsys, importer, None)
    cannot = f"{importer} cannot load {', '.join(missing)}, so {nsys} cannot write reports"
    if set(missing) - set(nsys_libs.SONAMES):
        raise ToolMissingError(f"{cannot}; use --backend cupti")
    libs, fresh = nsys_libs.cached(), False
    if (libs is None or source is not None) and prepare:
        libs, fresh = nsys_libs.prepare(source), True
    if libs is None:
        raise ToolMissingError(f"{cannot}: {nsys_libs.HOW}; or use --backend cupti")
    still = missing_libraries(importer, libs.folder)
    if still:
        raise ToolMissingError(f"{importer} still cannot load {', '.join(still)} with {libs.describe()}; use --backend cupti")
    return NsysWriter(nsys, importer, libs, fresh)


def importer_status() -> tuple[bool, str]:
    """(can nsys write reports as things stand, which one and how, or why not); prepares nothing."""
    try:
        return True, find_writer().describe()
    except ToolMissingError as exc:
        return False, str(exc)


def profile_argv(nsys: str, output_base: Path, command: list[str], *, cuda_event_trace: bool = False,
                 capture_range: str | None = None) -> list[str]:
    """`nsys profile` with CUDA + NVTX tracing, CPU sampling and context switches off, exported to SQLite."""
    argv = [nsys, "profile", TRACE, "--sample=none", "--cpuctxsw=none",
            "--force-overwrite=true", "--export=sqlite", "--output", str(output_base)]
    if cuda_event_trace:
        argv.append("--cuda-event-trace=true")
    if capture_range:
        argv += ["--capture-range=nvtx", f"--nvtx-capture={capture_range}", "--capture-range-end=stop"]
    return argv + list(command)


def require_writer() -> NsysWriter:
    """The writer for a capture; prepares the libraries from an installed drgn when that is all it lacks."""
    writer = find_writer(prepare=True)
    if writer.prepared_now and writer.libs is not None:
        print(f"tracer: nsys: prepared {writer.libs.describe()} for its QdstrmImporter", file=sys.stderr)
    return writer


def capture(command: list[str], out: Path, logs: Path, timeout: float, *, cuda_event_trace: bool = False,
            capture_range: str | None = None) -> ProcResult:
    """Profile `command` with nsys; the SQLite export lands at `out`, the report beside it."""
    from tracer import proc

    writer = require_writer()
    base = out.with_suffix("")
    argv = profile_argv(writer.nsys, base, command, cuda_event_trace=cuda_event_trace, capture_range=capture_range)
    res = proc.run(argv, timeout=timeout, stdout_path=logs / "stdout.log", stderr_path=logs / "stderr.log",
                   env=writer.env())
    (logs / "nsys.txt").write_text(writer.describe() + "\n")
    leftover = base.with_suffix(".qdstrm")
    if not base.with_suffix(".nsys-rep").is_file() and leftover.is_file():
        size = leftover.stat().st_size
        leftover.unlink()  # gigabytes that no tool here can read
        raise ToolMissingError(f"nsys wrote no report, only a {size / 1e6:.0f} MB .qdstrm (removed): its importer "
                               f"failed ({writer.describe()}); see {logs / 'stderr.log'}; use --backend cupti")
    if IMPORTER_MISSING in res.stdout() + res.stderr():
        raise ToolMissingError(f"nsys could not import its capture (\"{IMPORTER_MISSING}\"); use --backend cupti")
    produced = base.with_suffix(".sqlite")
    if produced.is_file() and produced != out:
        produced.replace(out)
    return res


def export_sqlite(rep: Path) -> Path:
    """`nsys export --type sqlite` of an .nsys-rep, next to it (reused when already there)."""
    from tracer import proc
    from tracer.errors import TraceFormatError

    out = rep.with_suffix(".sqlite")
    if out.is_file() and out.stat().st_mtime >= rep.stat().st_mtime:
        return out
    try:
        writer = find_writer(prepare=True)
        nsys, env = writer.nsys, writer.env()
    except ToolMissingError:  # export needs nsys, not the importer
        found = find_nsys()
        if found is None:
            raise ToolMissingError(f"{rep}: reading .nsys-rep needs nsys (install Nsight Systems) to export it to SQLite") from None
        nsys, env = found, dict(os.environ)
    partial = out.with_name(f".{out.stem}.partial-{os.getpid()}.sqlite")  # renamed when complete
    argv = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(partial), str(rep)]
    try:
        with tempfile.TemporaryDirectory(prefix="tracer-nsys-") as folder:
            tmp = Path(folder)
            res = proc.run(argv, timeout=600, stdout_path=tmp / "stdout", stderr_path=tmp / "stderr", env=env)
            err = res.stderr()
        if res.returncode != 0 or not partial.is_file():
            raise TraceFormatError(f"{rep}: nsys export failed (exit {res.returncode}): {err.strip()[:300]}")
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out
