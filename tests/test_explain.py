"""`trace analyze --explain`: overlap, idle gaps by cause and the critical path, on a synthetic trace
whose timing is planned here (the oracle is the plan), and on the real NCCL job."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.trace_synthetic import TraceBuilder
from tracer.artifact import open_artifact
from tracer.cli import main
from tracer.analysis.explain import Cause, explain, intersection, merged
from tracer.analysis.pairs import PairSpec

import numpy as np

GEMM, PRE, COMM, GEMM2, PYTHON = 2_000_000, 100_000, 100_000, 150_000, 2_000_000


def planned(path: Path) -> Path:
    """step0: s9 runs `pre`, then waits on s7's event after `gemm` for the collective; `gemm2` on s7
    runs beside the collective (fully hiding it); a device synchronize, then a launch after 2 ms of
    CPU work in range step0/python."""
    b = TraceBuilder()
    b.push("step0")
    b.launch(9, "pre", PRE)
    b.push("step0/fwd")
    b.launch(7, "gemm", GEMM)
    key = b.record(7)
    b.wait(9, key)
    b.launch(9, "ncclDevKernel_AllReduce_Sum_f32", COMM)
    b.launch(7, "gemm2", GEMM2)
    b.pop()
    b.device_sync()
    b.launch(7, "after_sync", 10_000)
    b.push("step0/python")
    b.t += PYTHON
    b.launch(7, "late", 10_000)
    b.pop()
    b.pop()
    return b.write(path)


def analysed(path: Path):
    return open_artifact(path).analyze(PairSpec.from_json("none"))


def test_overlap_is_the_planned_intersection(tmp_path: Path) -> None:
    e = explain(analysed(planned(tmp_path / "t.sqlite")))
    (o,) = e.overlap
    assert (o.step, o.comm_ns, o.hidden_ns, o.exposed_ns, o.comm_streams) == ("step0", COMM, COMM, 0, (9,))


def test_idle_gaps_name_their_cause(tmp_path: Path) -> None:
    e = explain(analysed(planned(tmp_path / "t.sqlite")))
    got = {(g.stream, g.cause): g for g in e.idle}
    assert got[(9, Cause.EVENT_WAIT)].detail == "on s7's event"
    assert got[(7, Cause.HOST_SYNC)].detail == "cudaDeviceSynchronize"
    late = got[(7, Cause.LATE_LAUNCH)]
    assert late.detail == "step*/python" and PYTHON - 10_000 < late.total_ns < PYTHON + 50_000  # after_sync ran 10 us of it
    # the s9 gap lasts from pre's end until gemm's end (the event), less the head start pre had
    assert GEMM - PRE - 50_000 < got[(9, Cause.EVENT_WAIT)].total_ns < GEMM
    assert sum(e.idle_by_cause.values()) == sum(g.total_ns for g in e.idle)


def test_critical_path_follows_stream_order_and_gives_the_collective_slack(tmp_path: Path) -> None:
    e = explain(analysed(planned(tmp_path / "t.sqlite")))
    (p,) = e.paths
    names = {n for n, _, _ in p.top}
    assert {"gemm", "gemm2", "after_sync", "late"} <= names and not any("nccl" in n for n in names)
    assert p.head_ns + p.kernel_ns + p.wait_ns == p.span_ns
    assert p.cpu_bound_ns > PYTHON - 10_000
    s9 = next(s for s in p.streams if s.stream == 9)
    assert s9.on_path_ns == 0 and s9.tail_slack_ns > PYTHON


def test_interval_helpers() -> None:
    s, e = merged(np.array([0, 5, 20]), np.array([10, 12, 30]))
    assert s.tolist() == [0, 20] and e.tolist() == [12, 30]
    assert intersection((s, e), merged(np.array([8, 25]), np.array([22, 40]))) == 4 + 2 + 5


def test_analyze_explain_on_the_nccl_job(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["trace", "analyze", str(DATA / "jobs" / "ddp_nccl_2ranks"), "--explain", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    for proc in data["analyses"]:
        t = proc["time"]
        assert t["overlap"] and all(o["hidden_ns"] + o["exposed_ns"] == o["comm_ns"] for o in t["overlap"])
        assert sum(t["idle_by_cause_ns"].values()) == sum(s["idle_ns"] for s in proc["streams"])
        assert t["critical_paths"][0]["why"] == "median"
