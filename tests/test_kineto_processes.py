"""Kineto traces holding two processes: streams keyed by process, as for Nsight Systems and CUPTI.

The trace is the real PyTorch profiler fixture event_sync_multi_stream.json.gz twice: the second copy
as another process (its host events under another pid, its correlation ids, event record ids and flow
ids moved past the first copy's, as two processes' CUPTI counters could be) running at the same
time on the same GPU and the same stream ids. Where the two copies' correlation ids collide, no GPU
event can be given a process and the trace is refused."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import shared_fixture
from tracer.cli import main
from tracer.errors import TraceFormatError
from tracer.analysis.attribution import join_launches
from tracer.readers.kineto_reader import read_kineto
from tracer.model.trace import process_index
from tracer.analysis.ordering import OrderingIndex, Verdict

SECOND_PID = 3999999
ID_KEYS = ("correlation", "wait_on_cuda_event_record_corr_id")


def _as_other_process(e: dict[str, Any], shift: int) -> dict[str, Any]:
    e = json.loads(json.dumps(e))
    if isinstance(e.get("pid"), int) and e["pid"] > 1000:  # a host event (GPU events carry the device)
        e["pid"] = SECOND_PID
        if isinstance(e.get("tid"), int) and e["tid"] > 1000:
            e["tid"] = SECOND_PID
    args = e.get("args") or {}
    for key in ID_KEYS:
        if isinstance(args.get(key), int) and args[key] >= 0:
            args[key] += shift
    if e.get("cat") == "ac2g":
        e["id"] += shift
    return e


def two_processes(out: Path, shift: int = 1_000_000) -> Path:
    with gzip.open(shared_fixture("kineto", "event_sync_multi_stream.json.gz"), "rt") as fh:
        doc = json.load(fh)
    doc["traceEvents"] += [_as_other_process(e, shift) for e in doc["traceEvents"]]
    out.write_text(json.dumps(doc))
    return out


def test_two_processes_on_one_stream_id_are_two_streams(tmp_path: Path) -> None:
    one = read_kineto(shared_fixture("kineto", "event_sync_multi_stream.json.gz"))
    t = read_kineto(two_processes(tmp_path / "two.json"))
    k = t.kernels
    proc = process_index(k.stream)
    assert t.processes == (3727853, SECOND_PID) and sorted(np.unique(proc).tolist()) == [0, 1]
    assert len(np.unique(k.stream)) == 2 * len(np.unique(one.kernels.stream))
    raw = {t.stream_origin(int(s)).stream for s in k.stream.tolist()}
    assert raw == set(one.kernels.stream.tolist())  # the same raw ids in both processes
    index = OrderingIndex(t, *join_launches(t))
    n = len(k.corr)
    p, c = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    cross = proc[p] != proc[c]
    codes = index.verdicts(p[cross], c[cross])
    verdicts = {list(Verdict)[v] for v in codes.tolist()}
    assert cross.sum() == 2 * len(one.kernels.corr) ** 2 > 0 and Verdict.UNORDERED in verdicts
    # nothing orders one process's work after the other's but time: a host sync that returned before
    # the other process launched (host-synchronized); never stream order or an event
    assert not verdicts & {Verdict.SAME_STREAM, Verdict.EVENT_ORDERED}
    for r in t.records:  # each process's event records are its own
        assert process_index(r.stream) == process_index(r.key)


def test_two_processes_double_every_count_of_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = shared_fixture("kineto", "event_sync_multi_stream.json.gz")
    assert main(["trace", "analyze", str(src), "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main(["trace", "analyze", str(two_processes(tmp_path / "two.json")), "--json"]) == 0
    both = json.loads(capsys.readouterr().out)
    for kind in ("same-stream", "event-ordered"):  # each process's own; none across the two
        assert both["pair_counts"][kind] == 2 * alone["pair_counts"][kind], kind
    assert both["pair_counts"]["host-synchronized"] >= 2 * alone["pair_counts"]["host-synchronized"]
    assert both["event_edges"] == 2 * alone["event_edges"] > 0 and len(both["streams"]) == 2 * len(alone["streams"])
    assert {s["pid"] for s in both["streams"]} == {3727853, SECOND_PID}


def test_colliding_correlation_ids_of_two_processes_are_refused(tmp_path: Path) -> None:
    path = two_processes(tmp_path / "clash.json", shift=0)
    with pytest.raises(TraceFormatError, match=r"correlation id \d+ belongs to runtime calls of processes 3727853 and 3999999"):
        read_kineto(path)
