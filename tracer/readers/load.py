"""Read a trace file: nsys/tracer SQLite or PyTorch profiler JSON (.json, .json.gz). Reading only:
an .nsys-rep is exported to SQLite by the command layer (tracer.cliargs.readable) first."""
from __future__ import annotations

from pathlib import Path

from tracer.errors import TraceFormatError
from tracer.model.trace import Trace

SUFFIXES = (".sqlite", ".json", ".json.gz", ".nsys-rep (exported first)", "a run directory")


def load_trace(path: Path) -> Trace:
    from tracer.readers.nsys_reader import read_nsys_sqlite

    if path.is_dir():
        trace = path / "trace.sqlite"
        if not trace.is_file():
            raise TraceFormatError(f"{path}: no trace.sqlite in this run directory")
        return read_nsys_sqlite(trace)
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    name = path.name.lower()
    if name.endswith(".nsys-rep"):
        raise TraceFormatError(f"{path}: an .nsys-rep must be exported to SQLite before it is read")
    if name.endswith((".json", ".json.gz")):
        from tracer.readers.kineto_reader import read_kineto

        return read_kineto(path)
    if name.endswith((".sqlite", ".db")):
        return read_nsys_sqlite(path)
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"SQLite format 3"):
        return read_nsys_sqlite(path)
    if head[:1] in (b"{", b"\x1f"):
        from tracer.readers.kineto_reader import read_kineto

        return read_kineto(path)
    raise TraceFormatError(f"{path}: unknown trace format (supported: {', '.join(SUFFIXES)})")
