"""The capture's memory tables read back by the analysis: CPU tensors through the dispatch mode
with a fake CUPTI handing over kernels on two streams and their external correlations, written
by the capture's own TraceWriter, then read by tracer.readers.memory_reader (one schema, MEMORY_TABLES)
and judged by analyze() with hazards, as `trace run --memory` does on a GPU."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from tests.test_capture_memory import DeliveringCupti, Recording
from tracer.analysis.analyze import analyze
from tracer.readers.load import load_trace
from tracer.readers.memory_reader import MEMORY_TABLES

MAIN, SIDE = 7, 13


class TwoStreamCupti(DeliveringCupti):
    """Kernels on a chosen stream, each with the EXTERNAL_CORRELATION record joining its launch to
    the op the recorder pushed around it."""

    def launch_on(self, corr: int, name: str, stream: int) -> None:
        self.launch(corr, name)
        self.pending[-1].stream_id = stream
        self.pending.append(SimpleNamespace(kind=int(self.ActivityKind.EXTERNAL_CORRELATION), correlation_id=corr,
                                            external_id=self.pushed[-1],
                                            external_kind=int(self.ExternalCorrelationKind.CUSTOM0)))


def capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """zeros -> a on MAIN; a * 2 on SIDE with no wait (RAW on a); a + 1 on MAIN (same stream as the
    writer: ordered; a read beside SIDE's read: no hazard)."""
    import torch

    from tracer.capture.backends import CuptiBackend
    from tracer.capture.nsys_schema import TraceWriter
    from tracer.capture.options import CaptureOptions
    from tracer.capture.timing import Timing

    fake = TwoStreamCupti()
    monkeypatch.setitem(sys.modules, "cupti", SimpleNamespace(cupti=fake))
    r = Recording()
    backend = CuptiBackend(CaptureOptions(memory=True, parts=("dispatch",)), 42, Timing())
    backend.activate(r.rec)
    with r:
        a = torch.zeros(64)
        fake.launch_on(1, "_Z4fillv", MAIN)
        b = a * 2
        fake.launch_on(2, "_Z5scalev", SIDE)
        c = a + 1
        fake.launch_on(3, "_Z4bumpv", MAIN)
    rec, memory2 = backend.stop(forked=False, quick=False)
    r.rec.finish(rec, memory2)
    out = tmp_path / "trace.sqlite"
    TraceWriter(out, 42, "cupti").close(rec)
    del b, c
    return out


def test_the_capture_writes_the_schema_the_reader_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = sqlite3.connect(capture(tmp_path, monkeypatch))
    try:
        for table, cols in MEMORY_TABLES.items():
            written = [(name, bool(notnull)) for _, name, _, notnull, _, _ in con.execute(f"PRAGMA table_info({table})")]
            documented = [(c.split()[0], "NOT NULL" in c) for c in cols.split(", ")]
            assert written == documented, table
    finally:
        con.close()


def test_hazards_are_judged_on_the_tables_the_capture_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = load_trace(capture(tmp_path, monkeypatch))
    assert trace.memory is not None and trace.memory.recorded
    out = analyze(trace).to_json()["hazards"]  # no pairs asked: a trace with memory sets judges hazards
    assert out["memory"] and (out["kernels_with_memory"], out["kernels_without_memory"]) == (3, 0)
    assert out["counts"]["RAW"] == 1 and out["counts"]["WAR"] == out["counts"]["WAW"] == out["counts"]["reuse"] == 0
    (z,) = out["listed"]
    assert (z["kind"], z["may"], z["producer"]["kernel"], z["consumer"]["kernel"]) == ("RAW", False, "fill()", "scale()")
    assert (z["producer"]["op"], z["consumer"]["op"]) == ("aten::zeros", "aten::mul.Tensor")
    assert (z["producer"]["stream"], z["consumer"]["stream"], z["memory"]["bytes"]) == (MAIN, SIDE, 256)
