"""Time of A against B per key (a step, an NVTX range, a kernel name): the distribution over its
instances in each run, the ratio of the medians with a bootstrap 95% interval, and a two-sided
Mann-Whitney U test, Holm-corrected over every judged key. A change is beyond run-to-run noise when
the corrected p-value is under alpha and the interval excludes 1.

Samples are integer nanoseconds: per kernel launch its duration; per NVTX range instance the GPU
span of the kernels attributed to it (first start to last end); per step the GPU span of its kernels.
Step ranges (step3, ProfilerStep#3, iteration 3) are pooled under one key with the number replaced by
`*`, so runs of different step counts compare as distributions, never step by step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from tracer.campaign.stats import holm
from tracer.analysis.job_summary import range_key  # noqa: F401  (re-exported: the diff's key for range names)

ALPHA = 0.05
MIN_SAMPLES = 3  # fewer on either side: the change is reported, never judged
BOOTSTRAP = 2000  # resamples (each side's bootstrap medians drawn exactly: bootstrap_medians)


class KeyKind(str, Enum):
    STEP = "step"
    RANGE = "range"
    KERNEL = "kernel"


class Change(str, Enum):
    SLOWER = "slower"  # beyond noise
    FASTER = "faster"  # beyond noise
    WITHIN_NOISE = "within-noise"
    UNJUDGED = "unjudged"  # fewer than MIN_SAMPLES instances on a side
    NEW = "new"  # only in B
    GONE = "gone"  # only in A


@dataclass(frozen=True)
class Samples:
    """Durations (ns) per key of one run."""

    by_key: dict[tuple[KeyKind, str], np.ndarray]


@dataclass(frozen=True, kw_only=True)
class TimeChange:
    kind: KeyKind
    name: str
    n_a: int
    n_b: int
    median_a_ns: float | None
    median_b_ns: float | None
    total_a_ns: int
    total_b_ns: int
    ratio: float | None  # median B / median A
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # Mann-Whitney U, two-sided
    p_holm: float | None
    change: Change

    @property
    def percent(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {k: (v.value if isinstance(v, Enum) else v) for k, v in self.__dict__.items()}
        out["percent"] = self.percent
        return out


def group_samples(labels: list[str], codes: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    """values grouped by labels[codes[i]] (labels may repeat: their groups are joined)."""
    ids: dict[str, int] = {}
    label_id = np.fromiter((ids.setdefault(x, len(ids)) for x in labels), dtype=np.int64, count=len(labels))
    c = label_id[codes] if len(codes) else codes
    order = np.argsort(c, kind="stable")
    cs = c[order]
    if len(cs) == 0:
        return {}
    heads = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    names = list(ids)
    return {names[int(cs[lo])]: values[order[lo:hi]] for lo, hi in zip(heads.tolist(), np.r_[heads[1:], len(cs)].tolist())}


def span_per_group(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group ids present, first start to last end of each) for the items with group >= 0."""
    sel = group >= 0
    g = group[sel]
    if len(g) == 0:
        return g, g
    n = int(g.max()) + 1
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, g, start[sel])
    np.maximum.at(hi, g, end[sel])
    ids = np.flatnonzero(hi > np.iinfo(np.int64).min)
    return ids, hi[ids] - lo[ids]


def bootstrap_medians(x: np.ndarray, draws: int, rng: np.random.Generator, presorted: bool = False) -> np.ndarray:
    """`draws` medians of bootstrap resamples of x, drawn without resampling. A resample is n
    indices floor(n U) of uniforms U, so its j-th smallest index is floor(n U_(j)), and the j-th
    smallest of n uniforms is Beta(j, n - j + 1); given it is u, the next one is u + (1 - u)
    Beta(1, n - j). Drawing those is exactly the bootstrap distribution of the median, for odd n
    and (the two middle order statistics jointly) even n, at O(draws) whatever n."""
    xs = x if presorted else np.sort(x)
    n = len(xs)
    j = (n + 1) // 2
    u = rng.beta(j, n - j + 1, draws)
    lower = xs[np.minimum((u * n).astype(np.int64), n - 1)].astype(np.float64)
    if n % 2:
        return lower
    v = u + (1.0 - u) * rng.beta(1, n - j, draws)
    return (lower + xs[np.minimum((v * n).astype(np.int64), n - 1)]) / 2


def _median_ratio_ci(sa: np.ndarray, sb: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """From the two sides sorted."""
    ma, mb = bootstrap_medians(sa, BOOTSTRAP, rng, True), bootstrap_medians(sb, BOOTSTRAP, rng, True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = mb / ma
    ratios = ratios[np.isfinite(ratios)]
    if len(ratios) < BOOTSTRAP // 2:
        return float("nan"), float("nan")
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def _runs(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs."""
    heads = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    return xs[heads], np.diff(np.r_[heads, len(xs)])


def mann_whitney_p(a: np.ndarray, b: np.ndarray, presorted: bool = False) -> float:
    """Two-sided Mann-Whitney U p-value: scipy's (exact where it picks exact) when a side has at most
    8 values; else the normal approximation with tie and continuity corrections, as scipy's
    asymptotic method computes it, from the two sides sorted (U by binary search, tie counts by
    merging the runs, both per distinct value) instead of ranking their concatenation."""
    na, nb = len(a), len(b)
    if min(na, nb) <= 8:
        from scipy import stats  # only here: importing scipy.stats costs about a second

        return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    sa, sb = (a, b) if presorted else (np.sort(a), np.sort(b))
    (ua, ca), (ub, cb) = _runs(sa), _runs(sb)
    pos = np.minimum(np.searchsorted(ub, ua), len(ub) - 1)
    both = ub[pos] == ua
    tied = np.where(both, cb[pos], 0)  # per distinct value of a: how many b equal it
    u1 = float((ca * np.searchsorted(sb, ua, side="left")).sum()) + 0.5 * float((ca * tied).sum())  # a above b, ties half
    t = np.r_[ca + tied, np.delete(cb, pos[both])].astype(np.float64)
    n = na + nb
    sd = math.sqrt(na * nb / 12 * ((n + 1) - float((t ** 3 - t).sum()) / (n * (n - 1))))
    if sd == 0:
        return 1.0
    z = (max(u1, na * nb - u1) - na * nb / 2 - 0.5) / sd
    return float(min(1.0, math.erfc(z / math.sqrt(2))))


def _one(kind: KeyKind, name: str, a: np.ndarray | None, b: np.ndarray | None, rng: np.random.Generator) -> TimeChange:
    na, nb = (0 if x is None else len(x) for x in (a, b))
    a, b = (None if x is None else np.sort(x) for x in (a, b))
    med = [None if x is None else float((x[(len(x) - 1) // 2] + x[len(x) // 2]) / 2) for x in (a, b)]
    base: dict[str, Any] = dict(kind=kind, name=name, n_a=na, n_b=nb, median_a_ns=med[0], median_b_ns=med[1],
                total_a_ns=int(a.sum()) if a is not None else 0, total_b_ns=int(b.sum()) if b is not None else 0)
    if a is None or b is None:
        return TimeChange(**base, ratio=None, ci_low=None, ci_high=None, p_value=None, p_holm=None,
                          change=Change.NEW if a is None else Change.GONE)
    ratio = med[1] / med[0] if med[0] else None  # type: ignore[operator]  # b is not None here, so med[1] is a float
    if min(na, nb) < MIN_SAMPLES or ratio is None:
        return TimeChange(**base, ratio=ratio, ci_low=None, ci_high=None, p_value=None, p_holm=None, change=Change.UNJUDGED)
    p = 1.0 if a[0] == a[-1] == b[0] == b[-1] else mann_whitney_p(a, b, presorted=True)
    lo, hi = _median_ratio_ci(a, b, rng)
    return TimeChange(**base, ratio=ratio, ci_low=lo, ci_high=hi, p_value=p, p_holm=None, change=Change.WITHIN_NOISE)


def _judge(c: TimeChange, p_holm: float, alpha: float) -> TimeChange:
    from dataclasses import replace

    lo, hi = c.ci_low, c.ci_high
    beyond = p_holm < alpha and lo is not None and hi is not None and np.isfinite(lo) and (lo > 1.0 or hi < 1.0)
    change = (Change.SLOWER if (c.ratio or 0) > 1.0 else Change.FASTER) if beyond else Change.WITHIN_NOISE
    return replace(c, p_holm=p_holm, change=change)


ORDER = {Change.SLOWER: 0, Change.FASTER: 1, Change.NEW: 2, Change.GONE: 3, Change.UNJUDGED: 4, Change.WITHIN_NOISE: 5}


def compare_samples(a: Samples, b: Samples, alpha: float = ALPHA, seed: int = 0) -> tuple[TimeChange, ...]:
    """Every key of A or B; judged keys Holm-corrected together. Ordered what changed first (slower,
    faster, new, gone, unjudged, within noise), then by the time at stake."""
    rng = np.random.default_rng(seed)
    keys = sorted(set(a.by_key) | set(b.by_key), key=lambda k: (k[0].value, k[1]))
    out = [_one(k[0], k[1], a.by_key.get(k), b.by_key.get(k), rng) for k in keys]
    judged = [i for i, c in enumerate(out) if c.p_value is not None]
    for i, p in zip(judged, holm([out[i].p_value for i in judged])):  # type: ignore[misc]  # p_value is set on every judged change
        out[i] = _judge(out[i], p, alpha)
    return tuple(sorted(out, key=lambda c: (ORDER[c.change], -abs(c.total_b_ns - c.total_a_ns))))
