"""The synthetic trace builder of scripts/make_synthetic_trace.py (the nsys schema plus the TRACER_*
memory tables of docs/design/capture-memory-jobs.md), for CPU tests of shapes no capture has yet."""
from __future__ import annotations

import importlib.util
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracer.analysis.hazards import Hazards
    from tracer.model.trace import Trace

_PATH = Path(__file__).resolve().parent.parent / "scripts" / "make_synthetic_trace.py"
_spec = importlib.util.spec_from_file_location("make_synthetic_trace", _PATH)
assert _spec is not None and _spec.loader is not None
synthetic = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("make_synthetic_trace", synthetic)
_spec.loader.exec_module(synthetic)

TraceBuilder = synthetic.TraceBuilder
generate = synthetic.generate
STREAMS = synthetic.STREAMS


def copy_with(src: Path, out: Path, *sql: str) -> Path:
    """A copy of the database src at out (through SQLite's backup, so a WAL store comes whole) with
    the statements applied: a real capture damaged in a stated way."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    copy = sqlite3.connect(out)
    try:
        source.backup(copy)
        for statement in sql:
            copy.execute(statement)
        copy.commit()
    finally:
        source.close()
        copy.close()
    return out


def fan_out(path: Path, launches: int = 3000, accesses: int = 3000) -> Path:
    """One op with `accesses` accesses launched `launches` times: launches x accesses (launch, access)
    rows from launches + accesses stored (a hostile memory trace the reader must refuse, not expand)."""
    b = TraceBuilder()
    op = b.op("aten::_foreach_add_")
    for i in range(accesses):
        b.access(op, 0x1000_0000 + i * 256, 256, 3)
    for _ in range(launches):
        b.launch(7, "multi_tensor_apply_kernel", op=op)
    return b.write(path, memory=True)


def hot_journal(work: Path, out: Path) -> Path:
    """A copy, in `out`, of a database and its journal taken in the middle of a write (a writer that
    crashed): SQLite must name the hot journal, not call the file corrupt."""
    db = work / "h.sqlite"
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (randomblob(1000))", [()] * 200)
    con.execute("PRAGMA cache_size=1")
    con.execute("BEGIN")
    con.execute("DELETE FROM t")
    con.executemany("INSERT INTO t VALUES (randomblob(3000))", [()] * 200)  # spills: the journal is hot on disk
    shutil.copy(db, out / "h.sqlite")
    shutil.copy(f"{db}-journal", out / "h.sqlite-journal")
    con.close()
    return out / "h.sqlite"


def load(tmp_path: Path, b: TraceBuilder) -> Trace:
    """The builder's trace with its memory tables, written and read back as a capture is."""
    from tracer.readers.load import load_trace

    return load_trace(b.write(tmp_path / "t.sqlite", memory=True))


def hazards(tmp_path: Path, b: TraceBuilder) -> Hazards:
    """The hazard verdict of the builder's trace (its memory sets read, so never 'not checked')."""
    from tracer.analysis.analyze import analyze

    h = analyze(load(tmp_path, b)).hazards
    assert h is not None and h.memory
    return h

