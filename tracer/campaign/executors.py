"""Executors: `local` (one worker process per visible GPU, crashed workers replaced) and `slurm`
(a submitit job array, results merged into the store idempotently)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracer.campaign.profile import CPU_WORKLOAD, CampaignSpec
from tracer.campaign.store import Store, TrialRow

Chunk = tuple[int, list[int]]  # cell id, trial indices
MAX_CRASHES_PER_CHUNK = 2


def plan_chunks(store: Store, spec: CampaignSpec) -> list[Chunk]:
    """Remaining trials in chunks of `batch`, interleaved across cells so variants alternate."""
    batch = spec.data["batch"]
    per_cell: list[list[Chunk]] = []
    for cell_id, _cell, target in store.cells():
        todo = sorted(set(range(target)) - store.done_trials(cell_id))
        per_cell.append([(cell_id, todo[i:i + batch]) for i in range(0, len(todo), batch)])
    out: list[Chunk] = []
    while any(per_cell):
        for chunks in per_cell:
            if chunks:
                out.append(chunks.pop(0))
    return out


def assign(chunks: list[Chunk], n_cells: int, slots: list[str]) -> dict[str, list[Chunk]]:
    """Round r gives cell k's chunk to slot (k + r) mod slots: every variant runs on every GPU."""
    queues: dict[str, list[Chunk]] = {s: [] for s in slots}
    for j, chunk in enumerate(chunks):
        queues[slots[(j % max(n_cells, 1) + j // max(n_cells, 1)) % len(slots)]].append(chunk)
    return queues


def visible_gpus() -> list[str]:
    try:
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        n = 0
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in env.split(",") if d.strip()] if env else [str(i) for i in range(n)]
    return ids[:n] if n else []


@dataclass
class _Worker:
    slot: str  # GPU id or "cpuN"
    name: str
    chunks: list[Chunk]
    proc: subprocess.Popen[bytes]
    log: Path
    generation: int = 0


class LocalExecutor:
    def __init__(self, store: Store, spec: CampaignSpec, profile_arg: str, workers: int | None = None) -> None:
        self.store, self.spec, self.profile_arg = store, spec, profile_arg
        cpu_only = all(c.workload == CPU_WORKLOAD for _, c, _ in store.cells())
        gpus = [] if cpu_only else visible_gpus()
        if not cpu_only and not gpus:
            from tracer.errors import NoGpuError

            raise NoGpuError("this campaign's workloads need a GPU and none is visible (cpu_reference runs without one)")
        n = workers or (len(gpus) if gpus else spec.data["executor"]["tasks"])
        self.slots = gpus[:n] if gpus else [f"cpu{i}" for i in range(n)]
        self.tmp = Path(tempfile.mkdtemp(prefix="tracer-campaign-"))

    def _start(self, slot: str, chunks: list[Chunk], generation: int) -> _Worker:
        name = f"{os.uname().nodename}:local:{slot}:g{generation}"
        tasks = self.tmp / f"{slot}-{generation}.json"
        tasks.write_text(json.dumps(chunks))
        env = dict(os.environ)
        if not slot.startswith("cpu"):
            env["CUDA_VISIBLE_DEVICES"] = slot
        log = self.tmp / f"{slot}-{generation}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "tracer.campaign.worker", str(self.store.path), "--profile",
                                     self.profile_arg, "--tasks", str(tasks), "--gpu", slot, "--worker", name],
                                    stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return _Worker(slot, name, chunks, proc, log, generation)

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
                _kill(w.proc)
            raise
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)  # task lists and worker logs (crashes keep their tail in the store)
        on_progress()
        return events

    def _handle_crash(self, w: _Worker, code: int, events: list[str]) -> _Worker | None:
        """Record the crash; rerun its unfinished chunk once more (a chunk that crashed twice is
        stored as crashed trials, counted as failures); start a replacement for the rest."""
        tail = w.log.read_text(errors="replace")[-400:].strip().replace("\n", " | ")
        inflight = self.store.take_inflight(w.name)
        detail = f"worker {w.name} exited {code}" + (f" (signal {-code})" if code < 0 else "") + f": {tail}"
        events.append(detail)
        if inflight is not None:
            cell_id, trials, _ = inflight
            self.store.record_crash(cell_id, trials, w.name, w.slot, code, detail)
            if self.store.crash_count(cell_id, trials) >= MAX_CRASHES_PER_CHUNK:
                self.store.add_trials([TrialRow(cell_id, t, True, True, "crashed", "crash", w.slot, w.name, 0.0) for t in trials])
                events.append(f"cell {cell_id} trials {trials[0]}..{trials[-1]} crashed {MAX_CRASHES_PER_CHUNK} times: stored as crashed")
        remaining = [(c, t) for c, t in w.chunks if set(t) - self.store.done_trials(c)]
        return self._start(w.slot, remaining, w.generation + 1) if remaining else None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
