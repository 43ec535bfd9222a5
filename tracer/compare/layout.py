"""One representative step of a side, laid out for the diff picture: its kernels as bars per stream,
times from the step's first kernel. The step with the median GPU span is chosen (the first process's,
for a job); a trace without step ranges gives its first MAX_BARS kernels."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracer.compare.timing import range_key, span_per_group
from tracer.analysis.analyze import Analysis
from tracer.analysis.job_summary import kernel_steps

MAX_BARS = 20_000
WHOLE_RUN = "whole run"


@dataclass(frozen=True, kw_only=True)
class StepLayout:
    step: str  # the step's name, or "whole run"
    lanes: tuple[str, ...]  # "s7", or "d1 s7" when kernels ran on several devices
    lane: np.ndarray  # per bar, index into lanes
    start: np.ndarray  # ns from the first bar's start
    end: np.ndarray
    range: tuple[str, ...]  # per bar: its range key ("" when unattributed)
    kernel: tuple[str, ...]  # per bar: its kernel name

    @property
    def span_ns(self) -> int:
        return int(self.end.max()) if len(self.end) else 0


def step_layout(a: Analysis, steps: tuple[list[str], np.ndarray] | None = None) -> StepLayout:
    """`steps`: kernel_steps(a.trace, a) when the caller has it already."""
    t, k = a.trace, a.trace.kernels
    names, step = steps if steps is not None else kernel_steps(t, a)
    if names:
        ids, span = span_per_group(step, k.start, k.end)
        pick = int(ids[np.argsort(span, kind="stable")[(len(span) - 1) // 2]])
        sel, title = np.flatnonzero(step == pick), names[pick]
    else:
        sel, title = np.argsort(k.start, kind="stable")[:MAX_BARS], WHOLE_RUN
    sel = sel[np.argsort(k.start[sel], kind="stable")][:MAX_BARS]
    multi = len(np.unique(k.device[sel])) > 1
    pairs = sorted({(int(d), int(s)) for d, s in zip(k.device[sel].tolist(), k.stream[sel].tolist())})
    lanes = tuple(f"d{d} s{s}" if multi else f"s{s}" for d, s in pairs)
    where = {p: i for i, p in enumerate(pairs)}
    lane = np.array([where[(int(d), int(s))] for d, s in zip(k.device[sel].tolist(), k.stream[sel].tolist())], dtype=np.int64)
    t0 = int(k.start[sel].min()) if len(sel) else 0
    rng = a.attribution.range_of_kernel[sel]
    ranges = tuple(range_key(t.strings[int(t.ranges.text[r])]) if r >= 0 else "" for r in rng.tolist())
    kernels = tuple(t.kernel_name(int(i)) for i in sel.tolist())
    return StepLayout(step=title, lanes=lanes, lane=lane, start=k.start[sel] - t0, end=k.end[sel] - t0, range=ranges,
                      kernel=kernels)
