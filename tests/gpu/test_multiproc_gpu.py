"""On a GPU: every process of a torchrun DDP job is traced into one run directory (issue #16);
torchrun's agent, which never uses CUDA, loads no CUPTI; with one GPU per rank (NCCL) the
collectives run on their own streams, joined to the compute streams by event edges; a rank
SIGKILLed mid-step leaves what it flushed as a partial trace, the surviving rank (SIGTERMed by
torchrun in its next all-reduce) writes its trace, and the run fails (exit 7) saying how each process ended."""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from memory_tables import PROGRAMS
from tracer.capture.launcher import read_markers
from tracer.cli import main

pytestmark = pytest.mark.gpu
DDP = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(PROGRAMS / "ddp_train.py")]


def kernels(db: Path) -> list[tuple[str, int]]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT s.value, k.streamId FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                           "JOIN StringIds s ON s.id = k.shortName").fetchall()
    finally:
        con.close()


def event_edges(db: Path) -> set[tuple[int, int]]:
    """(stream recording an event, another stream waiting on it)."""
    con = sqlite3.connect(db)
    try:
        recorded = dict(con.execute("SELECT eventSyncId, streamId FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT"))
        waits = con.execute("SELECT eventSyncId, streamId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE syncType = 2").fetchall()
    finally:
        con.close()
    return {(recorded[e], s) for e, s in waits if e in recorded and recorded[e] != s}


def test_torchrun_ddp_traces_every_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "ddp"
    code = main(["trace", "run", "--backend", "cupti", "-o", str(run), "--", *DDP])
    err = capsys.readouterr().err
    assert code == 0, err
    command = json.loads((run / "command.json").read_text())
    ranks = {p["rank"]: p for p in command["processes"] if p["rank"] is not None}
    assert set(ranks) == {0, 1} and all(p["outcome"] == "complete" and p["kernels"] > 0 for p in ranks.values())
    assert command["job"] and "job: 2 processes" in err
    launcher = [p for p in command["processes"] if p["rank"] is None]
    assert launcher and all(p["outcome"] == "no CUDA" and p["trace"] is None for p in launcher)  # torchrun: no CUPTI
    markers = {m.file: m for m in read_markers(run / "procs")}
    stdout = (run / "logs" / "stdout.log").read_text()
    for rank, p in ranks.items():
        db = run / "procs" / f"{p['file']}.sqlite"
        names = kernels(db)
        if "backend nccl" in stdout:
            nccl = {s for n, s in names if "nccl" in n.lower()}
            compute = {s for n, s in names if "nccl" not in n.lower()}
            assert nccl and not nccl & compute, (rank, nccl, compute)  # collectives on their own stream
            edges = event_edges(db)
            assert any((a in nccl) != (b in nccl) for a, b in edges), (rank, edges)  # joined by event edges
        marker = markers[p["file"]]
        assert marker.file.endswith(f"-r{rank}") and marker.cupti_started_by == "torch CUDA init"
        assert marker.timing and {"bootstrap", "exit_total"} <= set(marker.timing["phases_s"])
        assert marker.devices and marker.devices[0]["sms"] > 0  # the GPU it held a context on
    env = json.loads((run / "environment.json").read_text())  # its GPU from the ranks' markers, no probe of tracer's
    assert env["gpu"]["name"] == markers[ranks[0]["file"]].devices[0]["name"] and env["torch"]


@pytest.mark.parametrize("kill_after", [0, 5])
def test_a_sigkilled_rank_leaves_the_other_ranks_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       kill_after: float) -> None:
    """Rank 1 SIGKILLs itself in step 1 (at once, or after waiting idle for 5 s: periodic flushes
    hand its records over); torchrun then SIGTERMs rank 0, stuck in its next all-reduce, which
    writes its trace (the kernel still running left out, counted in META TRACER_LEFT_OUT_*)."""
    run = tmp_path / "killed"
    code = main(["trace", "run", "--backend", "cupti", "-o", str(run), "--json", "--timeout", "300", "--",
                 *DDP, "--kill-rank", "1", "--kill-after", str(kill_after)])
    captured = capsys.readouterr()
    assert code == 7, captured.err  # the job failed: never a clean analysis
    assert "processes (3):" in captured.err and "died without exiting" in captured.err
    command = json.loads((run / "command.json").read_text())
    assert command["exit"] != 0
    ranks = {p["rank"]: p for p in command["processes"] if p["rank"] is not None}
    assert ranks[1]["state"] == "died" and ranks[1]["outcome"] in ("partial", "no trace")  # what it flushed, if anything
    assert ranks[0]["state"] == "exited" and ranks[0]["ended"] in ("sigterm", "atexit") and ranks[0]["outcome"] == "complete"
    assert ranks[0]["kernels"] > 0 and not ranks[0]["trace_error"]
    marker = {m.file: m for m in read_markers(run / "procs")}[ranks[1]["file"]]
    assert marker.cupti_started_by == "torch CUDA init" and marker.timing is not None  # what it wrote while it ran, kept
    if kill_after:
        assert ranks[1]["outcome"] == "partial" and ranks[1]["kernels"] > 0, ranks[1]  # flushed while it waited
    if ranks[1]["outcome"] == "partial" and ranks[1]["kernels"]:  # two traces with kernels: a job
        assert command["job"] and not (run / "trace.sqlite").exists()
        assert (run / "procs" / f"{ranks[1]['file']}.sqlite").is_file()
    else:  # rank 0's trace stands for the run, analysed
        verdict = json.loads(captured.out)
        assert verdict["kernels"] > 0 and (run / "trace.sqlite").is_file()
