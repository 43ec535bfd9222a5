"""Per-key duration samples of one trace or job (tracer.compare.timing compares them): kernel
launches by name, NVTX range instances by name (step numbers pooled), steps."""
from __future__ import annotations

import numpy as np

from tracer.compare.timing import KeyKind, Samples, group_samples, span_per_group
from tracer.analysis.analyze import Analysis
from tracer.analysis.job_summary import kernel_steps, range_keys

STEPS = "steps"


def trace_samples(a: Analysis, steps: tuple[list[str], np.ndarray] | None = None) -> dict[tuple[KeyKind, str], np.ndarray]:
    """`steps`: kernel_steps(a.trace, a) when the caller has it already."""
    t, k = a.trace, a.trace.kernels
    out: dict[tuple[KeyKind, str], np.ndarray] = {}
    order = np.argsort(k.name, kind="stable")
    sorted_names = k.name[order]
    head = np.flatnonzero(np.r_[True, sorted_names[1:] != sorted_names[:-1]]) if len(order) else order
    dur = (k.end - k.start)[order]
    for lo, hi in zip(head.tolist(), np.r_[head[1:], len(order)].tolist()):
        key = (KeyKind.KERNEL, t.strings[int(sorted_names[lo])])
        out[key] = dur[lo:hi] if key not in out else np.concatenate([out[key], dur[lo:hi]])
    rng, dur = span_per_group(a.attribution.range_of_kernel, k.start, k.end)
    if len(rng):
        texts, tinv = np.unique(t.ranges.text[rng], return_inverse=True)
        labels = range_keys([t.strings[int(x)] for x in texts.tolist()])
        for name, v in group_samples(labels, tinv.astype(np.int64), dur).items():
            out[(KeyKind.RANGE, name)] = v
    names, step = steps if steps is not None else kernel_steps(t, a)
    if names:
        _, span = span_per_group(step, k.start, k.end)
        out[(KeyKind.STEP, STEPS)] = span
    return out


def pooled(parts: list[dict[tuple[KeyKind, str], np.ndarray]]) -> Samples:
    """Several processes' samples (a job's ranks) under the same keys."""
    joined: dict[tuple[KeyKind, str], list[np.ndarray]] = {}
    for p in parts:
        for key, v in p.items():
            joined.setdefault(key, []).append(v)
    return Samples({k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in joined.items()})
