"""The trace file written batch by batch (periodic flushes of a traced process): the same file as
one write of the same records, whatever the batch boundaries cut through (a range opened in one
batch and closed in the next, a stream record after its kernels, a sync before its context's
kernels); what a process that died left is completed into a readable, partial trace."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tracer.capture.nsys_schema import TraceWriter, partial_path, salvage, write_sqlite
from tracer.capture.records import ApiRec, KernelRec, MarkerRec, StreamRec, SyncRec, TraceRecords
from tracer.readers.load import load_trace

TID = 77


def kernel(t: int, corr: int, stream: int, name: str = "_Z6kernelPf") -> KernelRec:
    return KernelRec(t, t + 100, 0, 1, stream, corr, name, 1, 1, 1, 32, 1, 1, 16, 0, 0, 0, 0)


def batches() -> list[TraceRecords]:
    first = TraceRecords(pid=42)
    first.markers += [MarkerRec(2, 10, 1, TID, "step0", "d"), MarkerRec(2, 20, 2, TID, "fwd", "d")]
    first.syncs.append(SyncRec(30, 40, 9, 13, 5, 3, 0, 0))  # context 9's kernels come later
    first.kernels += [kernel(25, 1, 7), kernel(35, 2, 13, "_Z5otherv")]
    first.apis += [ApiRec(20, 22, 0, TID, 1, "cudaLaunchKernel", 0), ApiRec(30, 32, 0, TID, 2, "cudaLaunchKernel", 0)]
    second = TraceRecords(pid=42)
    second.markers += [MarkerRec(4, 50, 2, TID, "", "d"), MarkerRec(4, 90, 1, TID, "", "d"), MarkerRec(2, 95, 3, TID, "bwd", "d")]
    second.streams.append(StreamRec(1, 13, -2, 1, 0))  # after kernel 2 made a default row for it
    second.kernels.append(KernelRec(60, 70, 3, 9, 1, 3, "_Z6kernelPf", 1, 1, 1, 32, 1, 1, 16, 0, 0, 0, 0))
    return [first, second]


def dump(path: Path) -> dict[str, list]:
    con = sqlite3.connect(path)
    s = dict(con.execute("SELECT id, value FROM StringIds"))
    out = {
        "kernels": sorted((k[0], k[1], s[k[2]], s[k[3]]) for k in con.execute(
            "SELECT start, streamId, shortName, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL")),
        "ranges": sorted(con.execute("SELECT start, end, eventType, text FROM NVTX_EVENTS WHERE eventType != 75")),
        "streams": sorted(con.execute("SELECT contextId, streamId, priority, flag FROM TARGET_INFO_CUDA_STREAM")),
        "syncs": sorted(con.execute("SELECT deviceId, contextId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")),
        "apis": sorted((a[0], s[a[1]]) for a in con.execute("SELECT correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME")),
        "meta": sorted(r for r in con.execute("SELECT name, value FROM META_DATA_EXPORT") if r[0] != "TRACER_PARTIAL"),
    }
    con.close()
    return out


def test_batches_make_the_same_file_as_one_write(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "batched.sqlite", 42, "fake")
    first, second = batches()
    writer.append(first)
    writer.close(second)
    whole = TraceRecords(pid=42)
    for b in batches():
        for name in ("kernels", "apis", "syncs", "streams", "markers"):
            getattr(whole, name).extend(getattr(b, name))
    write_sqlite(whole, tmp_path / "whole.sqlite", producer="fake")
    batched = dump(tmp_path / "batched.sqlite")
    assert batched == dump(tmp_path / "whole.sqlite")
    assert batched["ranges"] == [(10, 90, 59, "step0"), (20, 50, 59, "fwd"), (95, None, 59, "bwd")]  # bwd never closed
    assert batched["streams"] == [(1, 7, 0, 0), (1, 13, -2, 1), (9, 1, 0, 0)]
    assert batched["syncs"] == [(3, 9)]  # its device, learnt from a later batch's kernel
    assert writer.kernels == 3 and not partial_path(tmp_path / "batched.sqlite").exists()


def test_what_a_dead_writer_left_is_a_readable_partial_trace(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "p.sqlite", 42, "fake")
    writer.append(batches()[0])  # then the process died: no close
    left = tmp_path / "left.partial.sqlite"
    shutil.copyfile(partial_path(tmp_path / "p.sqlite"), left)
    assert salvage(left, tmp_path / "left.sqlite", "died: records up to its last flush") == 2
    trace = load_trace(tmp_path / "left.sqlite")
    assert len(trace.kernels) == 2
    con = sqlite3.connect(tmp_path / "left.sqlite")
    assert dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))["TRACER_PARTIAL"].startswith("died")
    assert con.execute("SELECT COUNT(*) FROM NVTX_EVENTS WHERE end IS NULL AND eventType = 59").fetchone() == (2,)


def test_unfinished_records_and_values_sqlite_cannot_store_are_left_out_and_counted(tmp_path: Path) -> None:
    """A rank stopped by SIGTERM in a collective: the forced flush hands over the kernel still
    running (no end time) and records holding values beyond 64-bit integers. Before, one such
    value made the whole exit write fail (OverflowError) and the rank left no trace at all."""
    writer = TraceWriter(tmp_path / "t.sqlite", 42, "fake")
    writer.append(batches()[0])
    last = TraceRecords(pid=42)
    last.kernels += [kernel(200, 10, 7), KernelRec(300, 0, 0, 1, 7, 11, "_Z14ncclAllReducev", 1, 1, 1, 32, 1, 1, 16, 0, 0, 0, 0)]
    last.apis += [ApiRec(190, 195, 0, TID, 10, "cudaLaunchKernel", 0), ApiRec(290, 295, 0, TID, 11, "cudaLaunchKernel", 2**64 - 1)]
    last.syncs.append(SyncRec(310, 0, 1, 7, 12, 3, 0, 0))  # a stream sync still waiting
    writer.close(last)
    con = sqlite3.connect(tmp_path / "t.sqlite")
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (3,) and writer.kernels == 3
    assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone() == (3,)  # the two earlier, one of two
    assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION").fetchone() == (1,)
    assert meta["TRACER_LEFT_OUT_CUPTI_ACTIVITY_KIND_KERNEL"].startswith("1 records left out: still running")
    assert "ncclAllReduce" in meta["TRACER_LEFT_OUT_CUPTI_ACTIVITY_KIND_KERNEL"]
    assert "beyond 64-bit integers" in meta["TRACER_LEFT_OUT_CUPTI_ACTIVITY_KIND_RUNTIME"]
    assert meta["TRACER_LEFT_OUT_CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"].startswith("1 records left out")
    assert len(load_trace(tmp_path / "t.sqlite").kernels) == 3


def test_a_failed_close_keeps_the_flushed_batches_for_salvage(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "t.sqlite", 42, "fake")
    writer.append(batches()[0])
    broken = TraceRecords(pid=42)
    broken.kernels.append(KernelRec(500, 600, 0, 1, 7, 20, None, 1, 1, 1, 32, 1, 1, 16, 0, 0, 0, 0))  # type: ignore[arg-type]  # deliberately a wrong row (None where a number belongs)
    try:
        writer.close(broken)
    except Exception:  # the name cannot be demangled: the close fails
        pass
    else:
        raise AssertionError("the close should have failed")
    assert not (tmp_path / "t.sqlite").exists()
    assert salvage(partial_path(tmp_path / "t.sqlite"), tmp_path / "t.sqlite", "not finished at exit") == 2
