"""Jobs of `tracer serve` that the allow-list sends to Slurm (`executors: {NAME: slurm}`), on the
real single-node Slurm `.ci/run` starts (scripts/ci_slurm.sh): submitted through submitit, state
from scontrol, the log tail the same as a local job's, cancel by scancel, a job followed again
by a restarted server (not interrupted, not submitted twice), a failing job failed."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracer.serve import slurm
from tracer.serve.config import check_request, load_jobs
from tracer.serve.db import Db
from tracer.serve.jobs import JobQueue


def _slurm_reason() -> str | None:
    why = slurm.available()
    if why is not None:
        return why
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    if res.returncode != 0 or ("idle" not in res.stdout and "mix" not in res.stdout):
        return f"Slurm is installed but no node is up (sinfo: {res.stdout.strip() or res.stderr.strip()[:100]})"
    return None


pytestmark = pytest.mark.skipif(_slurm_reason() is not None, reason=_slurm_reason() or "")


def _queue(tmp_path: Path, db: Db | None = None) -> JobQueue:
    py = sys.executable
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "schema: 1\nactions: [command]\nworkloads: []\ncampaigns: []\ncommands:\n"
        f"  hello: {{argv: [{py!r}, -c, \"print('hello from Slurm')\"]}}\n"
        f"  nap: {{argv: [{py!r}, -c, \"import time; time.sleep(4); print('woke')\"]}}\n"
        f"  sleeper: {{argv: [{py!r}, -c, \"import time; time.sleep(300)\", {tmp_path.name!r}]}}\n"
        f"  fails: {{argv: [{py!r}, -c, \"import sys; print('bad input'); sys.exit(3)\"]}}\n"
        f"  local: {{argv: [{py!r}, -c, \"print('here')\"]}}\n"
        "executors: {hello: slurm, nap: slurm, sleeper: slurm, fails: slurm}\nslurm: {time_min: 5}\n")
    q = JobQueue(db or Db(tmp_path / "state.sqlite"), load_jobs(jobs), (), tmp_path / "out", tmp_path / "logs")
    q.log_dir.mkdir(parents=True, exist_ok=True)
    return q


def _submit(q: JobQueue, target: str) -> int:
    return int(q.submit(check_request(q.cfg, {"action": "command", "target": target}))["id"])


def _until(q: JobQueue, job_id: int, done: tuple[str, ...] = ("done", "failed", "cancelled", "interrupted"),
           note: str | None = None, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q.tick()
        job = q.get(job_id)
        if (note is None and job["state"] in done) or (note is not None and note in job["note"]):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} still {q.get(job_id)}")


def test_a_job_runs_on_slurm_and_its_log_is_tailed(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    hello, fails, local = _submit(q, "hello"), _submit(q, "fails"), _submit(q, "local")
    q.tick()
    assert q.get(hello)["executor"] == "slurm" and q.get(hello)["slurm_id"] and q.get(local)["executor"] == "local"
    job = _until(q, hello)
    assert job["state"] == "done" and job["exit"] == 0 and job["log_tail"] == ["hello from Slurm"]
    assert "COMPLETED" in job["note"] or "UNKNOWN" in job["note"]
    bad = _until(q, fails)
    assert bad["state"] == "failed" and bad["exit"] == 3 and bad["log_tail"] == ["bad input"]
    assert _until(q, local)["log_tail"] == ["here"]


def test_a_slurm_job_is_cancelled_by_scancel(tmp_path: Path) -> None:
    q = _queue(tmp_path)
    job_id = _submit(q, "sleeper")
    _until(q, job_id, note="RUNNING")
    slurm_id = q.get(job_id)["slurm_id"]
    deadline = time.monotonic() + 60
    while not _running(tmp_path.name) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running(tmp_path.name)  # the command runs on the node
    after = q.cancel(job_id)
    assert after["state"] == "cancelled" and f"scancel {slurm_id}" in after["note"]
    while slurm.state(slurm_id)[0] not in ("CANCELLED", "UNKNOWN") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.state(slurm_id)[0] in ("CANCELLED", "UNKNOWN")
    while _running(tmp_path.name) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _running(tmp_path.name)  # the command itself is gone, not only the Slurm task


def _running(marker: str) -> bool:
    """Is a process running whose argv holds `marker`?"""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


def test_a_restarted_server_follows_its_slurm_job_again(tmp_path: Path) -> None:
    first = _queue(tmp_path)
    job_id = _submit(first, "nap")
    first.tick()
    slurm_id = first.get(job_id)["slurm_id"]
    assert slurm_id and first.get(job_id)["state"] == "running"
    # the first server dies here (no shutdown); a second one opens the same state
    second = _queue(tmp_path, Db(tmp_path / "state.sqlite"))
    assert second.recover() == []  # nothing interrupted: the job runs on in Slurm
    job = _until(second, job_id)
    assert job["state"] == "done" and job["slurm_id"] == slurm_id and job["log_tail"] == ["woke"]
