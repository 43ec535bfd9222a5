"""Synthetic multi-process jobs for CPU tests: one trace per rank (scripts/make_synthetic_trace.py's
TraceBuilder, the nsys schema) and one marker per process (docs/design/capture-memory-jobs.md),
with a known clock offset per rank and a known delay per rank and collective, so the straggler and
clock computations can be checked against the plan itself.

Per step s of each rank: an NVTX range `step{s}` holding COMPUTE kernels on stream 7, an event
recorded on stream 7 and waited on by stream 13, and an NCCL all-reduce on stream 13 that starts
at the step's ARRIVAL + delay[s][rank] and ends, on every rank, END_AFTER after the last arrival
(collectives end together). Wall-clock times are planned; each rank's trace holds them on its own
CUPTI clock (wall - offset), and its marker's clock pairs say so (plus `pair_error`, a lie)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.trace_synthetic import TraceBuilder

T0 = 1_790_000_000_000_000_000  # wall-clock ns of the first step
STEP_NS = 10_000_000
COMPUTE = 3
KERNEL_NS, KERNEL_EVERY = 50_000, 100_000
ARRIVAL = 1_000_000  # from the step's start to the collective's arrival without delay
END_AFTER = 200_000
NCCL_NAME = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_STREAM, NCCL_STREAM = 7, 13


@dataclass(frozen=True)
class Plan:
    offsets: tuple[int, ...]  # per rank: unix - cupti
    delays: tuple[tuple[int, ...], ...]  # per step, per rank: ns after the step's arrival time
    pair_error: tuple[int, ...] = ()  # per rank: added to the offsets its clock pairs claim

    @property
    def ranks(self) -> int:
        return len(self.offsets)

    def step_start(self, s: int) -> int:
        return T0 + s * STEP_NS

    def arrival(self, s: int, r: int) -> int:
        return self.step_start(s) + ARRIVAL + self.delays[s][r]

    def end(self, s: int) -> int:
        return self.step_start(s) + ARRIVAL + max(self.delays[s]) + END_AFTER

    def compute(self, s: int) -> list[tuple[int, int]]:
        return [(self.step_start(s) + j * KERNEL_EVERY, self.step_start(s) + j * KERNEL_EVERY + KERNEL_NS)
                for j in range(COMPUTE)]


def rank_trace(plan: Plan, r: int, out: Path) -> int:
    """Rank r's trace on its own CUPTI clock; returns its kernel count."""
    off = plan.offsets[r]
    b = TraceBuilder(pid=2000 + r, tid=2000 + r)
    b.rec.pid = 2000 + r
    for s in range(len(plan.delays)):
        b.t = plan.step_start(s) - off - 500_000
        b.push(f"step{s}")
        for start, end in plan.compute(s):
            b.launch(COMPUTE_STREAM, "gemm_kernel", end - start, start=start - off)
        b.wait(NCCL_STREAM, b.record(COMPUTE_STREAM))
        arrive = plan.arrival(s, r)
        b.launch(NCCL_STREAM, NCCL_NAME, plan.end(s) - arrive, start=arrive - off)
        b.t = plan.step_start(s) - off + STEP_NS // 2
        b.pop()
    b.write(out)
    return len(plan.delays) * (COMPUTE + 1)


def marker(plan: Plan, r: int, kernels: int | None, **fields: object) -> dict[str, object]:
    claimed = plan.offsets[r] + (plan.pair_error[r] if plan.pair_error else 0)
    start, end = plan.step_start(0) - 2_000_000, plan.end(len(plan.delays) - 1) + 2_000_000
    return {"pid": 2000 + r, "ppid": 1999, "host": "node", "rank": r, "local_rank": r, "world_size": plan.ranks,
            "file": f"node-{2000 + r}-r{r}", "argv": ["python3", "train.py"], "backend": "cupti", "state": "exited",
            "clock_start": [start - plan.offsets[r], start - plan.offsets[r] + claimed],
            "clock_end": [end - plan.offsets[r], end - plan.offsets[r] + claimed], "ended": "atexit", "exit": None,
            "kernels": kernels, "trace": f"node-{2000 + r}-r{r}.sqlite", "cuda": True, **fields}


def write_job(plan: Plan, run: Path, without_trace: tuple[int, ...] = ()) -> Path:
    """The run directory: procs/ with every rank's marker and trace (none for ranks in
    without_trace: their marker is a start marker only, as a SIGKILLed process leaves it)."""
    procs = run / "procs"
    procs.mkdir(parents=True)
    for r in range(plan.ranks):
        stem = f"node-{2000 + r}-r{r}"
        if r in without_trace:
            m = {k: v for k, v in marker(plan, r, None).items() if k not in ("clock_end", "ended", "exit", "kernels", "trace")}
            m["state"] = "running"
        else:
            m = marker(plan, r, rank_trace(plan, r, procs / f"{stem}.sqlite"))
        (procs / f"{stem}.json").write_text(json.dumps(m))
    (run / "command.json").write_text(json.dumps({"argv": ["torchrun", "train.py"], "backend": "cupti", "job": True,
                                                  "untraced": []}))
    return run
