"""On a GPU: every process of a torchrun DDP job is traced into one run directory (issue #16);
a rank SIGKILLed mid-step leaves a marker, and the other rank's trace is kept and analysed."""
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


def test_torchrun_ddp_traces_every_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "ddp"
    code = main(["trace", "run", "--backend", "cupti", "-o", str(run), "--", *DDP])
    err = capsys.readouterr().err
    assert code == 0, err
    command = json.loads((run / "command.json").read_text())
    ranks = {p["rank"]: p for p in command["processes"] if p["rank"] is not None}
    assert set(ranks) == {0, 1} and all(p["state"] == "exited" and p["kernels"] > 0 for p in ranks.values())
    assert command["job"] and "job: 2 processes" in err
    launcher = [p for p in command["processes"] if p["rank"] is None]
    assert launcher and all(p["kernels"] == 0 for p in launcher)  # torchrun itself, traced, no kernels
    stdout = (run / "logs" / "stdout.log").read_text()
    for rank, p in ranks.items():
        names = kernels(run / "procs" / f"{p['file']}.sqlite")
        if "backend nccl" in stdout:
            nccl = {s for n, s in names if "nccl" in n.lower()}
            compute = {s for n, s in names if "nccl" not in n.lower()}
            assert nccl and not nccl & compute, (rank, nccl, compute)  # collectives on their own stream
        markers = {m["file"]: m for m in read_markers(run / "procs")}
        assert markers[p["file"]]["file"].endswith(f"-r{rank}")


def test_a_sigkilled_rank_leaves_the_other_ranks_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "killed"
    code = main(["trace", "run", "--backend", "cupti", "-o", str(run), "--json", "--timeout", "300", "--",
                 *DDP, "--kill-rank", "1"])
    out = capsys.readouterr().out
    assert code == 0
    command = json.loads((run / "command.json").read_text())
    assert command["exit"] != 0
    ranks = {p["rank"]: p for p in command["processes"] if p["rank"] is not None}
    assert ranks[1]["state"] == "running"  # died without writing: its marker says so
    assert ranks[0]["state"] == "exited" and ranks[0]["ended"] in ("sigterm", "atexit")
    verdict = json.loads(out)
    assert verdict["kernels"] > 0 and (run / "trace.sqlite").is_file()  # rank 0's trace, analysed
