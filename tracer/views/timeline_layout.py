"""What a stream timeline shows, computed from an Analysis (no drawing here).

One lane per (device, stream) with its kernels coloured by category: the NVTX family (the last
`/` segment of the range name) on traces whose ranges are paths, like tracer's own, else the kernel
name (the names with the most GPU time, the rest "other"). NVTX lanes per CPU thread. Event edges,
producer -> consumer pairs and hazards as arrows between the kernels they join, and those kernels
as marks drawn on top; a kind with more arrows than can be told apart becomes a density strip.
Work is proportional to the kernels in the window plus the pairs drawn: a lane with more than
MAX_BARS_PER_LANE kernels becomes a column mix (per pixel column, the busy time of each category),
so no category hides another in a column.
"""
from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tracer.errors import UsageError
from tracer.analysis.analyze import Analysis, PairVerdict
from tracer.model.names import ellipsize as _ellipsize
from tracer.model.names import short_name
from tracer.analysis.ordering import Verdict
from tracer.analysis.pairs import PairSpec
from tracer.analysis.selection import parse_range, require_shown

if TYPE_CHECKING:
    from tracer.analysis.job_summary import JobAnalysis

FAMILIES = ("cast_transpose", "dgrad", "wgrad", "amax_update", "check")  # tracer's families, fixed colours
OTHER, CHECK = "other", "check"
TOP_CATEGORIES = 8  # categories besides "other"
MAX_BARS_PER_LANE = 3000
MIN_BAR_PX = 3  # a kernel or range shorter than a pixel is drawn this wide: two short kernels must not look like none
MAX_ARROWS_PER_KIND = 150  # beyond: a density strip
MAX_DRAWN_PAIRS = 1000  # pairs looked at for drawing, UNORDERED first
MAX_LANES = 40  # stream lanes drawn; beyond, the quietest streams fold into one lane per device
FOLDED = -2  # the stream key of a device's folded lane
AXES_SHARE = 0.8  # share of the figure width the time axis gets (for pixel sizes)
DENSE_SHARE = 0.8  # the default view holds this share of the kernels
MARK_MIN_PX = 4.0
PAIR_KINDS = tuple(v.value for v in Verdict)
HAZARD = "hazard"
EVENT = "event"


@dataclass(frozen=True)
class ColumnMix:
    """Busy time per (pixel column, category) of a lane too big for one bar per kernel."""

    x0_us: float
    col_us: float
    busy_us: np.ndarray  # (columns, categories)


@dataclass(frozen=True, kw_only=True)
class Lane:
    label: str
    device: int
    stream: int
    start_us: np.ndarray  # one bar per kernel (empty when the lane is a column mix)
    width_us: np.ndarray
    category: np.ndarray  # index into TimelineData.categories
    names: tuple[str, ...]  # short kernel name per bar
    kernels: int  # kernels in the window
    mix: ColumnMix | None

    @property
    def aggregated(self) -> bool:
        return self.mix is not None


@dataclass(frozen=True, kw_only=True)
class RangeLane:
    label: str
    start_us: np.ndarray
    width_us: np.ndarray
    depth: np.ndarray
    names: tuple[str, ...]  # per bar; empty when aggregated
    aggregated: bool


@dataclass(frozen=True, kw_only=True)
class Arrow:
    x0_us: float
    lane0: int
    x1_us: float
    lane1: int
    kind: str  # "event", a pair verdict ("unordered", ...) or "hazard"
    label: str
    producer: int  # kernel indices
    consumer: int


@dataclass(frozen=True, kw_only=True)
class Mark:
    """A kernel a drawn pair or hazard is about, drawn on top with a minimum width and an outline."""

    lane: int
    start_us: float
    width_us: float
    category: int
    kind: str  # the arrow kind it belongs to (its outline colour)
    kernel: int


@dataclass(frozen=True, kw_only=True)
class Strip:
    """Arrows of one kind too many to draw: their count per pixel column (at the consumer end)."""

    kind: str
    label: str
    x0_us: float
    col_us: float
    counts: np.ndarray


@dataclass(frozen=True, kw_only=True)
class TimelineData:
    title: str
    subtitle: str  # what is applied: range, window and why
    hint: str  # how to zoom
    window_us: tuple[float, float]
    unit: tuple[str, float]  # axis unit and its size in microseconds
    color_by: str  # "NVTX family" or "kernel name"
    categories: tuple[str, ...]
    lanes: tuple[Lane, ...]
    range_lanes: tuple[RangeLane, ...]
    arrows: tuple[Arrow, ...]
    marks: tuple[Mark, ...]
    strips: tuple[Strip, ...]
    time_from: str = "the first GPU operation"  # what the time axis counts from
    alert: str = ""  # what the title must warn of (a rank that died: "rank 1 PARTIAL"), shown in red


class HazardLike(Protocol):
    """What the timeline needs of a hazard: its kind and the kernel index of both sides."""

    @property
    def kind(self) -> object: ...  # "RAW", "WAR", "WAW", "reuse" (str or str Enum)
    @property
    def producer_index(self) -> int: ...
    @property
    def consumer_index(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class Frame:
    """Where each kernel goes: times in microseconds from the first GPU operation, lane (-1: none)."""

    t0: int
    lane_keys: tuple[tuple[int, int], ...]
    lane_of_kernel: np.ndarray
    start_us: np.ndarray
    end_us: np.ndarray


# ---- options --------------------------------------------------------------------------------

def pair_mode(spec: PairSpec) -> str:
    """'none', 'all' or 'globs'."""
    return spec.mode.value


def time_unit(span_us: float) -> tuple[str, float]:
    if span_us >= 10e6:
        return "s", 1e6
    if span_us >= 10e3:
        return "ms", 1e3
    return "µs", 1.0


def distinct_short_names(names: Sequence[str], width: int = 56) -> list[str]:
    """short_name of each (template arguments elided); names whose short forms collide show their
    start, then the text from where they differ; still equal ones are numbered."""
    full = [short_name(n, 10_000) for n in names]
    out = [short_name(n, width) for n in names]  # template arguments elided where the name is long
    for short in {o for o in out if out.count(o) > 1}:
        group = [i for i, o in enumerate(out) if o == short]
        common = len(os.path.commonprefix([full[i] for i in group]))
        head = width // 3
        for i in group:
            tail = full[i][max(head, common - 8):]
            out[i] = full[i][:head] + "…" + _ellipsize(tail, width - head - 1)
    seen: dict[str, int] = {}
    for i, o in enumerate(out):
        seen[o] = seen.get(o, 0) + 1
        out[i] = o if seen[o] == 1 else f"{o} #{seen[o]}"
    return out


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


# ---- frame, pairs, hazards --------------------------------------------------------------------


def make_frame(a: Analysis, t0: int | None = None) -> Frame:
    """Lanes in the analysis' stream order (computed once there), one lane index per kernel; times
    from t0 (default: the first GPU operation: kernel, copy or memset)."""
    k = a.trace.kernels
    keys = tuple((s.device, s.stream) for s in a.streams)
    fold = folded_streams(a) if len(keys) > MAX_LANES else set()
    if fold:
        keys = tuple(key for key in keys if key not in fold) + tuple(sorted({(d, FOLDED) for d, _ in fold}))
    if t0 is None:
        t0 = int(k.start.min()) if len(k) else 0
    packed = _pack(np.array([d for d, _ in keys], dtype=np.int64), np.array([s for _, s in keys], dtype=np.int64))
    order = np.argsort(packed)
    kp = _pack(k.device, k.stream)
    if fold:
        folded = np.isin(kp, _pack(np.array([d for d, _ in fold], dtype=np.int64), np.array([x for _, x in fold], dtype=np.int64)))
        kp = np.where(folded, _pack(k.device, np.full(len(k), FOLDED, dtype=np.int64)), kp)
    pos = np.clip(np.searchsorted(packed[order], kp), 0, max(len(keys) - 1, 0))
    lane = np.where(packed[order][pos] == kp, order[pos], -1) if len(keys) else np.full(len(k), -1)
    return Frame(t0=t0, lane_keys=keys, lane_of_kernel=lane.astype(np.int64), start_us=(k.start - t0) / 1e3, end_us=(k.end - t0) / 1e3)


def folded_streams(a: Analysis) -> set[tuple[int, int]]:
    """With more than MAX_LANES streams, the ones folded into one lane per device: every stream but
    those of the drawn pairs and, after them, the busiest (most kernels), MAX_LANES lanes in all."""
    keep = {(a.trace.kernels.device[i], a.trace.kernels.stream[i]) for p in pairs_to_draw(a)
            for i in (p.producer_index, p.consumer_index) if i >= 0}
    keep = {(int(d), int(x)) for d, x in keep}
    devices = len({s.device for s in a.streams})
    for s in sorted(a.streams, key=lambda s: -s.kernels):
        if len(keep) >= MAX_LANES - devices:
            break
        keep.add((s.device, s.stream))
    return {(s.device, s.stream) for s in a.streams} - keep


def pairs_to_draw(a: Analysis) -> list[PairVerdict]:
    """UNORDERED pairs first; with `all` only those (the ordered ones are the lanes and the event
    edges), with globs every pair across streams (the ones asked about); at most MAX_DRAWN_PAIRS."""
    mode = pair_mode(a.pair_spec)
    if mode == "none":
        return []
    unordered = [p for p in a.pairs if p.verdict is Verdict.UNORDERED]
    rest = [] if mode == "all" else [p for p in a.pairs if p.verdict is not Verdict.UNORDERED]
    picked = (unordered + rest)[:MAX_DRAWN_PAIRS]
    return [p for p in picked if p.producer_stream != p.consumer_stream]  # stream order is the lane itself


def pair_kernels(pairs: Sequence[PairVerdict]) -> list[tuple[int, int] | None]:
    """(producer, consumer) kernel index per pair (None where the pair does not know them)."""
    return [(p.producer_index, p.consumer_index) if p.producer_index >= 0 and p.consumer_index >= 0 else None
            for p in pairs]


def hazards_of(a: Analysis) -> tuple[HazardLike, ...]:
    """The hazards the analysis lists (none with --no-hazards or without memory access sets)."""
    return tuple(a.hazards.listed) if a.hazards is not None else ()


def arrows_from_pairs(pairs: Sequence[PairVerdict], kernels: Sequence[tuple[int, int] | None], frame: Frame) -> list[Arrow]:
    out = []
    for p, pk in zip(pairs, kernels):
        if pk is not None:
            label = f"{p.producer} -> {p.consumer}" + (" UNORDERED" if p.verdict is Verdict.UNORDERED else "")
            out.append(_arrow(frame, pk[0], pk[1], p.verdict.value, label))
    return [a for a in out if a is not None]


def arrows_from_hazards(hazards: Iterable[HazardLike], frame: Frame) -> list[Arrow]:
    """One arrow per hazard, producer -> consumer, labelled with its kind (RAW, WAR, WAW, reuse)."""
    out = []
    for h in hazards:
        kind = str(getattr(h.kind, "value", h.kind))
        may = " (may)" if getattr(h, "may", False) else ""
        out.append(_arrow(frame, int(h.producer_index), int(h.consumer_index), HAZARD, f"{kind} hazard{may}"))
    return [a for a in out if a is not None]


def _arrow(frame: Frame, p: int, c: int, kind: str, label: str) -> Arrow | None:
    n = len(frame.lane_of_kernel)
    if not (0 <= p < n and 0 <= c < n) or frame.lane_of_kernel[p] < 0 or frame.lane_of_kernel[c] < 0:
        return None
    return Arrow(x0_us=float(frame.end_us[p]), lane0=int(frame.lane_of_kernel[p]), x1_us=float(frame.start_us[c]),
                 lane1=int(frame.lane_of_kernel[c]), kind=kind, label=label, producer=p, consumer=c)


@dataclass(frozen=True, kw_only=True)
class EventEdges:
    """Event record -> stream wait edges: the last kernel before the record on its stream and the
    first kernel after the wait on the waiting stream, with both streams and the event key."""

    producer: np.ndarray
    consumer: np.ndarray
    record_device: np.ndarray
    record_stream: np.ndarray
    wait_device: np.ndarray
    wait_stream: np.ndarray
    key: np.ndarray

    def __len__(self) -> int:
        return len(self.producer)


def event_edges(a: Analysis) -> EventEdges:
    t, k = a.trace, a.trace.kernels
    recs = {r.key: r for r in t.records}
    rows = [(recs[y.key], y) for y in t.syncs if y.kind.value == "wait" and y.key in recs]
    cols = np.array([(r.device, r.stream, r.corr, y.device, y.stream, y.corr, y.key) for r, y in rows],
                    dtype=np.int64).reshape(-1, 7)
    index = _SubmissionIndex(k.device, k.stream, k.corr)
    p = index.neighbour(cols[:, 0], cols[:, 1], cols[:, 2], after=False)
    c = index.neighbour(cols[:, 3], cols[:, 4], cols[:, 5], after=True)
    ok = (p >= 0) & (c >= 0)
    return EventEdges(producer=p[ok], consumer=c[ok], record_device=cols[ok, 0], record_stream=cols[ok, 1], wait_device=cols[ok, 3],
                      wait_stream=cols[ok, 4], key=cols[ok, 6])


class _SubmissionIndex:
    """Kernels sorted by (device, stream, correlation id) as one int64 key: stream rank, then corr."""

    def __init__(self, device: np.ndarray, stream: np.ndarray, corr: np.ndarray) -> None:
        kp = _pack(device, stream)
        self.lanes, rank = np.unique(kp, return_inverse=True)
        self.span = int(corr.max()) + 2 if len(corr) else 2
        key = rank.astype(np.int64) * self.span + corr
        self.order = np.argsort(key, kind="stable")
        self.key = key[self.order]

    def neighbour(self, device: np.ndarray, stream: np.ndarray, corr: np.ndarray, after: bool) -> np.ndarray:
        """Per query, the first kernel on (device, stream) submitted after corr, or the last one
        before it; -1 where there is none."""
        q = _pack(device, stream)
        rank = np.clip(np.searchsorted(self.lanes, q), 0, max(len(self.lanes) - 1, 0))
        known = (self.lanes[rank] == q) if len(self.lanes) else np.zeros(len(q), dtype=bool)
        pos = np.searchsorted(self.key, rank * self.span + np.clip(corr, 0, self.span - 1))
        j = pos if after else pos - 1
        inside = (j >= 0) & (j < len(self.key))
        jj = np.clip(j, 0, max(len(self.key) - 1, 0))
        same = inside & known & (self.key[jj] // self.span == rank) if len(self.key) else inside
        return np.where(same, self.order[jj] if len(self.key) else -1, -1)


def _pack(device: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """(device, stream key) as one int64: stream keys carry their process above bit 40 (model.py)."""
    return (np.asarray(device, dtype=np.int64) << 52) | (np.asarray(stream, dtype=np.int64) & ((1 << 52) - 1))


# ---- categories, window, lanes ----------------------------------------------------------------


def categories(a: Analysis, sel: np.ndarray) -> tuple[str, tuple[str, ...], np.ndarray]:
    """(colour by, category names, category per selected kernel): NVTX families where path-like
    range names hold at least half the GPU time, else kernel names; the top TOP_CATEGORIES by GPU
    time, the rest "other"."""
    color_by, names, cats = joint_categories([(a, sel)])
    return color_by, names, cats[0]


def joint_categories(parts: Sequence[tuple[Analysis, np.ndarray]]) -> tuple[str, tuple[str, ...], list[np.ndarray]]:
    """categories() over the selected kernels of several analyses (the processes of a job) at once,
    so a name has one colour in all of them."""
    dur = np.concatenate([(a.trace.kernels.end[sel] - a.trace.kernels.start[sel]).astype(np.float64) + 1.0
                          for a, sel in parts])  # +1 ns: zero-length kernels still count
    sizes = np.cumsum([0] + [len(sel) for _, sel in parts])
    fam, fam_names = _joint([_families(a, sel) for a, sel in parts])
    if len(dur) and dur[fam >= 0].sum() >= 0.5 * dur.sum():
        names, cat = _top(fam, fam_names, dur)
        return "NVTX family", names, [cat[sizes[i]:sizes[i + 1]] for i in range(len(parts))]
    ids, full = _joint([_kernel_names(a, sel) for a, sel in parts])
    names, cat = _top(ids, full, dur)
    tail = (OTHER,) if names[-1:] == (OTHER,) else ()
    short = tuple(distinct_short_names(names[: len(names) - len(tail)])) + tail
    return "kernel name", short, [cat[sizes[i]:sizes[i + 1]] for i in range(len(parts))]


def _kernel_names(a: Analysis, sel: np.ndarray) -> tuple[np.ndarray, list[str]]:
    u, inv = np.unique(a.trace.kernels.name[sel], return_inverse=True)
    return inv.astype(np.int64), [a.trace.strings[int(i)] for i in u]


def _joint(parts: Sequence[tuple[np.ndarray, list[str]]]) -> tuple[np.ndarray, list[str]]:
    """Ids into per-part name lists (-1: none) as ids into one list of the names of all parts."""
    names: dict[str, int] = {}
    out = []
    for ids, local in parts:
        lut = np.array([names.setdefault(n, len(names)) for n in local] + [-1], dtype=np.int64)
        out.append(lut[np.where(ids >= 0, ids, len(local))])
    return (np.concatenate(out) if out else np.zeros(0, dtype=np.int64)), list(names)


def _families(a: Analysis, sel: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per selected kernel, the last `/` segment of its range name (an index into the returned
    names), -1 when its range name is not a path or it has no range; one lookup per distinct name."""
    t = a.trace
    rng = a.attribution.range_of_kernel[sel]
    sid = np.where(rng >= 0, t.ranges.text[np.maximum(rng, 0)] if len(t.ranges.text) else -1, -1)
    u, inv = np.unique(sid, return_inverse=True)
    names: dict[str, int] = {}
    of_u = np.array([names.setdefault(t.strings[int(s)].rsplit("/", 1)[1], len(names))
                     if s >= 0 and "/" in t.strings[int(s)] else -1 for s in u], dtype=np.int64)
    return (of_u[inv] if len(u) else np.zeros(0, dtype=np.int64)), list(names)


def _top(ids: np.ndarray, names: list[str], weight: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """The TOP_CATEGORIES names with the most weight (tracer's families first, in their fixed
    order), then "other" if anything is left; the category of each id (-1: other)."""
    has = ids >= 0
    total = np.bincount(ids[has], weights=weight[has], minlength=len(names))
    ranked = [int(i) for i in np.argsort(-total, kind="stable") if total[i] > 0][:TOP_CATEGORIES]
    ranked.sort(key=lambda i: (FAMILIES.index(names[i]) if names[i] in FAMILIES else len(FAMILIES), -total[i]))
    picked = [names[i] for i in ranked]
    to_cat = np.full(len(names) + 1, len(picked), dtype=np.int64)  # last slot: ids of -1
    to_cat[ranked] = np.arange(len(ranked))
    cat = to_cat[np.where(has, ids, len(names))]
    other = bool((cat == len(picked)).any())
    return tuple(picked) + ((OTHER,) if other else ()), cat


def choose_window(frame: Frame, base: np.ndarray, window: tuple[float, float] | None, ranged: bool,
                  must: np.ndarray) -> tuple[float, float, str]:
    """(lo, hi, why) in microseconds. A given window is clipped to the kernels in it; with --range,
    the extent of the matching kernels; by default the shortest interval holding DENSE_SHARE of the
    kernels, stretched over `must` (UNORDERED pairs, hazards), or the whole trace when that is more
    than half of it."""
    s, e = frame.start_us[base], frame.end_us[base]
    if window is not None:
        lo, hi = window
        inside = (e >= lo) & (s <= hi)
        if not inside.any():
            return lo, hi, "as given"
        return max(lo, float(s[inside].min())), min(hi, float(e[inside].max())), "as given"
    if len(s) == 0:
        return 0.0, 1.0, "no kernels"
    lo_all, hi_all = float(s.min()), float(e.max())
    if ranged:
        return lo_all, hi_all, "the kernels of the matching ranges"
    lo, hi = _densest(s, e)
    if len(must):
        lo, hi = min(lo, float(frame.start_us[must].min())), max(hi, float(frame.end_us[must].max()))
    if hi - lo > 0.5 * (hi_all - lo_all):
        return lo_all, hi_all, "whole trace"
    why = f"the densest {DENSE_SHARE:.0%} of kernels" + (" and every UNORDERED pair or hazard drawn" if len(must) else "")
    margin = 0.02 * (hi - lo)
    return max(lo_all, lo - margin), min(hi_all, hi + margin), why


def _densest(s: np.ndarray, e: np.ndarray) -> tuple[float, float]:
    ss = np.sort(s)
    n = len(ss)
    m = max(1, int(math.ceil(DENSE_SHARE * n)))
    i = int(np.argmin(ss[m - 1:] - ss[: n - m + 1]))
    lo, hi = float(ss[i]), float(ss[i + m - 1])
    return lo, float(e[(s >= lo) & (s <= hi)].max())


def column_busy(start: np.ndarray, end: np.ndarray, cat: np.ndarray, x0: float, col_us: float, ncols: int,
                ncat: int) -> np.ndarray:
    """Busy time of each category in each column [x0 + j*col, x0 + (j+1)*col), exact and O(kernels):
    the busy time up to x is G(x, starts) - G(x, ends) with G(x, p) = sum of max(0, x - p)."""
    edges = col_us * np.arange(ncols + 1, dtype=np.float64)

    def g(points: np.ndarray) -> np.ndarray:
        rel = points - x0
        b = np.clip(np.floor(rel / col_us).astype(np.int64) + 1, 0, ncols + 1) * ncat + cat
        size = (ncols + 2) * ncat
        n = np.bincount(b, minlength=size).reshape(ncols + 2, ncat).cumsum(0)[: ncols + 1]
        total = np.bincount(b, weights=rel, minlength=size).reshape(ncols + 2, ncat).cumsum(0)[: ncols + 1]
        out: np.ndarray = n * edges[:, None] - total
        return out

    busy: np.ndarray = np.maximum(np.diff(g(start) - g(end), axis=0), 0.0)
    return busy


def aggregate(start: np.ndarray, end: np.ndarray, group: np.ndarray, pixel: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One bar per (pixel column, group) spanning its items; items longer than the 99.9th
    percentile stay on their own so outliers remain visible. For NVTX lanes (group: depth)."""
    long = (end - start) > np.percentile(end - start, 99.9)
    col = np.floor((start - start.min()) / max(pixel, 1e-9)).astype(np.int64)
    key = np.where(long, -1 - np.arange(len(start)), col * 64 + group)  # outliers get a key of their own
    order = np.lexsort((start, key))
    key_s = key[order]
    first = np.nonzero(np.r_[True, key_s[1:] != key_s[:-1]])[0]
    st = np.minimum.reduceat(start[order], first)
    en = np.maximum.reduceat(end[order], first)
    return st, en - st, group[order][first]


@dataclass(frozen=True)
class _View:
    lo: float
    hi: float
    ncols: int

    @property
    def px_us(self) -> float:
        return (self.hi - self.lo) / self.ncols


def _lanes(a: Analysis, frame: Frame, sel: np.ndarray, cat: np.ndarray, ncat: int, view: _View,
           prefix: str = "") -> tuple[Lane, ...]:
    lane = frame.lane_of_kernel[sel]
    order = np.argsort(lane, kind="stable")
    sel, cat, lane = sel[order], cat[order], lane[order]
    bounds = np.searchsorted(lane, np.arange(len(frame.lane_keys) + 1))
    return tuple(_lane(a, frame, key, sel[bounds[i]:bounds[i + 1]], cat[bounds[i]:bounds[i + 1]], ncat, view, prefix)
                 for i, key in enumerate(frame.lane_keys))


def _lane(a: Analysis, frame: Frame, key: tuple[int, int], idx: np.ndarray, cat: np.ndarray, ncat: int,
          view: _View, prefix: str = "") -> Lane:
    """`prefix`: the process of a job ("rank 0"), which labels the lane 'rank 0 GPU 0 stream 7'."""
    st, en = frame.start_us[idx], frame.end_us[idx]
    n, empty = len(idx), np.zeros(0)
    stream = (f"{_plural(len(np.unique(a.trace.kernels.stream[idx])), 'other stream')} (folded)" if key[1] == FOLDED
              else a.trace.stream_label(key[1]))
    name = f"{prefix} GPU {key[0]} {stream}" if prefix else f"GPU{key[0]} {stream}"
    unit = "operation" if a.trace.kernels.kinds()[idx].any() else "kernel"  # copies or memsets on the lane
    if n > MAX_BARS_PER_LANE:
        mix = ColumnMix(view.lo, view.px_us, column_busy(st, en, cat, view.lo, view.px_us, view.ncols, ncat))
        return Lane(label=f"{name} ({_plural(n, unit)}, mixed per column)", device=key[0], stream=key[1],
                    start_us=empty, width_us=empty, category=empty.astype(np.int64), names=(), kernels=n, mix=mix)
    by_start = np.argsort(st, kind="stable")
    idx, st, en, cat = idx[by_start], st[by_start], en[by_start], cat[by_start]
    u, inv = np.unique(a.trace.kernels.name[idx], return_inverse=True)
    short = [short_name(a.trace.strings[int(i)], 60) for i in u]
    return Lane(label=f"{name} ({_plural(n, unit)})", device=key[0], stream=key[1], start_us=st,
                width_us=np.maximum(en - st, MIN_BAR_PX * view.px_us), category=cat, names=tuple(short[i] for i in inv), kernels=n, mix=None)


def _range_lanes(a: Analysis, frame: Frame, view: _View, rx: re.Pattern[str] | None,
                 prefix: str = "") -> tuple[RangeLane, ...]:
    r, t = a.trace.ranges, a.trace
    st_all, en_all = (r.start - frame.t0) / 1e3, (r.end - frame.t0) / 1e3
    ok = (r.end >= 0) & (en_all >= view.lo) & (st_all <= view.hi)
    if rx is not None:
        ok &= _matching(t.strings, r.text, rx)
    out = []
    for tid in np.unique(r.tid[ok]):
        idx = np.nonzero(ok & (r.tid == tid))[0]
        st, en = st_all[idx], en_all[idx]
        depth = _depths(st, en)
        label = (f"{prefix} " if prefix else "") + f"CPU thread {int(tid) & 0xFFFFFF} NVTX"
        if len(idx) > MAX_BARS_PER_LANE:  # one bar per (pixel column, depth), names dropped
            st, wd, depth = aggregate(st, en, depth, view.px_us)
            out.append(RangeLane(label=label + " (aggregated)", start_us=st, width_us=np.maximum(wd, view.px_us), depth=depth, names=(),
                                 aggregated=True))
            continue
        names = tuple(t.strings[int(i)] for i in r.text[idx])
        if float((en - st).max()) < view.px_us:  # else it would look empty: say why it is thin
            label += f" ({_plural(len(idx), 'short range')})"
        out.append(RangeLane(label=label, start_us=st, width_us=np.maximum(en - st, MIN_BAR_PX * view.px_us), depth=depth, names=names,
                             aggregated=False))
    return tuple(out)


def _matching(strings: list[str], sids: np.ndarray, rx: re.Pattern[str]) -> np.ndarray:
    """rx.search on each string id, one search per distinct id."""
    u, inv = np.unique(sids, return_inverse=True)
    hit = np.array([bool(rx.search(strings[int(s)])) if s >= 0 else False for s in u], dtype=bool)
    return hit[inv] if len(u) else np.zeros(len(sids), dtype=bool)


def _depths(st: np.ndarray, en: np.ndarray) -> np.ndarray:
    """Nesting depth of each range: the ranges of its thread started before it and still open when
    it starts (the stack depth for properly nested ranges)."""
    order = np.argsort(st, kind="stable")
    closed = np.searchsorted(np.sort(en), st[order], side="right")
    depth = np.empty(len(st), dtype=np.int64)
    depth[order] = np.maximum(np.arange(len(st)) - closed, 0)
    return depth


# ---- arrows, marks, the whole picture -----------------------------------------------------------

STRIP_NAMES = {EVENT: "event edges", Verdict.UNORDERED.value: "UNORDERED pairs", HAZARD: "hazards"}
MARK_ORDER = (Verdict.UNORDERED.value, HAZARD, Verdict.HOST_SYNCHRONIZED.value, Verdict.EVENT_ORDERED.value,
              Verdict.SAME_STREAM.value)


def event_arrows(edges: EventEdges, frame: Frame, view: _View) -> tuple[list[Arrow], list[Strip]]:
    """Event edges touching the window: arrows while few, else a strip (computed on arrays, no
    object per edge)."""
    p, c = edges.producer, edges.consumer
    lane0, lane1 = frame.lane_of_kernel[p], frame.lane_of_kernel[c]
    x0, x1 = frame.end_us[p], frame.start_us[c]
    ok = (lane0 >= 0) & (lane1 >= 0) & (((x1 >= view.lo) & (x1 <= view.hi)) | ((x0 >= view.lo) & (x0 <= view.hi)))
    if ok.sum() > MAX_ARROWS_PER_KIND:
        return [], [_strip(EVENT, x1[ok], view, 0)]
    return [Arrow(x0_us=float(x0[i]), lane0=int(lane0[i]), x1_us=float(x1[i]), lane1=int(lane1[i]), kind=EVENT, label=f"event {int(edges.key[i])}",
                  producer=int(p[i]), consumer=int(c[i])) for i in np.nonzero(ok)[0]], []


def split_arrows(arrows: Sequence[Arrow], view: _View, totals: dict[str, int]) -> tuple[list[Arrow], list[Strip]]:
    """Arrows touching the window; a kind with more than MAX_ARROWS_PER_KIND becomes a strip.
    `totals`: how many of a kind the trace has, when only some were handed over to draw."""
    seen = [a for a in arrows if view.lo <= a.x1_us <= view.hi or view.lo <= a.x0_us <= view.hi]
    drawn, strips = [], []
    for kind in dict.fromkeys(a.kind for a in seen):
        mine = [a for a in seen if a.kind == kind]
        if len(mine) <= MAX_ARROWS_PER_KIND:
            drawn += mine
        else:
            strips.append(_strip(kind, np.array([a.x1_us for a in mine]), view, totals.get(kind, 0)))
    return drawn, strips


def _strip(kind: str, x1: np.ndarray, view: _View, total: int) -> Strip:
    """Counts per pixel column at the consumer end."""
    counts, _ = np.histogram(np.clip(x1, view.lo, view.hi), bins=view.ncols, range=(view.lo, view.hi))
    of = f" of {total:,}" if total > len(x1) else ""
    label = f"{STRIP_NAMES.get(kind, f'{kind} pairs')}: {len(x1):,}{of} (max {int(counts.max())}/column)"
    return Strip(kind=kind, label=label, x0_us=view.lo, col_us=view.px_us, counts=counts)


def marks_for(arrows: Sequence[Arrow], frame: Frame, sel: np.ndarray, cat: np.ndarray, other: int,
              view: _View) -> tuple[Mark, ...]:
    """Both kernels of every drawn pair or hazard, at least MARK_MIN_PX wide; a kernel in several
    takes the most severe kind. `sel` sorted, `cat` its categories."""
    best: dict[int, str] = {}
    for a in arrows:
        if a.kind == EVENT:
            continue
        for kern in (a.producer, a.consumer):
            if kern not in best or MARK_ORDER.index(a.kind) < MARK_ORDER.index(best[kern]):
                best[kern] = a.kind
    out = []
    for kern, kind in best.items():
        s, e = float(frame.start_us[kern]), float(frame.end_us[kern])
        w = max(e - s, MARK_MIN_PX * view.px_us)
        pos = int(np.searchsorted(sel, kern))
        c = int(cat[pos]) if pos < len(sel) and sel[pos] == kern else other
        out.append(Mark(lane=int(frame.lane_of_kernel[kern]), start_us=(s + e) / 2 - w / 2, width_us=w, category=c, kind=kind, kernel=kern))
    return tuple(out)


@dataclass(frozen=True)
class TimelinePart:
    """One process on the picture's time base: its lanes are labelled `prefix` ("rank 0"; "" for a
    lone trace) and its timestamps + shift_ns are nanoseconds from the picture's origin."""

    prefix: str
    analysis: Analysis
    shift_ns: int


def timeline_data(a: Analysis | JobAnalysis, window: tuple[float, float] | None = None, range_regex: str | None = None,
                  show_pairs: bool = True, width_px: int = 1600) -> TimelineData:
    """What to draw for a figure `width_px` wide: kernels in the window (given, the extent of
    --range, or the default view), pairs and hazards of the analysis, event edges; for a job, every
    process with kernels on the job's aligned time base (job_timeline_data)."""
    if not isinstance(a, Analysis):
        return job_timeline_data(a, window, range_regex, show_pairs, width_px)
    k = a.trace.kernels
    t0 = int(k.start.min()) if len(k) else 0
    return _timeline([TimelinePart("", a, -t0)], window, range_regex, show_pairs, width_px,
                     f"stream timeline: {Path(a.trace.source).name}", ())


def job_timeline_data(ja: JobAnalysis, window: tuple[float, float] | None = None, range_regex: str | None = None,
                      show_pairs: bool = True, width_px: int = 1600) -> TimelineData:
    """Lanes per (rank, device, stream) of every process with kernels, on the job's time base (each
    process's clock offset applied: the alignment error is in the subtitle)."""
    from tracer.analysis.job_summary import shift_of

    parts = [TimelinePart(p.label, a, shift_of(p, ja.summary.origin_unix_ns))
             for p, a in zip(ja.job.processes, ja.analyses) if a is not None and len(a.trace.kernels)]
    if not parts:
        raise UsageError(f"job {ja.job.run_dir}: no process left a trace with kernels to draw"
                         + "".join(f"; {line}" for line in ja.incomplete_lines()))
    c = ja.summary.clock
    clock = f"clocks aligned, error {c.error_ns / 1e3:.1f} us ({c.basis})" if c.error_ns is not None else \
        "clock alignment UNKNOWN"
    missing = ", ".join(f"{p.label} {p.outcome.value.upper()}" for p in ja.incomplete)
    data = _timeline(parts, window, range_regex, show_pairs, width_px, f"stream timeline: job {ja.job.run_dir.name}",
                     (clock,), f"{len(parts)} process{'es' if len(parts) > 1 else ''} with kernels, ",
                     "the first GPU operation of any process (aligned clocks)")
    return replace(data, alert=missing)


def _moved(ar: Arrow, kernels: int, lanes: int) -> Arrow:
    """An arrow of one part in the picture's kernel and lane numbering."""
    return replace(ar, lane0=ar.lane0 + lanes, lane1=ar.lane1 + lanes, producer=ar.producer + kernels,
                   consumer=ar.consumer + kernels)


def _merged_frame(frames: Sequence[Frame]) -> tuple[Frame, np.ndarray, np.ndarray]:
    """The parts' frames as one (kernels and lanes numbered part after part), and each part's first
    kernel and first lane in that numbering."""
    koff = np.cumsum([0] + [len(f.lane_of_kernel) for f in frames])
    loff = np.cumsum([0] + [len(f.lane_keys) for f in frames])
    lane = np.concatenate([np.where(f.lane_of_kernel >= 0, f.lane_of_kernel + loff[i], -1) for i, f in enumerate(frames)])
    return (Frame(t0=0, lane_keys=tuple(key for f in frames for key in f.lane_keys), lane_of_kernel=lane.astype(np.int64),
                  start_us=np.concatenate([f.start_us for f in frames]), end_us=np.concatenate([f.end_us for f in frames])), koff, loff)


def _event_strip(arrows: list[Arrow], strips: list[Strip], view: _View) -> tuple[list[Arrow], list[Strip]]:
    """The event edges of all parts: arrows while few, else one strip (the parts' strips summed)."""
    if not strips and len(arrows) <= MAX_ARROWS_PER_KIND:
        return arrows, []
    if len(strips) == 1 and not arrows:
        return [], strips
    x1 = np.clip(np.array([a.x1_us for a in arrows], dtype=np.float64), view.lo, view.hi)
    counts = np.histogram(x1, bins=view.ncols, range=(view.lo, view.hi))[0] + sum((st.counts for st in strips), 0)
    label = f"{STRIP_NAMES[EVENT]}: {int(counts.sum()):,} (max {int(counts.max())}/column)"
    return [], [Strip(kind=EVENT, label=label, x0_us=view.lo, col_us=view.px_us, counts=counts)]


def _timeline(parts: Sequence[TimelinePart], window: tuple[float, float] | None, range_regex: str | None,
              show_pairs: bool, width_px: int, title: str, extra: tuple[str, ...], counted: str = "",
              time_from: str = "the first GPU operation") -> TimelineData:
    pattern = parse_range(range_regex)
    rx = re.compile(pattern) if pattern is not None else None
    frames = [make_frame(p.analysis, -p.shift_ns) for p in parts]
    frame, koff, loff = _merged_frame(frames)
    base = np.concatenate([_base_kernels(p.analysis, f, rx) + koff[i] for i, (p, f) in enumerate(zip(parts, frames))])
    arrows: list[Arrow] = []
    for i, (p, f) in enumerate(zip(parts, frames)):
        pairs = pairs_to_draw(p.analysis) if show_pairs else []
        mine = arrows_from_pairs(pairs, pair_kernels(pairs), f) + (arrows_from_hazards(hazards_of(p.analysis), f)
                                                                   if show_pairs else [])
        arrows += [_moved(ar, int(koff[i]), int(loff[i])) for ar in mine]
    must = np.array(sorted({k for ar in arrows if ar.kind in (Verdict.UNORDERED.value, HAZARD)
                            for k in (ar.producer, ar.consumer)}), dtype=np.int64)
    lo, hi, why = choose_window(frame, base, window, rx is not None, must)
    view = _View(lo, max(hi, lo + 1e-3), max(1, int(width_px * AXES_SHARE)))
    sel = base[(frame.end_us[base] >= view.lo) & (frame.start_us[base] <= view.hi)]
    sels = [sel[(sel >= koff[i]) & (sel < koff[i + 1])] - koff[i] for i in range(len(parts))]
    color_by, names, cats = joint_categories([(p.analysis, s) for p, s in zip(parts, sels)])
    lanes = tuple(x for p, f, s, c in zip(parts, frames, sels, cats)
                  for x in _lanes(p.analysis, f, s, c, len(names), view, p.prefix))
    ranges = tuple(x for p, f in zip(parts, frames) for x in _range_lanes(p.analysis, f, view, rx, p.prefix))
    _require_shown(parts, frame, int(sel.size), range_regex, window)
    events: tuple[list[Arrow], list[Strip]] = ([], [])
    for i, (p, f) in enumerate(zip(parts, frames)):
        ev, st = event_arrows(event_edges(p.analysis), f, view)
        events[0].extend(_moved(ar, int(koff[i]), int(loff[i])) for ar in ev)
        events[1].extend(st)
    drawn, strips = _event_strip(*events, view)
    totals = sum((Counter(p.analysis.pair_counts) for p in parts), Counter())
    more, more_strips = split_arrows(arrows, view, dict(totals))
    drawn, strips = drawn + more, strips + more_strips
    other = names.index(OTHER) if OTHER in names else len(names)
    marks = marks_for(more, frame, sel, np.concatenate(cats) if cats else np.zeros(0, dtype=np.int64), other, view)
    unit = time_unit(view.hi - view.lo)
    title = f"{title}  ({counted}{_plural(len(lanes), 'GPU lane')}, {_plural(len(ranges), 'CPU lane')})"
    drawn_unordered = sum(ar.kind == Verdict.UNORDERED.value for ar in drawn) + sum(
        int(st.counts.sum()) for st in strips if st.kind == Verdict.UNORDERED.value)
    modes = {pair_mode(p.analysis.pair_spec) for p in parts}
    subtitle = _subtitle(modes.pop() if len(modes) == 1 else "mixed", totals.get(Verdict.UNORDERED.value, 0),
                         sum(len(hazards_of(p.analysis)) for p in parts), range_regex, view, unit, why, color_by,
                         drawn_unordered)
    return TimelineData(title=title, subtitle="  ·  ".join((subtitle, *extra)), hint=_hint(view, unit, why), window_us=(view.lo, view.hi), unit=unit,
                        color_by=color_by, categories=names, lanes=lanes, range_lanes=ranges, arrows=tuple(drawn), marks=marks, strips=tuple(strips),
                        time_from=time_from)


def _require_shown(parts: Sequence[TimelinePart], frame: Frame, shown: int, range_regex: str | None,
                   window: tuple[float, float] | None) -> None:
    """A picture with no kernel is an error: the lone trace's (selection.require_shown), or the job's."""
    if shown or len(parts) == 1:
        a = parts[0].analysis
        require_shown(a.trace, a.attribution, shown, range_regex, window)
        return
    if range_regex is None and window is not None:
        raise UsageError(f"--window {window[0]:g}:{window[1]:g} holds no GPU operation (times are microseconds from the first "
                         f"GPU operation of any process; the operations run from 0 to {float(frame.end_us.max()):.0f} us)")
    biggest = max(parts, key=lambda p: len(p.analysis.trace.kernels)).analysis
    require_shown(biggest.trace, biggest.attribution, shown, range_regex, window)


def _base_kernels(a: Analysis, frame: Frame, rx: re.Pattern[str] | None) -> np.ndarray:
    """Kernels with a lane, and with a range matching --range when given."""
    ok = frame.lane_of_kernel >= 0
    if rx is None:
        return np.nonzero(ok)[0]
    t, rng = a.trace, a.attribution.range_of_kernel
    sid = np.where(rng >= 0, t.ranges.text[np.maximum(rng, 0)] if len(t.ranges.text) else -1, -1)
    return np.nonzero(ok & _matching(t.strings, sid, rx))[0]


def _fmt(x_us: float, unit: tuple[str, float]) -> str:
    return f"{x_us / unit[1]:.6g}"


def _subtitle(mode: str, unordered: int, hazards: int, regex: str | None, view: _View, unit: tuple[str, float],
              why: str, color_by: str, drawn_unordered: int) -> str:
    parts = [f"range {regex!r}"] if regex else []
    parts.append(f"window {_fmt(view.lo, unit)}-{_fmt(view.hi, unit)} {unit[0]} ({why})")
    parts.append(f"colour: {color_by}")
    if mode != "none":
        parts.append(f"pairs {mode}: {unordered:,} UNORDERED in the trace, {drawn_unordered:,} drawn")
    if hazards:
        parts.append(f"{_plural(hazards, 'hazard')} listed")
    return "  ·  ".join(parts)


def _hint(view: _View, unit: tuple[str, float], why: str) -> str:
    name = "us" if unit[0] == "µs" else unit[0]
    lo, hi = view.lo, view.lo + (view.hi - view.lo) / 10
    zoom = f"zoom: --window {_fmt(lo, unit)}{name}:{_fmt(hi, unit)}{name} (or plain microseconds), --range REGEX"
    return zoom + ("" if why in ("whole trace", "as given") else "; whole trace: --window 0:")
