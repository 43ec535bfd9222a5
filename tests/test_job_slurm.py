"""Jobs launched by Slurm: each task traced into the same run directory (its rank from
SLURM_PROCID), read back as one job; one task SIGKILLed still leaves the others analysed. On the
fake capture backend (the CPU stands in for CUPTI: every Python process records what it is told),
through the per-process capture of `trace run` (tracer.capture.launcher, and the whole command),
on the single-node Slurm that `.ci/run` starts (scripts/ci_slurm.sh) and, without Slurm, on a
stand-in launcher that starts the tasks with Slurm's variables as srun would."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracer.artifact import JobRun, open_artifact
from tracer.capture.options import CaptureOptions
from tracer.readers.job import Ending, Outcome
from tracer.analysis.pairs import PairMode, PairSpec

TASK = textwrap.dedent("""
    import os, signal, time
    from tracer.capture.session import current
    rank = int(os.environ["SLURM_PROCID"])
    for step in range(3):
        current().backend.fake_kernel("gemm", stream=7)
        time.sleep(0.02 * (1 + rank))
        current().backend.fake_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", stream=13)
    time.sleep(0.5)  # past a flush of the trace
    if rank == 1 and os.environ.get("KILL_RANK_1"):
        os.kill(os.getpid(), signal.SIGKILL)
""")
STAND_IN = textwrap.dedent("""
    import os, subprocess, sys
    tasks = [subprocess.Popen([sys.executable, "-c", sys.argv[1]],
                              env=os.environ | {"SLURM_PROCID": str(r), "SLURM_LOCALID": str(r), "SLURM_NTASKS": "2"})
             for r in range(2)]
    sys.exit(1 if any(t.wait() for t in tasks) else 0)
""")


def _slurm_reason() -> str | None:
    if shutil.which("srun") is None or shutil.which("sinfo") is None:
        return "no Slurm client here (.ci/run starts a single-node Slurm with scripts/ci_slurm.sh)"
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    if res.returncode != 0 or not any(s in res.stdout for s in ("idle", "mix")):
        return f"Slurm is installed but no node is up (sinfo: {res.stdout.strip() or res.stderr.strip()[:100]})"
    return None


def traced(tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch, kill: bool) -> JobRun:
    from tracer.capture.launcher import capture_run

    if kill:
        monkeypatch.setenv("KILL_RANK_1", "1")
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    capture_run(command, run, run / "logs", 120, options=CaptureOptions(backend="fake", lazy=False, flush_s=0.1))
    art = open_artifact(run)
    assert isinstance(art, JobRun), sorted(p.name for p in (run / "procs").iterdir())
    return art


def check(run: JobRun, killed: bool) -> None:
    ja = run.analyze(PairSpec(PairMode.ALL))
    tasks = {p.rank: p for p in ja.job.processes if p.rank is not None}
    assert sorted(tasks) == [0, 1] and tasks[0].label == "rank 0" and tasks[1].local_rank == 1
    assert tasks[0].outcome is Outcome.COMPLETE and ja.analyses[ja.job.processes.index(tasks[0])] is not None
    assert ja.summary.collectives_per_process == {"rank 0": 3, "rank 1": 3} and len(ja.summary.collectives) == 3
    if killed:
        assert (tasks[1].ending, tasks[1].outcome) == (Ending.DIED, Outcome.PARTIAL)
        assert ja.failures(True, False) and "rank 1" in ja.incomplete_lines()[0]
    else:
        assert tasks[1].outcome is Outcome.COMPLETE and not ja.incomplete


@pytest.mark.parametrize("kill", [False, True])
def test_slurm_like_tasks_read_as_ranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill: bool) -> None:
    prog = tmp_path / "launch.py"
    prog.write_text(STAND_IN)
    check(traced(tmp_path, [sys.executable, str(prog), TASK], monkeypatch, kill), kill)


@pytest.mark.skipif(_slurm_reason() is not None, reason=_slurm_reason() or "")
@pytest.mark.parametrize("kill", [False, True])
def test_srun_tasks_traced_into_one_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill: bool) -> None:
    srun = ["srun", "--ntasks", "2", "--kill-on-bad-exit=0", "--time", "5"]
    check(traced(tmp_path, [*srun, sys.executable, "-c", TASK], monkeypatch, kill), kill)


SRUN = pytest.param("srun", marks=pytest.mark.skipif(_slurm_reason() is not None, reason=_slurm_reason() or ""))


@pytest.mark.parametrize("launcher", ["stand-in", SRUN])
def test_trace_run_of_a_job_analyses_it_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str], launcher: str) -> None:
    """`tracer trace run -- LAUNCHER` end to end: the run directory reads as a job, its analysis is
    the job's (collectives, stragglers, the killed task's partial trace analysed and named), and
    the failed command is exit 7 after everything was written."""
    from tests import fake_tools
    from tracer import gpu
    from tracer.capture import launcher as capture
    from tracer.cli import main

    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    real, fake = capture.capture_run, CaptureOptions(backend="fake", lazy=False, flush_s=0.1)
    monkeypatch.setattr(capture, "capture_run", lambda *a, **k: real(*a, options=fake, describe=k.get("describe", False)))
    monkeypatch.setenv("KILL_RANK_1", "1")
    prog, run = tmp_path / "launch.py", tmp_path / "run"
    prog.write_text(STAND_IN)
    command = ([sys.executable, str(prog), TASK] if launcher == "stand-in" else
               ["srun", "--ntasks", "2", "--kill-on-bad-exit=0", "--time", "5", sys.executable, "-c", TASK])
    code = main(["trace", "run", "--backend", "cupti", "--pairs", "all", "-o", str(run), "--", *command])
    out, err = capsys.readouterr()
    assert code == 7 and "exited" in err.splitlines()[-1]  # the launcher failed: its task was killed
    assert "JOB INCOMPLETE: rank 1" in out and "3 matched across ranks" in out and "== rank 0 (" in out
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["kind"] == "job" and verdict["job"]["collectives"]["matched"] == 3
    assert {a["process"]: a["outcome"] for a in verdict["analyses"] if a["kernels"]} == {"rank 0": "complete", "rank 1": "partial"}
    art = open_artifact(run)
    assert isinstance(art, JobRun)
    check(art, killed=True)  # read back by `trace analyze`'s reader: the same job
