"""Run a chunk of trials of one cell: GPU workloads through the Engine (comparisons on the device,
replayed as a CUDA graph where the cell allows, one read-back per chunk), or the CPU reference workload with injected failures."""
from __future__ import annotations

import os
import random
import signal
import time
from collections import defaultdict
from typing import Any

from tracer.campaign.grid import CPU_WORKLOAD, CampaignSpec, Cell
from tracer.campaign.trials_db import TrialRow
from tracer.fp8.detector import Check, Where

_ENGINES: dict[str, Any] = {}
_GRAPHS: dict[str, Any] = {}


def trial_seed(spec: CampaignSpec, cell_id: int, trial: int) -> int:
    return spec.seed * 1_000_003 + cell_id * 100_003 + trial


def run_chunk(spec: CampaignSpec, cell_id: int, cell: Cell, trials: list[int], gpu: str, worker: str) -> list[TrialRow]:
    start = time.perf_counter()
    if cell.workload == CPU_WORKLOAD:
        outcomes = [_cpu_trial(spec, cell_id, cell, t) for t in trials]
    else:
        outcomes = _gpu_trials(spec, cell_id, cell, trials)
    per = (time.perf_counter() - start) / max(1, len(trials))
    return [TrialRow(cell_id=cell_id, trial=t, failed=failed, crashed=False, first_failure=first, failed_checks=checks, gpu=gpu, worker=worker,
                     seconds=per)
            for t, (failed, first, checks) in zip(trials, outcomes)]


def _cpu_trial(spec: CampaignSpec, cell_id: int, cell: Cell, trial: int) -> tuple[bool, str | None, str]:
    """The reference cast of a random tensor checked against the pure-Python encoder; in the
    `none` cell (the baseline) a failure is injected (one flipped bit) at the profile's rate, so
    the statistics have a difference to find."""
    import torch

    from tracer.fp8.ref import py_cast, torch_cast
    from tracer.kernel.spec import OutFormat

    if trial == spec.kill_trial:
        os.kill(os.getpid(), signal.SIGKILL)  # a hard kill mid-task, for the executors' crash handling
    rng = random.Random(trial_seed(spec, cell_id, trial))
    gen = torch.Generator().manual_seed(rng.randrange(1 << 31))
    x = torch.randn(64, 64, generator=gen) * 50
    codes = torch_cast(x, 1.0, OutFormat.E4M3).flatten()
    rate = spec.inject_failure_rate if cell.variant == "none" else 0.0
    if rng.random() < rate:
        codes[rng.randrange(codes.numel())] ^= 1 << rng.randrange(8)
    values = x.flatten().tolist()
    bad = [i for i in range(len(values)) if py_cast(values[i], OutFormat.E4M3) != int(codes[i])]
    return bool(bad), (f"element {bad[0]}" if bad else None), "fp8_rowwise" if bad else ""


def _engine(spec: CampaignSpec, cell: Cell) -> Any:
    if cell.key not in _ENGINES:
        from tracer.kernel.spec import Config, InDtype, parse_variant
        from tracer.workloads.engine import Engine
        from tracer.workloads.spec import load_workload

        w = load_workload(cell.workload)
        over: dict[str, Any] = {"variant": parse_variant(cell.variant), "steps": spec.steps_per_trial,
                                "in_dtype": InDtype(cell.dtype), "seed": spec.seed}
        if cell.shape != "default":
            from tracer.workloads.spec import parse_shape

            over.update(parse_shape(cell.shape, w.kind))
        w = w.with_overrides(**over)
        if cell.config != "auto":
            w = w.with_overrides(config=Config.parse(cell.config))
        _ENGINES[cell.key] = Engine(w, checks=frozenset(spec.checks), sample=spec.sample_rows, flush_each_step=False)
    return _ENGINES[cell.key]


Fails = dict[int, list[tuple[Where, Check]]]  # chunk index -> (position within the trial, check)


def _gpu_trials(spec: CampaignSpec, cell_id: int, cell: Cell, trials: list[int]) -> list[tuple[bool, str | None, str]]:
    from tracer.campaign.graphed import graphable

    engine = _engine(spec, cell)
    steps = spec.steps_per_trial
    seeds = [trial_seed(spec, cell_id, t) for t in trials]
    fails = _graphed_fails(cell, engine, steps, seeds) if graphable(engine) else _eager_fails(engine, steps, seeds)
    out = []
    for i in range(len(trials)):
        found = sorted(fails.get(i, []), key=lambda f: f[0])
        out.append((bool(found), str(found[0][0]) if found else None, ",".join(sorted({c.value for _, c in found}))))
    return out


def _graphed_fails(cell: Cell, engine: Any, steps: int, seeds: list[int]) -> Fails:
    from tracer.campaign.graphed import TrialGraph

    if cell.key not in _GRAPHS:
        _GRAPHS[cell.key] = TrialGraph(engine, steps)
    graph = _GRAPHS[cell.key]
    return {i: [(where, check) for (check, where, _), (failed, _) in zip(graph.layout, rows) if failed]
            for i, rows in enumerate(graph.run(seeds))}


def _eager_fails(engine: Any, steps: int, seeds: list[int]) -> Fails:
    for i, seed in enumerate(seeds):
        engine.reseed(seed)
        for j in range(steps):
            engine.step(i * steps + j)
    engine.detector.flush()
    fails: Fails = defaultdict(list)
    for check, where, failed, _ in engine.detector.results:
        if failed:
            fails[where.step // steps].append((Where(where.step % steps, where.layer, where.microbatch), check))
    engine.detector.results.clear()
    return fails
