"""Jobs launched by Slurm: each task traced into the same run directory (its rank from
SLURM_PROCID), read back as one job; one task SIGKILLed still leaves the others analysed. On the
fake capture backend (the CPU stands in for CUPTI: every Python process records what it is told),
through the per-process capture of `trace run` (tracer.capture.launcher, the capture branch), on the
single-node Slurm that `.ci/run` starts (scripts/ci_slurm.sh) and, without Slurm, on a stand-in
launcher that starts the tasks with Slurm's variables as srun would."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracer.artifact import JobRun, open_artifact
from tracer.trace.job import Ending, Outcome
from tracer.trace.pairs import PairMode, PairSpec

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


def _capture_reason() -> str | None:
    if importlib.util.find_spec("tracer.capture.launcher") is None:
        return "per-process capture (tracer.capture.launcher) is not in this tree"
    return None


def _slurm_reason() -> str | None:
    if shutil.which("srun") is None or shutil.which("sinfo") is None:
        return "no Slurm client here (.ci/run starts a single-node Slurm with scripts/ci_slurm.sh)"
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    if res.returncode != 0 or not any(s in res.stdout for s in ("idle", "mix")):
        return f"Slurm is installed but no node is up (sinfo: {res.stdout.strip() or res.stderr.strip()[:100]})"
    return None


pytestmark = pytest.mark.skipif(_capture_reason() is not None, reason=_capture_reason() or "")


def traced(tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch, kill: bool) -> JobRun:
    from tracer.capture.launcher import capture_run
    from tracer.capture.options import CaptureOptions

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
