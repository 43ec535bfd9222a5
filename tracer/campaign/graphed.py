"""A campaign trial captured once as a CUDA graph and replayed per trial.

The host then spends one replay and one copy per trial instead of ~150 eager launches: the
randomness (inputs and sampled check rows) comes from the default CUDA generator, which a replay
reads afresh, so reseeding between replays gives each trial its own data; the detector's results
land in one static tensor that each replay overwrites and a copy moves into the batch's buffer.
Cells that order work across streams (the planted cross-stream races) stay eager: their point is
the missing dependency, which a graph would turn into a fixed one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.fp8.detector import Check, Measure, Where

if TYPE_CHECKING:
    from tracer.workloads.engine import Engine


def graphable(engine: Engine) -> bool:
    import torch

    return engine.side is None and engine.device.type == "cuda" and hasattr(torch.cuda, "CUDAGraph")


class TrialGraph:
    """`steps` steps of an Engine as one CUDA graph; `run(seeds)` judges each trial's comparisons on the host."""

    def __init__(self, engine: Engine, steps: int) -> None:
        import torch

        self.engine = engine
        engine.gen = torch.cuda.default_generators[engine.device.index]  # registered with every capture
        side = torch.cuda.Stream(engine.device)  # type: ignore[no-untyped-call]  # torch.cuda.Stream.__init__ has no annotations
        side.wait_stream(torch.cuda.current_stream(engine.device))
        with torch.cuda.stream(side):  # warm-up: NVRTC compile, cuBLAS workspaces, allocator pools
            self._steps(steps)
        torch.cuda.current_stream(engine.device).wait_stream(side)
        engine.detector.pending.clear()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._steps(steps)
            values = [m.value.reshape(()) for _, _, m in engine.detector.pending]
            self.out = torch.stack(values) if values else torch.zeros(0, device=engine.device)
        self.layout: list[tuple[Check, Where, Measure]] = list(engine.detector.pending)
        engine.detector.pending.clear()

    def _steps(self, steps: int) -> None:
        for j in range(steps):
            self.engine.step(j)

    def run(self, seeds: list[int]) -> list[list[tuple[bool, float]]]:
        """Per trial, (failed, value) of every comparison in `layout` order."""
        import torch

        buf = torch.empty((len(seeds), *self.out.shape), device=self.out.device)
        for i, seed in enumerate(seeds):
            self.engine.gen.manual_seed(seed)
            self.graph.replay()
            buf[i].copy_(self.out)
        return [[m.judge(v) for (_, _, m), v in zip(self.layout, row)] for row in buf.cpu().tolist()]
