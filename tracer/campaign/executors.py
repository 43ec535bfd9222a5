"""Executors: `local` (one worker process per visible GPU, crashed workers replaced) and `slurm`
(a submitit job array, results merged into the store idempotently)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracer import proc
from tracer.campaign.chunks import Chunk, assign, plan_chunks
from tracer.campaign.grid import CPU_WORKLOAD, EXECUTORS, CampaignSpec, check_run_options
from tracer.campaign.trials_db import Store, TrialRow
from tracer.errors import unknown

MAX_CRASHES_PER_CHUNK = 2


@dataclass(frozen=True, kw_only=True)
class Options:
    """`campaign run` overrides of the profile's executor settings (None: the profile's)."""

    executor: str | None = None
    workers: int | None = None
    partition: str | None = None
    time_min: int | None = None
    gpus_per_task: int | None = None
    tasks: int | None = None

    def __post_init__(self) -> None:
        if self.executor is not None and self.executor not in EXECUTORS:
            raise unknown("executor", self.executor, EXECUTORS)
        check_run_options(workers=self.workers, tasks=self.tasks, time_min=self.time_min, gpus_per_task=self.gpus_per_task)


def open_store(spec: CampaignSpec, path: Path | None) -> Store:
    """The campaign's store (default runs/NAME.campaign.sqlite), created or resumed, with its run lock held."""
    from tracer.store.rundir import environment

    from tracer.store.outpath import guard_output

    where = guard_output(path or Path("runs") / f"{spec.name}.campaign.sqlite", [spec.path])
    store = Store.open(where, create=True, exclusive=True)
    store.init(spec, environment())
    return store


def execute(store: Store, spec: CampaignSpec, opts: Options, on_progress: Callable[[], None] = lambda: None) -> list[str]:
    """Run what is missing with the chosen executor; the crash events, in order."""
    if (opts.executor or spec.executor.kind) == "local":
        return LocalExecutor(store, spec, str(spec.path), opts.workers).run(on_progress)
    from tracer.campaign.slurm import run_slurm

    return run_slurm(store, spec, str(spec.path), store.path.parent / f"{store.path.stem}-slurm", partition=opts.partition,
                     time_min=opts.time_min, gpus_per_task=opts.gpus_per_task, tasks=opts.tasks)


def visible_gpus() -> list[str]:
    try:
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        n = 0
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in env.split(",") if d.strip()] if env else [str(i) for i in range(n)]
    return ids[:n] if n else []


@dataclass(kw_only=True)
class _Worker:
    slot: str  # GPU id or "cpuN"
    name: str
    chunks: list[Chunk]
    proc: proc.Started
    generation: int = 0


class LocalExecutor:
    def __init__(self, store: Store, spec: CampaignSpec, profile_arg: str, workers: int | None = None) -> None:
        self.store, self.spec, self.profile_arg = store, spec, profile_arg
        cpu_only = all(c.cell.workload == CPU_WORKLOAD for c in store.cells())
        gpus = [] if cpu_only else visible_gpus()
        if not cpu_only and not gpus:
            from tracer.errors import NoGpuError

            raise NoGpuError("this campaign's workloads need a GPU and none is visible (cpu_reference runs without one)")
        n = workers or (len(gpus) if gpus else spec.executor.tasks)
        self.slots = gpus[:n] if gpus else [f"cpu{i}" for i in range(n)]
        self.tmp = Path(tempfile.mkdtemp(prefix="tracer-campaign-"))

    def _start(self, slot: str, chunks: list[Chunk], generation: int) -> _Worker:
        name = f"{os.uname().nodename}:local:{slot}:g{generation}"
        tasks = self.tmp / f"{slot}-{generation}.json"
        tasks.write_text(json.dumps(chunks))
        env = dict(os.environ)
        if not slot.startswith("cpu"):
            env["CUDA_VISIBLE_DEVICES"] = slot
        argv = [sys.executable, "-m", "tracer.campaign.worker", str(self.store.path), "--profile", self.profile_arg,
                "--tasks", str(tasks), "--gpu", slot, "--worker", name]
        return _Worker(slot=slot, name=name, chunks=chunks, proc=proc.start(argv, log_path=self.tmp / f"{slot}-{generation}.log", env=env),
                       generation=generation)

    def run(self, on_progress: Callable[[], None] = lambda: None) -> list[str]:
        queues = assign(plan_chunks(self.store, self.spec), len(self.store.cells()), self.slots)
        workers = [self._start(s, q, 0) for s, q in queues.items() if q]
        events: list[str] = []
        try:
            while workers:
                time.sleep(0.5)
                on_progress()
                for w in list(workers):
                    code = w.proc.poll()
                    if code is None:
                        continue
                    workers.remove(w)
                    if code != 0:
                        replacement = self._handle_crash(w, code, events)
                        if replacement is not None:
                            workers.append(replacement)
        except BaseException:
            for w in workers:
                w.proc.stop()
            raise
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        on_progress()
        return events

    def _handle_crash(self, w: _Worker, code: int, events: list[str]) -> _Worker | None:
        """Record the crash; rerun its unfinished chunk once more (a chunk that crashed twice is
        stored as crashed trials, counted as failures); start a replacement for the rest."""
        tail = w.proc.log_path.read_text(errors="replace")[-400:].strip().replace("\n", " | ")
        inflight = self.store.take_inflight(w.name)
        detail = f"worker {w.name} exited {code}" + (f" (signal {-code})" if code < 0 else "") + f": {tail}"
        events.append(detail)
        if inflight is not None:
            self.store.record_crash(inflight.cell_id, inflight.trials, w.name, w.slot, code, detail)
            if self.store.crash_count(inflight.cell_id, inflight.trials) >= MAX_CRASHES_PER_CHUNK:
                self.store.add_trials([TrialRow(cell_id=inflight.cell_id, trial=t, failed=True, crashed=True, first_failure="crashed",
                                                failed_checks="crash", gpu=w.slot, worker=w.name, seconds=0.0)
                                       for t in inflight.trials])
                events.append(f"cell {inflight.cell_id} trials {inflight.trials[0]}..{inflight.trials[-1]} crashed "
                              f"{MAX_CRASHES_PER_CHUNK} times: stored as crashed")
        remaining = [c for c in w.chunks if set(c.trials) - self.store.done_trials(c.cell_id)]
        return self._start(w.slot, remaining, w.generation + 1) if remaining else None
