"""The nsys reader reads a small API table in the caller's thread and a big one on a second
connection in a thread (start-up, issue 27): both paths must give the same trace."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import tracer.readers.nsys_reader as nsys_reader
from tracer.readers.sqlite_tables import InThread, Later, SqliteTables, connect

ROOT = Path(__file__).resolve().parent.parent
TRACES = [ROOT / "tests" / "data" / "traces" / "cast_transpose_dgrad.sqlite",  # 6,983 API calls
          ROOT / "tests" / "data" / "hazards" / "collective_ddp.sqlite",  # memory tables: their own thread beside it
          ROOT / "tests" / "data" / "nsys" / "nsys_two_procs.sqlite"]  # two processes: keys by process
IN_SIBLING = SqliteTables.in_sibling


def _read(path: Path, rows: int, monkeypatch: pytest.MonkeyPatch) -> tuple[nsys_reader.Trace, list[type]]:
    kinds: list[type] = []

    def spy(self: SqliteTables, fn: Callable[[SqliteTables], object], threaded: bool = True) -> object:
        job = IN_SIBLING(self, fn, threaded)
        kinds.append(type(job))
        return job

    monkeypatch.setattr(nsys_reader, "THREADED_API_ROWS", rows)
    monkeypatch.setattr(SqliteTables, "in_sibling", spy)
    return nsys_reader.read_nsys_sqlite(path), kinds


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_small_and_threaded_api_reads_give_the_same_trace(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here, here_kinds = _read(path, 1 << 40, monkeypatch)
    threaded, threaded_kinds = _read(path, 0, monkeypatch)
    assert here_kinds[-1] is Later and threaded_kinds[-1] is InThread  # the API read is the last one started
    assert len(here.apis.corr) > 0
    for name in ("start", "end", "tid", "corr", "name"):
        np.testing.assert_array_equal(getattr(here.apis, name), getattr(threaded.apis, name))
    assert here.strings == threaded.strings and here.syncs == threaded.syncs
    np.testing.assert_array_equal(here.kernels.corr, threaded.kernels.corr)


def test_rows_at_most_reads_the_largest_rowid() -> None:
    db = SqliteTables(connect(TRACES[0]), TRACES[0])
    try:
        assert db.rows_at_most(nsys_reader.API_TABLE, 6983) and not db.rows_at_most(nsys_reader.API_TABLE, 6982)
        assert db.rows_at_most("NO_SUCH_TABLE", 0)
    finally:
        db.con.close()
