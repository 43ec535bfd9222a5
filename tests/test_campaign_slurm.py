"""The Slurm executor on a real single-node Slurm (`.ci/run` starts one: scripts/ci_slurm.sh):
a CPU campaign as a job array, one task killed with SIGKILL that must come back as failed."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _slurm_reason() -> str | None:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no Slurm client here (.ci/run starts a single-node Slurm with scripts/ci_slurm.sh)"
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    if res.returncode != 0 or "idle" not in res.stdout and "mix" not in res.stdout:
        return f"Slurm is installed but no node is up (sinfo: {res.stdout.strip() or res.stderr.strip()[:100]})"
    try:
        import submitit  # noqa: F401  # only whether it imports
    except ImportError:
        return "submitit is not installed (pip install -e '.[slurm]')"
    return None


pytestmark = pytest.mark.skipif(_slurm_reason() is not None, reason=_slurm_reason() or "")


def _campaign(tmp_path: Path, store: Path, kill: int) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "slurm.yaml"
    profile.write_text(json.dumps({"schema": 1, "name": "slurm_ci", "workload": "cpu_reference",
                                   "variants": ["none", "device_before_atomic"], "trials_per_cell": 40, "batch": 10,
                                   "inject_failure_rate": 0.2, "kill_trial": kill, "baseline": "none",
                                   "executor": {"kind": "slurm", "tasks": 4, "time_min": 10}}))
    return subprocess.run([sys.executable, "-m", "tracer", "campaign", "run", str(profile), "-o", str(store), "--no-progress"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def _report(store: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "tracer", "campaign", "report", str(store), "--json"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout)


def test_job_array_with_a_task_killed_hard(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    res = _campaign(tmp_path, store, kill=25)
    assert res.returncode == 0, res.stderr
    report = _report(store)
    crashes = report["crashes"]
    assert crashes and all(c["exit_code"] == 137 for c in crashes)
    assert all("JobState=FAILED" in c["detail"] for c in crashes)  # seen through scontrol, not sacct
    done = {c["cell"]: c["trials"] for c in report["cells"]}
    assert done == {"none": 20, "device_before_atomic": 20}  # the tasks that finished were merged
    # resume: only the lost chunks run again, one chunk per task now; the chunk holding trial 25
    # is killed again and recorded again, the other completes
    again = _campaign(tmp_path, store, kill=25)
    assert "40 to run" in again.stderr
    report2 = _report(store)
    assert {c["cell"]: c["trials"] for c in report2["cells"]} == {"none": 30, "device_before_atomic": 30}
    assert len(report2["crashes"]) == len(crashes) + 2
    assert all(25 in c["trials"] for c in report2["crashes"][len(crashes):])


def test_job_array_without_kills_completes(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    res = _campaign(tmp_path, store, kill=-1)
    assert res.returncode == 0, res.stderr
    report = _report(store)
    assert not report["crashes"] and {c["cell"]: c["trials"] for c in report["cells"]} == {"none": 40, "device_before_atomic": 40}
    assert _campaign(tmp_path, store, kill=-1).returncode == 0  # nothing left: merging again changes nothing
    assert _report(store)["cells"] == report["cells"]
