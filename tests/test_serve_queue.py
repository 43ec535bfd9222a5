"""The job queue of `tracer serve` on a fake GPU list: one job at a time per GPU unless every job on
it allows more (`concurrency` of the command or workload profile), jobs for a GPU in the order they
came, CPU jobs never behind GPU jobs, and the GPUs taken from CUDA_VISIBLE_DEVICES. The jobs are
real processes (sleepers that print their CUDA_VISIBLE_DEVICES); no GPU is touched."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tracer.errors import UsageError
from tracer.serve.config import Action, JobRequest, check_request, concurrency, load_jobs
from tracer.serve.db import Db
from tracer.serve.jobs import JobQueue, fits
from tracer.serve.launch import parse_gpus

SLEEP = "import os, time; print('on GPU', os.environ.get('CUDA_VISIBLE_DEVICES')); time.sleep(120)"


def _queue(tmp_path: Path, gpus: tuple[int, ...], gpu_slots: int = 1) -> JobQueue:
    py = sys.executable
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        f"schema: 1\nactions: [command]\nworkloads: []\ncampaigns: []\ncpu_slots: 1\ngpu_slots: {gpu_slots}\ncommands:\n"
        f"  alone: {{argv: [{py!r}, -c, {SLEEP!r}], gpu: true}}\n"
        f"  shared: {{argv: [{py!r}, -c, {SLEEP!r}], gpu: true, concurrency: 2}}\n"
        f"  cpu: {{argv: [{py!r}, -c, {SLEEP!r}]}}\n")
    q = JobQueue(Db(tmp_path / "state.sqlite"), load_jobs(jobs), gpus, tmp_path / "out", tmp_path / "logs")
    q.log_dir.mkdir(parents=True)
    return q


def _submit(q: JobQueue, target: str, **kw: object) -> int:
    return int(q.submit(check_request(q.cfg, {"action": "command", "target": target, **kw}))["id"])


def _where(q: JobQueue, *ids: int) -> list[tuple[str, int | None]]:
    return [(q.get(i)["state"], q.get(i)["gpu"]) for i in ids]


def test_sharing_needs_every_job_on_the_gpu_to_allow_it() -> None:
    assert fits([], 1) and fits([2], 2) and not fits([2], 1) and not fits([1], 2) and not fits([2, 2], 2)
    assert fits([3, 3], 3) and not fits([3, 2], 3)


def test_one_job_per_gpu_unless_the_command_allows_more_in_order_and_cpu_jobs_never_wait(tmp_path: Path) -> None:
    q = _queue(tmp_path, gpus=(4, 7))
    try:
        a, b, c = (_submit(q, "shared") for _ in range(3))
        q.tick()
        assert _where(q, a, b, c) == [("running", 4), ("running", 7), ("running", 4)]  # least shared GPU first, then sharing
        d = _submit(q, "alone")  # fits on no GPU: each holds a job
        f = _submit(q, "shared")  # would fit beside b on GPU 7, but d came first
        e = _submit(q, "cpu")
        q.tick()
        assert _where(q, d, f, e) == [("queued", None), ("queued", None), ("running", None)]
        q.cancel(b)
        q.tick()
        assert _where(q, d, f) == [("running", 7), ("queued", None)]  # d takes GPU 7 alone; f waits
        q.cancel(a)
        q.tick()
        assert _where(q, f) == [("running", 4)]  # beside c (both allow two)
        deadline = time.monotonic() + 30
        while not q.get(f)["log_tail"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert q.get(f)["log_tail"] == ["on GPU 4"]
    finally:
        q.shutdown()


def test_a_job_asking_for_a_gpu_waits_only_for_that_gpu(tmp_path: Path) -> None:
    q = _queue(tmp_path, gpus=(0, 1))
    try:
        first = _submit(q, "alone", gpu=0)
        second = _submit(q, "alone", gpu=0)
        third = _submit(q, "alone")
        q.tick()
        assert _where(q, first, second, third) == [("running", 0), ("queued", 0), ("running", 1)]  # second waits for GPU 0 only
        with pytest.raises(UsageError, match="gpu 5 is not one of this server's GPUs"):
            _submit(q, "alone", gpu=5)
    finally:
        q.shutdown()


def test_the_servers_gpu_slots_apply_where_nothing_says_concurrency(tmp_path: Path) -> None:
    q = _queue(tmp_path, gpus=(0,), gpu_slots=2)
    try:
        a, b, c = (_submit(q, "alone") for _ in range(3))
        q.tick()
        assert _where(q, a, b, c) == [("running", 0), ("running", 0), ("queued", None)]
    finally:
        q.shutdown()


def test_a_workload_profile_says_its_concurrency(tmp_path: Path) -> None:
    from tracer.workloads.profiles import PROFILE_DIR

    text = (PROFILE_DIR / "torch_composite.yaml").read_text()
    shared = tmp_path / "shared_composite.yaml"
    shared.write_text(text + "concurrency: 3\n")
    bad = tmp_path / "bad_composite.yaml"
    bad.write_text(text + "concurrency: 99\n")
    cfg = load_jobs(_jobs(tmp_path, [str(shared), "torch_composite"]))
    assert concurrency(cfg, JobRequest(action=Action.TRACE, target=str(shared))) == 3
    assert concurrency(cfg, JobRequest(action=Action.TRACE, target="torch_composite")) == 1  # gpu_slots
    from tracer.errors import ProfileError
    from tracer.workloads.spec import load_workload

    with pytest.raises(ProfileError, match="concurrency"):
        load_workload(str(bad))


def _jobs(tmp_path: Path, workloads: list[str]) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text("schema: 1\nactions: [trace]\ncampaigns: []\nworkloads:\n" + "".join(f"  - {w!r}\n" for w in workloads))
    return path


def test_the_queue_takes_its_gpus_from_cuda_visible_devices() -> None:
    assert parse_gpus(None, "2,3") == (2, 3)
    assert parse_gpus("0,1", "2,3") == (0, 1)  # --gpus wins
    assert parse_gpus("none", "2,3") == ()
    with pytest.raises(UsageError, match="other than by index"):
        parse_gpus(None, "GPU-8a1b2c3d")
