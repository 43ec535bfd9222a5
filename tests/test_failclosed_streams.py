"""Streams, correlation ids and events are per process: in an export of two processes on one GPU,
kernels of different processes on "stream 7" are not ordered by stream order, an event of one
process never orders the other's work, nor does its cudaDeviceSynchronize.

The two-process export is built from two real tracer captures by scripts/merge_nsys_processes.py
(both have a stream 7 and a stream 13, overlapping correlation and event ids); every nsys export in
the shared fixtures or tests/data with several globalPids (a real capture of two processes on the
H200, when one is added) is checked too.
"""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tracer.analysis.analyze import analyze
from tracer.readers.load import load_trace
from tracer.model.trace import process_index, raw_id
from tracer.analysis.ordering import VERDICTS, OrderingIndex, Verdict
from tracer.analysis.attribution import join_launches

ROOT = Path(__file__).resolve().parent.parent
A = ROOT / "tests" / "data" / "traces" / "planted_cross_stream.sqlite"
B = ROOT / "tests" / "data" / "traces" / "event_ordered_dgrad.sqlite"


def _merge(out: Path) -> Path:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "merge_nsys_processes.py"), str(A), str(B), str(out)],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _merge(tmp_path_factory.mktemp("two") / "two_processes.sqlite")


def _several_process_exports() -> list[Path]:
    found = []
    for folder in (ROOT.parent / "shared" / "fixtures" / "nsys", ROOT / "tests" / "data"):
        for path in sorted(folder.rglob("*.sqlite")) if folder.is_dir() else ():
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                n = con.execute("SELECT count(DISTINCT globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
            except sqlite3.DatabaseError:
                n = 0
            finally:
                con.close()
            if n > 1:
                found.append(path)
    return found


def test_the_merged_export_really_shares_stream_and_correlation_ids(merged: Path) -> None:
    con = sqlite3.connect(merged)
    pids = {r[0] for r in con.execute("SELECT DISTINCT globalPid >> 24 & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    shared = con.execute("SELECT count(DISTINCT streamId) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM "
                         "CUPTI_ACTIVITY_KIND_KERNEL j WHERE j.streamId = k.streamId AND j.globalPid != k.globalPid)").fetchone()[0]
    events = con.execute("SELECT count(*) FROM (SELECT eventSyncId FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT GROUP BY 1 "
                         "HAVING count(DISTINCT globalPid) > 1)").fetchone()[0]
    assert len(pids) == 2 and shared == 2 and events >= 1


def test_no_stream_order_across_processes(merged: Path) -> None:
    a = analyze(load_trace(merged), all_kernel_pairs=True)
    t = a.trace
    assert t.multi_process and len(t.processes) == 2
    assert len({s.stream for s in a.streams}) == 4  # two processes x streams 7 and 13
    assert sorted((s.pid, s.raw_stream) for s in a.streams) == sorted((p, s) for p in t.processes for s in (7, 13))
    k = t.kernels
    index = OrderingIndex(t, *join_launches(t))
    proc = process_index(k.stream)
    p, c = np.nonzero(proc[:, None] != proc[None, :])  # every pair of kernels of different processes
    v = index.verdicts(p, c)
    assert len(p) and not (v == VERDICTS.index(Verdict.SAME_STREAM)).any()
    assert not (v == VERDICTS.index(Verdict.EVENT_ORDERED)).any()
    alone = [analyze(load_trace(x), all_kernel_pairs=True) for x in (A, B)]
    assert a.event_edges == sum(x.event_edges for x in alone) and a.unmatched_waits == sum(x.unmatched_waits for x in alone)


def test_a_context_sync_covers_only_its_own_process(merged: Path) -> None:
    t = load_trace(merged)
    index = OrderingIndex(t, *join_launches(t))
    contexts = {y.corr for y in t.syncs if y.kind.value == "context"}
    assert {int(process_index(c)) for c in contexts} == {0, 1}
    for x, (_, stream) in enumerate(index.streams):
        cover = index.host_cover(x)
        mine = [int(c) for c in cover.corr.tolist() if int(c) in contexts]
        assert mine and all(process_index(c) == process_index(stream) for c in mine)


def test_text_and_json_name_the_process(merged: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "tracer", "trace", "analyze", str(merged)], capture_output=True,
                         text=True, env=env)
    t = load_trace(merged)
    assert out.returncode == 0, out.stderr
    assert f"pid {t.processes[1]} stream 7" in out.stdout and f"pid {t.processes[0]} stream 7" in out.stdout
    js = subprocess.run([sys.executable, "-m", "tracer", "trace", "analyze", str(merged), "--json"], capture_output=True,
                        text=True, env=env)
    doc = json.loads(js.stdout)
    assert doc["processes"] == list(t.processes)
    assert sorted((s["pid"], s["stream"]) for s in doc["streams"]) == sorted((p, s) for p in t.processes for s in (7, 13))
    assert all("producer_pid" in p and p["producer_stream"] in (7, 13) for p in doc["pairs"])


def test_one_process_keeps_raw_ids_and_plain_labels() -> None:
    t = load_trace(A)
    assert not t.multi_process and t.stream_label(7) == "stream 7"
    assert set(np.unique(t.kernels.stream).tolist()) == {7, 13}


@pytest.mark.parametrize("path", _several_process_exports(), ids=lambda p: p.name)
def test_real_exports_of_several_processes_key_streams_by_process(path: Path) -> None:
    t = load_trace(path)
    con = sqlite3.connect(path)
    rows = con.execute("SELECT globalPid >> 24 & 16777215, streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                       "GROUP BY 1, 2").fetchall()
    got = {}
    for key in np.unique(t.kernels.stream).tolist():
        o = t.stream_origin(key)
        got[(o.pid, o.stream)] = int((t.kernels.stream == key).sum())
        assert raw_id(key) == o.stream
    assert got == {(p, s): n for p, s, n in rows}
