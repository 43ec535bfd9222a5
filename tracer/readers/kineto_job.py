"""A folder of per-rank PyTorch profiler (Kineto) traces, the input HTA reads, as one job: each
`*.json` / `*.json.gz` file whose head holds `traceEvents` is a process, its rank and world size
from the trace's `distributedInfo`, its pid from its first event. Kineto timestamps are the host's
wall clock in microseconds already, so each process gets one clock pair (0, 0): offset 0, drift not
measured; the job's collectives check the alignment as for tracer's own jobs. Files are read only to
their head here; load_job reads the traces."""
from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from tracer.errors import TraceFormatError
from tracer.readers.job import ClockPairs, Ending, JobProcess, Outcome, _labels

HEAD = 1 << 20
RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
WORLD = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"world_size"\s*:\s*(\d+)')
PID = re.compile(rb'"pid"\s*:\s*"?(\d+)')


def trace_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith((".json", ".json.gz")))


def _head(path: Path) -> bytes:
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read(HEAD)
        with open(path, "rb") as fh:
            return fh.read(HEAD)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(f"{path}: not readable ({type(exc).__name__}: {exc})") from exc


def is_kineto_dir(folder: Path) -> bool:
    """A folder with at least one Kineto trace in it (a run directory's files are looked at first)."""
    return folder.is_dir() and any(b'"traceEvents"' in _head(p) for p in trace_files(folder))


def _int(rx: re.Pattern[bytes], head: bytes) -> int | None:
    m = rx.search(head)
    return int(m.group(1)) if m else None


def kineto_processes(folder: Path) -> tuple[JobProcess, ...]:
    procs = []
    for path in trace_files(folder):
        head = _head(path)
        if b'"traceEvents"' not in head:
            continue
        stem = path.name[: -len(".json.gz")] if path.name.lower().endswith(".gz") else path.stem
        procs.append(JobProcess(file=stem, label="", pid=_int(PID, head) or 0, ppid=None, host="?", rank=_int(RANK, head),
                                local_rank=None, world_size=_int(WORLD, head), ending=Ending.EXITED, exit=None, signal=None,
                                exception=None, outcome=Outcome.COMPLETE, kernels=None, trace_path=path, note="",
                                clock=ClockPairs(((0, 0),))))
    if not procs:
        raise TraceFormatError(f"{folder}: no PyTorch profiler trace (*.json, *.json.gz with traceEvents) in it")
    procs.sort(key=lambda p: (p.rank is None, p.rank if p.rank is not None else 0, p.pid))
    return tuple(_labels(procs))
