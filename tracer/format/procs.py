"""The per-process layout of a run directory (docs/design/capture-memory-jobs.md, "Jobs"), one
contract for the capture that writes it (tracer/capture/session.py, launcher.py, nsys_schema.py)
and the job reader (tracer/readers/job.py): where markers and traces go and how they are named, the
metadata that marks a partial trace, and the outcome vocabulary. Standard library only: every
traced process imports it."""
from __future__ import annotations

import re
from enum import Enum
from pathlib import Path

PROCS = "procs"  # RUN/procs/<host>-<pid>[-r<RANK>].json (marker) and .sqlite (trace)
PARTIAL_META = "TRACER_PARTIAL"  # META_DATA_EXPORT row of a trace completed from a dead process's batches
STEM = re.compile(r"^(?P<host>.+)-(?P<pid>\d+)(?:-r(?P<rank>-?\d+))?$")


class Outcome(str, Enum):
    """What a process left to analyse (command.json's `outcome`, the job reader's)."""

    COMPLETE = "complete"
    PARTIAL = "partial"  # it died: its records up to its last flush, completed by `trace run`
    NO_TRACE = "no trace"  # it died (or never finished) before writing anything
    NO_CUDA = "no CUDA"  # it never used CUDA: nothing to trace
    STILL_RUNNING = "still running"  # `trace run` only: alive after the command (the reader cannot tell)


def file_stem(host: str, pid: int, rank: int | None) -> str:
    """<host>-<pid>[-r<RANK>], the host made safe for a file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host) or "host"
    return f"{safe}-{pid}" + (f"-r{rank}" if rank is not None else "")


def partial_path(final: Path) -> Path:
    """Where a trace is written until it is complete: `<stem>.partial.sqlite`."""
    return final.with_name(f"{final.name[:-len('.sqlite')] if final.name.endswith('.sqlite') else final.name}.partial.sqlite")


def marker_files(folder: Path) -> list[Path]:
    """The markers in a procs/ folder, sorted (temporary files of atomic writes left out)."""
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")) if folder.is_dir() else []
